package pkeyread_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// BenchmarkRead reads every host port of a simulated fabric and the switch
// port facing it (one op: all of them), with a real OpenSM's tables, on 1 and
// 4 workers, placed as the manager places them (OpenSM's subnet dump, the
// directed routes included). ports/s is the figure to compare; ibsim answers
// one MAD at a time, so more workers help only while the client side is the
// bottleneck. 1,000 hosts on 16 switches are all within the 16 switches
// ibsim forwards a LID-routed SMP across; 1,500 on 40 are not: the hosts
// behind the 17th switch and beyond are read by directed route, each after
// one LID-routed NodeInfo that gets no answer.
func BenchmarkRead(b *testing.B) {
	for _, size := range []struct{ hosts, switches int }{{4, 1}, {100, 4}, {1000, 16}, {1500, 40}} {
		// Each fabric in its own sub-benchmark: -bench 'Read/hosts=4/'
		// starts only the small one.
		b.Run(sizeName(size.hosts, size.switches), func(b *testing.B) {
			f := sweptFabric(b, size.hosts, size.switches)
			tg := dumpTargets(b, f)
			for _, workers := range []int{1, 4} {
				b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
					benchmarkRead(b, simReader(b, f), workers, tg)
				})
			}
		})
	}
}

// benchmarkRead reads targets with r on workers.
func benchmarkRead(b *testing.B, r *pkeyread.Reader, workers int, tg []pkeyread.Target) {
	r.Workers = workers
	for b.Loop() {
		for _, res := range r.Read(b.Context(), tg) {
			if res.Err != nil {
				b.Fatal(res.Err)
			}
		}
	}
	b.ReportMetric(float64(len(tg)*b.N)/b.Elapsed().Seconds(), "ports/s")
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N*len(tg)), "ms/port")
}

// BenchmarkReadCost is what reading tables back costs the manager, on
// fabrics of 1,500 hosts on 16 switches (about 94 hosts each: within the 16
// switches of the chain ibsim forwards a LID-routed SMP across) and on 40
// (the hosts behind the 17th switch and beyond read by directed route), and
// one of 4 (one switch), with a real OpenSM's tables, the targets placed as
// the manager places them. One op is one whole read:
//   - bootstorm=1000: the read-back proof of the 1,000 host ports a boot storm
//     changed (each port and the switch port facing it);
//   - audit: the reads of a full audit, every host port (every host is a
//     member of the default partition) and the switch port facing it. The
//     audit's own logic compares what is read with the recorded state, in
//     memory: its cost is this read's.
//
// On 4 and 8 workers (ibsim serves 10 clients, OpenSM is one). Besides the
// time it reports the MADs sent, per port (a host port and its switch port)
// and per read. Each fabric is started in its own sub-benchmark, so that
// -bench 'ReadCost/hosts=4/' starts only the small one.
func BenchmarkReadCost(b *testing.B) {
	for _, size := range []struct{ hosts, switches int }{{4, 1}, {1500, 16}, {1500, 40}} {
		b.Run(sizeName(size.hosts, size.switches), func(b *testing.B) {
			f := sweptFabric(b, size.hosts, size.switches)
			all := dumpTargets(b, f)
			type read struct {
				name    string
				targets []pkeyread.Target
			}
			reads := []read{{"audit", all}}
			if len(all) >= 1000 {
				reads = []read{{"bootstorm=1000", all[:1000]}, {"audit", all}}
			}
			for _, read := range reads {
				for _, workers := range []int{4, 8} {
					b.Run(fmt.Sprintf("%s/workers=%d", read.name, workers), func(b *testing.B) {
						benchmarkReadCost(b, simReader(b, f), workers, read.targets)
					})
				}
			}
		})
	}
}

// sizeName names a fabric's sub-benchmark: "hosts=1500" (the names of
// the sizes within ibsim's 16 switches, kept for comparison with earlier
// runs), "hosts=1500,switches=40" beyond.
func sizeName(hosts, switches int) string {
	if switches > 16 {
		return fmt.Sprintf("hosts=%d,switches=%d", hosts, switches)
	}
	return fmt.Sprintf("hosts=%d", hosts)
}

// benchmarkReadCost reads targets with r on workers, counting the MADs.
func benchmarkReadCost(b *testing.B, r *pkeyread.Reader, workers int, targets []pkeyread.Target) {
	r.Workers = workers
	counted := &countingDialer{Dialer: r.Dialer}
	r.Dialer = counted
	cpu := processCPU(b)
	for b.Loop() {
		for _, res := range r.Read(b.Context(), targets) {
			if res.Err != nil {
				b.Fatal(res.Err)
			}
		}
	}
	cpu = processCPU(b) - cpu
	mads := float64(counted.mads.Load())
	// The reader's own CPU (this process: ibsim and OpenSM are others), which
	// the machine's load changes far less than the time.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*len(targets)), "cpu-µs/port")
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/read")
	b.ReportMetric(mads/float64(b.N*len(targets)), "MADs/port")
	b.ReportMetric(mads/float64(b.N), "MADs/read")
}

// processCPU is this process's CPU time so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingDialer counts the MADs sent on its connections.
type countingDialer struct {
	pkeyread.Dialer
	mads atomic.Int64
}

func (d *countingDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	c, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, mads: &d.mads}, nil
}

type countingConn struct {
	pkeyread.Conn
	mads *atomic.Int64
}

func (c countingConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	c.mads.Add(1)
	return c.Conn.Send(ctx, lid, mad)
}

// Concurrent is the counted Conn's: counting does not serialize its Sends.
func (c countingConn) Concurrent() bool {
	cc, ok := c.Conn.(interface{ Concurrent() bool })
	return ok && cc.Concurrent()
}

// BenchmarkReadCancelled is a Read of 1,500 ports whose context has ended
// (an audit that gives way to a change): what it costs before the caller
// hears of it.
func BenchmarkReadCancelled(b *testing.B) {
	targets := make([]pkeyread.Target, 1500)
	for i := range targets {
		targets[i] = pkeyread.Target{Port: fabric.GUID(0x0002c90300000001 + uint64(i)*0x100), LID: uint16(i + 17)}
	}
	r := &pkeyread.Reader{Dialer: pkeyread.SimDialer{}, Workers: 4}
	ctx, cancel := context.WithCancel(b.Context())
	cancel()
	for b.Loop() {
		for _, res := range r.Read(ctx, targets) {
			if !errors.Is(res.Err, pkeyread.ErrNotRead) {
				b.Fatalf("a port of a cancelled read: %v", res.Err)
			}
		}
	}
}
