package applier

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// BenchmarkTermFirstApply is a term's first apply on a fabric of 1,500
// hosts (a one-port change), its second-SM look answered by the fake SMP
// fabric: after-sweep-ms is what the apply spent from the sweep's end to
// the jobs' commit (verify and complete: the fake answers cost nothing, so
// it is the manager's own work), finish-look-SMPs the SMPs of the look
// finish ran there (times BenchmarkReadSMs' ms/port for the simulator's
// time), looks the full and short looks the apply ran in all. OpenSM's
// sweep takes benchSweep, as a sweep of that fabric takes hundreds of ms.
func BenchmarkTermFirstApply(b *testing.B) {
	var afterSweep time.Duration
	var finishSMPs, looks int64
	for range b.N {
		b.StopTimer()
		r, dialer, phases := newFirstApplyRig(b, 1500)
		r.network(101)
		r.portIn(r.netID, "port-h2", hostPort(2))
		b.StartTimer()
		r.applied("the term's first apply")
		b.StopTimer()
		afterSweep += phases.afterSweep()
		sent := dialer.looks()
		finishSMPs += sent[len(sent)-1]
		looks += int64(len(sent))
	}
	b.ReportMetric(float64(afterSweep.Microseconds())/1e3/float64(b.N), "after-sweep-ms/op")
	b.ReportMetric(float64(finishSMPs)/float64(b.N), "finish-look-SMPs/op")
	b.ReportMetric(float64(looks)/float64(b.N), "looks/op")
}

// newFirstApplyRig is newLookRig's fabric of hosts hosts before the term's
// first apply, its looks' SMPs counted by connection and its phases kept.
func newFirstApplyRig(b *testing.B, hosts int) (*lookRig, *countingDialer, *phaseObserver) {
	switches := 40
	r := &lookRig{applyRig: newApplyRig(b, false, func() string { return heavySweep("") }),
		smp: newWideFakeSMPFabric(hosts, switches)}
	dump, sws := largeDump(hosts, switches)
	if err := os.WriteFile(r.dump, []byte(dump), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := r.st.ConfirmSwitches(b.Context(), sws); err != nil {
		b.Fatal(err)
	}
	// The sweep's lines come benchSweep after the SIGHUP.
	r.sm.sweep = func() string {
		go func() {
			time.Sleep(benchSweep)
			if err := opensmtest.Append(r.sm.log, heavySweep("")); err != nil {
				panic(err)
			}
		}()
		return ""
	}
	phases := &phaseObserver{}
	r.term.Observer = phases
	r.term.Log = slog.New(slog.DiscardHandler)
	r.term.Cfg.Readback = &pkeyread.Reader{}
	r.term.readTables = &silentPorts{}
	dialer := &countingDialer{Dialer: r.smp}
	r.term.SecondSM = &SecondSMCheck{Dialer: dialer, Own: hostPort(1), Store: r.st}
	r.term.secondSM = &secondSMWatch{check: r.term.SecondSM}
	r.term.secondSM.restore(b.Context(), r.term.watchEnv())
	return r, dialer, phases
}

// benchSweep is BenchmarkTermFirstApply's sweep: less than OpenSM's of
// 1,500 hosts on the simulator (300 ms and more).
const benchSweep = 100 * time.Millisecond

// countingDialer counts the SMPs sent on each of its connections: one a
// look.
type countingDialer struct {
	pkeyread.Dialer
	mu   sync.Mutex
	sent []int64 // by connection, in the order dialled
}

func (d *countingDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	c, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent = append(d.sent, 0)
	return &countingConn{Conn: c, d: d, i: len(d.sent) - 1}, nil
}

func (d *countingDialer) looks() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int64(nil), d.sent...)
}

type countingConn struct {
	pkeyread.Conn
	d *countingDialer
	i int
}

func (c *countingConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	c.d.mu.Lock()
	c.d.sent[c.i]++
	c.d.mu.Unlock()
	return c.Conn.Send(ctx, lid, mad)
}

// phaseObserver keeps the phases of the last clean apply.
type phaseObserver struct {
	mu     sync.Mutex
	phases map[string]time.Duration
}

func (o *phaseObserver) ApplyFinished(string, time.Duration) {}
func (o *phaseObserver) Alive()                              {}
func (o *phaseObserver) Applied(_, _ int64, phases map[string]time.Duration) {
	o.mu.Lock()
	o.phases = phases
	o.mu.Unlock()
}

func (o *phaseObserver) afterSweep() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.phases["verify"] + o.phases["complete"]
}
