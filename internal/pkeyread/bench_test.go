package pkeyread_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// BenchmarkRead reads every host port of a simulated fabric and the switch
// port facing it (one op: all of them), with a real OpenSM's tables, on 1 and
// 4 workers. ports/s is the figure to compare; ibsim answers one MAD at a
// time, so more workers help only while the client side is the bottleneck.
// 1,000 hosts hang on 16 switches: ibsim forwards a LID-routed MAD across at
// most 16 switches of the harness's chain (smpquery fails the same way beyond).
func BenchmarkRead(b *testing.B) {
	for _, size := range []struct{ hosts, switches int }{{4, 1}, {100, 4}, {1000, 16}} {
		f := sweptFabric(b, size.hosts, size.switches)
		tg := targets(b, f)
		for _, workers := range []int{1, 4} {
			b.Run(fmt.Sprintf("hosts=%d/workers=%d", size.hosts, workers), func(b *testing.B) {
				r := simReader(b, f)
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
			})
		}
	}
}

// BenchmarkReadCost is what reading tables back costs the manager, on a
// fabric of 1,500 hosts (16 switches of about 94 hosts each: within the 16
// switches of the chain ibsim forwards a LID-routed MAD across) and one of 4
// (one switch), with a real OpenSM's tables. One op is one whole read:
//   - bootstorm: the read-back proof of the 1,000 host ports a boot storm
//     changed (each port and the switch port facing it), on 4 and 8 workers
//     (ibsim serves 10 clients, OpenSM is one);
//   - audit: the reads of a full audit, every host port (every host is a
//     member of the default partition) and the switch port facing it. The
//     audit's own logic compares what is read with the recorded state, in
//     memory: its cost is this read's.
//
// Besides the time it reports the MADs sent: per port (a host port and its
// switch port) and per op.
func BenchmarkReadCost(b *testing.B) {
	large := sweptFabric(b, 1500, 16)
	small := sweptFabric(b, 4, 1)
	storm := targets(b, large)[:1000]
	for _, c := range []struct {
		name    string
		f       *fabricsim.Fabric
		targets []pkeyread.Target
		workers int
	}{
		{"bootstorm/ports=1000/workers=4", large, storm, 4},
		{"bootstorm/ports=1000/workers=8", large, storm, 8},
		{"audit/hosts=4/workers=4", small, targets(b, small), 4},
		{"audit/hosts=1500/workers=4", large, targets(b, large), 4},
		{"audit/hosts=1500/workers=8", large, targets(b, large), 8},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := simReader(b, c.f)
			r.Workers = c.workers
			counted := &countingDialer{Dialer: r.Dialer}
			r.Dialer = counted
			for b.Loop() {
				for _, res := range r.Read(b.Context(), c.targets) {
					if res.Err != nil {
						b.Fatal(res.Err)
					}
				}
			}
			mads := float64(counted.mads.Load())
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/read")
			b.ReportMetric(mads/float64(b.N*len(c.targets)), "MADs/port")
			b.ReportMetric(mads/float64(b.N), "MADs/read")
		})
	}
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
