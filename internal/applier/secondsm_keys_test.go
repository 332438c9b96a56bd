package applier

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// keyedFabric is the look rig's SMP fabric behind M_Key protection, taking
// overlapping Sends (as the simulator's and the umad transport's do): a
// port answers only SMPs carrying its M_Key (want), and each SMP's key is
// noted. before, when set, runs before each SMP is answered.
type keyedFabric struct {
	*fakeSMPFabric
	before func(ctx context.Context, lid, attr uint16) error

	mu    sync.Mutex
	want  uint64
	sent  []uint64 // the M_Key of each SMP sent
	dials int
}

func (f *keyedFabric) Dial(context.Context) (pkeyread.Conn, error) {
	f.mu.Lock()
	f.dials++
	f.mu.Unlock()
	return f, nil
}

func (f *keyedFabric) Concurrent() bool { return true }

func (f *keyedFabric) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	key := binary.BigEndian.Uint64(mad[24:32]) // the SMP's M_Key
	f.mu.Lock()
	f.sent = append(f.sent, key)
	want := f.want
	f.mu.Unlock()
	if key != want {
		return nil, errors.New("no answer: the port's M_Key is another") // a protected port drops it
	}
	if f.before != nil {
		if err := f.before(ctx, lid, binary.BigEndian.Uint16(mad[16:18])); err != nil {
			return nil, err
		}
	}
	return f.fakeSMPFabric.Send(ctx, lid, mad)
}

// keys are the M_Keys sent since the last call.
func (f *keyedFabric) keys() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	sent := f.sent
	f.sent = nil
	return sent
}

