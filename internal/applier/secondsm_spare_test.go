package applier

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// sweepDialer is the look rig's SMP fabric as a Dialer that tells, of each
// connection, whether it was dialed after the sweep's end, and counts the
// connections closed.
type sweepDialer struct {
	fabric *fakeSMPFabric
	ended  *atomic.Bool // the sweep's end is in OpenSM's log
	dialed chan struct{}

	mu          sync.Mutex
	afterTheEnd []bool // of each Dial
	closed      int
}

func (d *sweepDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	d.mu.Lock()
	d.afterTheEnd = append(d.afterTheEnd, d.ended.Load())
	d.mu.Unlock()
	select {
	case d.dialed <- struct{}{}:
	default:
	}
	conn, err := d.fabric.Dial(ctx)
	return &closeCounted{Conn: conn, d: d}, err
}

func (d *sweepDialer) dials() (afterTheEnd []bool, closed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]bool(nil), d.afterTheEnd...), d.closed
}

type closeCounted struct {
	pkeyread.Conn
	d *sweepDialer
}

func (c *closeCounted) Close() error {
	c.d.mu.Lock()
	c.d.closed++
	c.d.mu.Unlock()
	return c.Conn.Close()
}

// newSpareRig is the look rig whose sweeps end (SUBNET UP logged) only once
// a connection was dialed, or after a while, and then run end: OpenSM's
// sweep outlasting the manager's dial, as on a real fabric.
func newSpareRig(t *testing.T, end func(log string)) (*lookRig, *sweepDialer) {
	r, ds := newSpareRigOf(t, 1, end)
	return r, ds[0]
}

// newSpareRigOf is newSpareRig whose sweeps end once n connections were
// dialed: the look's (the first dialer, the second SM check's) and the
// read-back's (the second, its Reader's through a pkeyread.Ahead), for n 2.
func newSpareRigOf(t *testing.T, n int, end func(log string)) (*lookRig, []*sweepDialer) {
	r := newLookRig(t, 4)
	ended, dialed := &atomic.Bool{}, make(chan struct{}, n)
	var ds []*sweepDialer
	for range n {
		ds = append(ds, &sweepDialer{fabric: r.smp, ended: ended, dialed: dialed})
	}
	r.term.SecondSM.Dialer = &pkeyread.Ahead{Dialer: ds[0]}
	if n > 1 {
		r.term.Cfg.Readback = &pkeyread.Reader{Dialer: &pkeyread.Ahead{Dialer: ds[1]}} // the fake reads
	}
	var sweeps sync.WaitGroup
	t.Cleanup(sweeps.Wait)
	r.sm.sweep = func() string {
		sweeps.Go(func() {
			timeout := time.After(5 * time.Second) // only a sweep no dial came beside gets there
			for range n {
				select {
				case <-dialed:
				case <-timeout:
				}
			}
			end(r.sm.log)
		})
		return logBox("state_mgr_sweep_hop_0", "INITIATING HEAVY SWEEP")
	}
	return r, ds
}

// TestReadBackConnectionPreparedBesideTheSweep: the read-back's connection
// is attached while the sweep runs, and one no read took (the reads here
// are the rig's fake) is closed by the apply's end: nothing of the apply
// holds a simulator place after it.
func TestReadBackConnectionPreparedBesideTheSweep(t *testing.T) {
	var ds []*sweepDialer
	r, ds := newSpareRigOf(t, 2, func(log string) {
		ds[0].ended.Store(true)
		if err := opensmtest.Append(log, logLine(0x02, "osm_pkey_mgr: PKEY setup completed - STARTING SM LID CONFIG")+
			logLine(0x80, "SUBNET UP")); err != nil {
			t.Error(err)
		}
	})
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("H2's port")
	wantStatus(t, r.applyRig, "H2's port", j, store.StatusCompleted)
	after, closed := ds[1].dials()
	if len(after) != 1 || after[0] {
		t.Errorf("read-back connections dialed (true: after the sweep's end): %v; want one, dialed before the end", after)
	}
	if closed != 1 {
		t.Errorf("%d of the read-back's connections closed; want the one no read took", closed)
	}
}

// TestFinishLookOnAConnectionDialedBesideTheSweep: the look before a
// change's jobs complete sends its SMPs, every one after the sweep's end,
// on a connection dialed while the sweep ran, then closed.
func TestFinishLookOnAConnectionDialedBesideTheSweep(t *testing.T) {
	var smpsBeforeTheEnd atomic.Int64
	var d *sweepDialer
	r, d := newSpareRig(t, func(log string) {
		d.ended.Store(true)
		if err := opensmtest.Append(log, logLine(0x02, "osm_pkey_mgr: PKEY setup completed - STARTING SM LID CONFIG")+
			logLine(0x80, "SUBNET UP")); err != nil {
			t.Error(err)
		}
	})
	r.smp.mu.Lock()
	r.smp.answered = func(uint16, uint16) {
		if !d.ended.Load() {
			smpsBeforeTheEnd.Add(1)
		}
	}
	r.smp.mu.Unlock()
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("H2's port")
	wantStatus(t, r.applyRig, "H2's port", j, store.StatusCompleted)
	after, closed := d.dials()
	if len(after) != 1 || after[0] {
		t.Errorf("connections dialed (true: after the sweep's end): %v; want one, dialed before the end", after)
	}
	if closed != len(after) {
		t.Errorf("%d of %d connections closed; want every one", closed, len(after))
	}
	if n := smpsBeforeTheEnd.Load(); n != 0 {
		t.Errorf("%d SMPs answered before the sweep's end; want none (the look reads after it)", n)
	}
	if sent := r.smp.sent.Load(); sent == 0 {
		t.Error("the look sent no SMP")
	}
}

// TestSpareConnectionOfAnEndedTermIsClosed: the term ends while its apply's
// sweep runs, a connection dialed beside it: no look comes, the apply's end
// closes it, and no connection is left open for the next term to find.
func TestSpareConnectionOfAnEndedTermIsClosed(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r, d := newSpareRig(t, func(string) { cancel() }) // the sweep never ends
	r.portIn(r.netID, "port-h2", hostPort(2))
	if res := r.term.apply(ctx); res == applyDone {
		t.Fatalf("apply of an ended term: %v", res)
	}
	after, closed := d.dials()
	if len(after) != 1 || closed != 1 {
		t.Errorf("%d connections dialed, %d closed; want the one dialed beside the sweep, closed", len(after), closed)
	}
}