// TestLookReadsTheMKeysBesideItsSMPs: finish's second-SM look reads the
// recorded M_Keys from the database on the path of every change's
// completion; it sends its SMPs with the keys the last look was given
// meanwhile, the own port's and the changed port's, instead of waiting for
// the read (a round trip). Here the keys' read answers only once the fabric
// has answered the changed port's PortInfo: a look that waits for the keys
// before any of its SMPs waits in vain, and fails at its bound.
func TestLookReadsTheMKeysBesideItsSMPs(t *testing.T) {
	const key = 0x00000000000a11ce
	r := newLookRig(t, 4)
	f := &keyedFabric{fakeSMPFabric: r.smp, want: key}
	r.term.SecondSM.Dialer = f
	var mu sync.Mutex
	var answered chan struct{} // nil: the keys answer at once
	overlapped := map[int]bool{}
	calls := 0
	r.term.SecondSM.MKeys = func(ctx context.Context) ([]uint64, error) {
		mu.Lock()
		calls++
		call, wait := calls, answered
		mu.Unlock()
		if wait != nil {
			select {
			case <-wait:
				mu.Lock()
				overlapped[call] = true
				mu.Unlock()
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []uint64{key}, nil
	}
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("H2's port, the keys read first")
	wantStatus(t, r.applyRig, "H2's port", j, store.StatusCompleted)

	ch := make(chan struct{}, 64)
	r.smp.mu.Lock()
	r.smp.answered = func(lid, attr uint16) {
		if lid == 2+1 || attr != 0x0015 { // H1's (this OpenSM's) port, or not a PortInfo
			return
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	r.smp.mu.Unlock()
	mu.Lock()
	answered, calls = ch, 0
	mu.Unlock()
	f.keys()
	j = r.portIn(r.netID, "port-h3", hostPort(3))
	r.applied("H3's port, the keys read beside the SMPs")
	wantStatus(t, r.applyRig, "H3's port", j, store.StatusCompleted)
	mu.Lock()
	defer mu.Unlock()
	if calls == 0 || !overlapped[1] {
		t.Fatalf("the look read the keys %d times, beside its SMPs: %v; want its first read answered after an SMP was", calls, overlapped)
	}
	if sent := f.keys(); len(sent) == 0 || slices.ContainsFunc(sent, func(k uint64) bool { return k != key }) {
		t.Fatalf("the look's SMPs carried the M_Keys %x; want every one the recorded key", sent)
	}
}

// TestLookAfterAKeyRotation: the keys recorded now are not the ones the last
// look was given (--rotate-keys, and the ports moved to the new key): what
// the SMPs sent with the old keys read does not stand, the own port is read
// again with the keys recorded now, and the look's scan carries the key that
// answered. The change's job completes on that look.
func TestLookAfterAKeyRotation(t *testing.T) {
	const old, rotated = 0x00000000000a11ce, 0x000000000000b0b0
	r := newLookRig(t, 4)
	f := &keyedFabric{fakeSMPFabric: r.smp, want: old}
	r.term.SecondSM.Dialer = f
	var mu sync.Mutex
	recorded := []uint64{old}
	r.term.SecondSM.MKeys = func(context.Context) ([]uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(recorded), nil
	}
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("H2's port, before the rotation")
	wantStatus(t, r.applyRig, "H2's port", j, store.StatusCompleted)

	mu.Lock()
	recorded = []uint64{rotated, old}
	mu.Unlock()
	f.mu.Lock()
	f.want, f.dials = rotated, 0
	f.mu.Unlock()
	f.keys()
	j = r.portIn(r.netID, "port-h3", hostPort(3))
	r.applied("H3's port, after the rotation")
	wantStatus(t, r.applyRig, "H3's port", j, store.StatusCompleted)
	sent := f.keys()
	if len(sent) == 0 || sent[len(sent)-1] != rotated {
		t.Fatalf("the look's SMPs carried the M_Keys %x; want the last ones the rotated key", sent)
	}
	f.mu.Lock()
	dials := f.dials
	f.mu.Unlock()
	if dials != 3 {
		// The look with the last keys, the one with the keys recorded now,
		// and its scan again: the one sent ahead carried the key the own
		// port answered to before the rotation, and was cut short.
		t.Errorf("the looks dialed %d connections; want 3, the scan cut short going again on a connection of its own", dials)
	}
	if rs := r.term.secondSM.reason(); len(rs) != 0 {
		t.Fatalf("after the rotation the gate says %v; want it open", rs)
	}
}

// TestLookScansThePlacesBesideTheOwnPort: on a connection that takes
// overlapping Sends, finish's look sends the changed port's PortInfo with
// this OpenSM's port's SMPs, one round, not the own port's and then the
// places'. Here the own port's NodeInfo is answered only once the changed
// port's PortInfo has been sent: a look that waits for the own port first
// waits in vain, and fails at its bound.
func TestLookScansThePlacesBesideTheOwnPort(t *testing.T) {
	r := newLookRig(t, 4)
	placeSent := make(chan struct{})
	var once sync.Once
	f := &keyedFabric{fakeSMPFabric: r.smp, before: func(ctx context.Context, lid, attr uint16) error {
		switch {
		case lid != 2+1 && attr == 0x0015: // a place's PortInfo
			once.Do(func() { close(placeSent) })
		case lid == 2+1 && attr == 0x0011: // this OpenSM's port's NodeInfo
			select {
			case <-placeSent:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	r.term.SecondSM.Dialer = f
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("H2's port")
	wantStatus(t, r.applyRig, "H2's port, its place scanned beside this OpenSM's port", j, store.StatusCompleted)
}

// TestKeysReadBesideTheSweep: with KeysAhead (the manager's recorded
// M_Keys), an apply starts the keys' read once its file is written, beside
// the sweep, and holds it until its jobs are settled: the look after the
// sweep's end (and the read-back) are given what that read found, not a
// database round trip each on the change's path.
func TestKeysReadBesideTheSweep(t *testing.T) {
	const key = 0x00000000000a11ce
	r := newLookRig(t, 4)
	r.term.SecondSM.Dialer = &keyedFabric{fakeSMPFabric: r.smp, want: key}
	var mu sync.Mutex
	var begun, held, outside int
	var fileAtBegin []byte
	ahead := false
	r.term.Cfg.KeysAhead = func(context.Context) func() {
		mu.Lock()
		defer mu.Unlock()
		begun++
		ahead = true
		fileAtBegin, _ = os.ReadFile(r.term.Cfg.PartitionsFile)
		return func() {
			mu.Lock()
			ahead = false
			mu.Unlock()
		}
	}
	r.term.SecondSM.MKeys = func(context.Context) ([]uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		if ahead {
			held++
		} else {
			outside++
		}
		return []uint64{key}, nil
	}
	j := r.portIn(r.netID, "port-h3", hostPort(3))
	r.applied("H3's port")
	wantStatus(t, r.applyRig, "H3's port", j, store.StatusCompleted)
	mu.Lock()
	defer mu.Unlock()
	if begun != 1 || ahead {
		t.Fatalf("the apply started %d reads of the keys ahead (one still held: %v); want one, released", begun, ahead)
	}
	if !strings.Contains(string(fileAtBegin), hostPort(3).String()) {
		t.Errorf("the keys' read began before the apply's file was written:\n%s", fileAtBegin)
	}
	if held == 0 || outside != 0 {
		t.Errorf("the look asked for the keys %d times while the read ahead was held, %d times outside it; want every time held",
			held, outside)
	}
}
