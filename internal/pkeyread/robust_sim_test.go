package pkeyread_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// dumpTargets are the fabric's hosts as OpenSM's subnet dump places them,
// directed routes included (what the manager reads).
func dumpTargets(t testing.TB, f *fabricsim.Fabric) []pkeyread.Target {
	t.Helper()
	topo, err := topology.Load(filepath.Join(f.Dir, topology.FileName))
	if err != nil {
		t.Fatal(err)
	}
	var ports []fabric.GUID
	for _, h := range f.Hosts {
		ports = append(ports, h.PortGUID)
	}
	tg, missing := pkeyread.Targets(topo, ports)
	if len(missing) > 0 {
		t.Fatalf("hosts missing from OpenSM's subnet dump: %v", missing)
	}
	return tg
}

func sim(t testing.TB, f *fabricsim.Fabric, command string) {
	t.Helper()
	if _, err := f.Sim(t.Context(), command); err != nil {
		t.Fatalf("ibsim %s: %v", command, err)
	}
}

// TestReadDroppedAnswers: ibsim drops half of the SMPs to H1 and H3 (its
// error injection, every attribute); a read sends each lost one again and
// reads every port, by LID alone and with the dump's directed routes. The
// lost SMPs cost retries, not the ports.
func TestReadDroppedAnswers(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	r := simReader(t, f)
	rec := newRecordingDialer(r.Dialer, nil)
	r.Dialer = rec
	sim(t, f, `Error "H1"[1] 50`)
	sim(t, f, `Error "H3"[1] 50`)
	for name, tg := range map[string][]pkeyread.Target{"by LID": targets(t, f), "with routes": dumpTargets(t, f)} {
		for range 3 {
			for _, res := range r.Read(t.Context(), tg) {
				if res.Err != nil {
					t.Errorf("%s: %s, half of whose SMPs are dropped: %v", name, res.Target.Port, res.Err)
				}
			}
		}
	}
}

// TestReadDelayedAnswers: the first NodeInfo to each port goes unanswered
// until the wait for it ends (an answer later than the wait is one lost on
// the wire, as the kernel's transport sees it); each is sent again within
// the port's deadline, and every port is read.
func TestReadDelayedAnswers(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	r := simReader(t, f)
	r.PortTimeout = time.Second
	seen := map[uint16]bool{}
	rec := newRecordingDialer(r.Dialer, func(s sent) bool {
		if s.attr != attrNodeInfo || seen[s.lid] {
			return false
		}
		seen[s.lid] = true // under the dialer's lock
		return true
	})
	rec.wait = true
	r.Dialer = rec
	tg := targets(t, f)
	for _, res := range r.Read(t.Context(), tg) {
		if res.Err != nil {
			t.Errorf("%s, whose first NodeInfo went unanswered: %v", res.Target.Port, res.Err)
		}
	}
	counts := rec.counts()
	for _, x := range tg {
		if n := counts[sent{x.LID, attrNodeInfo}]; n != 2 {
			t.Errorf("%s: NodeInfo sent %d times, want twice (the unanswered one, once again)", x.Port, n)
		}
	}
}

// TestReadCancelled: a read whose context is cancelled while a port's SMPs
// go unanswered returns at once: every port not read says the context's
// error, and no worker is left behind.
func TestReadCancelled(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	r := simReader(t, f)
	tg := targets(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rec := newRecordingDialer(r.Dialer, func(s sent) bool {
		if s.lid == tg[2].LID {
			cancel() // H3's first SMP: lost, and the read cancelled
			return true
		}
		return false
	})
	r.Dialer = rec
	before := runtime.NumGoroutine()
	results := r.Read(ctx, tg)
	for _, res := range results {
		if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
			t.Errorf("%s: %v, want the context's error", res.Target.Port, res.Err)
		}
	}
	if !errors.Is(results[2].Err, context.Canceled) {
		t.Errorf("H3, read when the context was cancelled: %v", results[2].Err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the read, %d before", n, before)
	}
}

// TestReadLongChain: on a chain of 40 switches, one host each, ibsim
// forwards a LID-routed SMP across 16 switches at most, as infiniband-diags'
// smpquery finds; OpenSM reaches and programs every port by directed route,
// and so does the reader: every host's table is read, a change OpenSM swept
// to H40 (on the 40th switch) shows. The directed route is held to the GUID
// check: a route that leads to another port, or a host that answers as
// another GUID, fails the read (ErrMoved), and a host that drops every SMP
// fails alone, within its own deadline.
func TestReadLongChain(t *testing.T) {
	const hosts, switches = 40, 40
	f, apply := sweptFabricSM(t, hosts, switches)
	apply(fmt.Sprintf(testPartitions, fabricsim.HostGUID(40), fabricsim.HostGUID(25)))
	r := simReader(t, f)
	r.PortTimeout = 500 * time.Millisecond
	tg := dumpTargets(t, f)
	byLID := targets(t, f)
	host := func(i int) pkeyread.Target { return tg[i-1] } // H<i>

	// The LID alone does not reach H17 and beyond: the routes are needed.
	if res := r.Read(t.Context(), byLID[16:17]); res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "no answer") {
		t.Fatalf("H17 by LID alone: %v; want no answer (the simulator's LID-routing limit this test is about)", res[0].Err)
	}
	want := map[int]pkeyread.Membership{40: pkeyread.Full, 25: pkeyread.Limited, 1: pkeyread.NotMember}
	for i, res := range r.Read(t.Context(), tg) {
		if res.Err != nil {
			t.Errorf("H%d on S%d: %v", i+1, i+1, res.Err)
			continue
		}
		if m, ok := want[i+1]; ok && res.PKeys.Membership(0x64) != m {
			t.Errorf("H%d holds 0x0064 as %s, want %s: %#04x", i+1, res.PKeys.Membership(0x64), m, res.PKeys)
		}
		if res.SwitchPKeys.Membership(0x7fff) == pkeyread.NotMember {
			t.Errorf("the switch port facing H%d lacks the default partition: %#04x", i+1, res.SwitchPKeys)
		}
	}

	// H30 looked for by H31's route (a path changed since the dump).
	moved := host(30)
	moved.Path = host(31).Path
	// H33 answers as H34 (a tenant's firmware); H35 drops every SMP.
	r.Dialer = &impostorDialer{Dialer: r.Dialer, path: host(33).Path, as: fabricsim.HostGUID(34)}
	sim(t, f, `Error "H35"[1] 100`)
	results := r.Read(t.Context(), []pkeyread.Target{moved, host(33), host(35), host(36), host(2), host(20)})
	for i, want := range []struct {
		err  error
		text string
	}{
		{pkeyread.ErrMoved, "the directed route " + host(31).Path.String() + " answers as port " + fabricsim.HostGUID(31).String()},
		{pkeyread.ErrMoved, "the directed route " + host(33).Path.String() + " answers as port " + fabricsim.HostGUID(34).String()},
		{context.DeadlineExceeded, "NodeInfo: no answer"},
	} {
		if err := results[i].Err; !errors.Is(err, want.err) || !strings.Contains(err.Error(), want.text) {
			t.Errorf("%s: %v; want %v saying %q", results[i].Target.Port, err, want.err, want.text)
		}
	}
	for _, res := range results[3:] {
		if res.Err != nil {
			t.Errorf("%s, read beside a host that drops every SMP: %v", res.Target.Port, res.Err)
		}
	}
}

// impostorDialer is a FAKE of a tenant's host whose firmware answers
// directed-route SMPs as another port (ibsim's Guid command cannot set a
// port GUID, only a node's, and a node GUID is not what a host port's read
// checks): the NodeInfo answers that come back by path carry the port GUID
// as instead of the real one. The answers are otherwise the fabric's.
type impostorDialer struct {
	pkeyread.Dialer
	path pkeyread.DRPath
	as   fabric.GUID
}

func (d *impostorDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	c, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return impostorConn{Conn: c, d: d}, nil
}

type impostorConn struct {
	pkeyread.Conn
	d *impostorDialer
}

func (c impostorConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	answer, err := c.Conn.Send(ctx, lid, mad)
	// A directed-route NodeInfo (class 0x81) whose InitialPath (byte 128,
	// hop count at byte 7) is the impostor's.
	hops := int(mad[7])
	if err != nil || mad[1] != 0x81 || binary.BigEndian.Uint16(mad[16:]) != attrNodeInfo ||
		pkeyread.NewDRPath(string(mad[129:129+hops])) != c.d.path {
		return answer, err
	}
	binary.BigEndian.PutUint64(answer[64+20:], uint64(c.d.as)) // NodeInfo's PortGUID
	return answer, nil
}

// inFlightDialer counts the SMPs outstanding on its connections, in all and
// to each LID, and keeps the most seen at once.
type inFlightDialer struct {
	pkeyread.Dialer
	mu             sync.Mutex
	now, most      int
	byLID, mostLID map[uint16]int
}

func (d *inFlightDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	c, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return inFlightConn{Conn: c, d: d}, nil
}

type inFlightConn struct {
	pkeyread.Conn
	d *inFlightDialer
}

func (c inFlightConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	d := c.d
	d.mu.Lock()
	d.now++
	d.byLID[lid]++
	d.most, d.mostLID[lid] = max(d.most, d.now), max(d.mostLID[lid], d.byLID[lid])
	d.mu.Unlock()
	time.Sleep(time.Millisecond) // long enough for the others' sends to overlap
	defer func() {
		d.mu.Lock()
		d.now--
		d.byLID[lid]--
		d.mu.Unlock()
	}()
	return c.Conn.Send(ctx, lid, mad)
}

// Concurrent is the counted Conn's: counting does not serialize its Sends.
func (c inFlightConn) Concurrent() bool {
	cc, ok := c.Conn.(interface{ Concurrent() bool })
	return ok && cc.Concurrent()
}

// TestReadBoundsSMPsOutstanding: however many SMPs are lost and sent again,
// a read of more ports than workers keeps at most Workers SMPs outstanding
// in all (as OpenSM's max_wire_smps) and one to each host port; a read of a
// port a worker (a change's read-back), whose SMPs overlap, at most
// WireSMPs in all and two to each host port (its NodeInfo and a block of
// its table, sent ahead of the NodeInfo's answer).
func TestReadBoundsSMPsOutstanding(t *testing.T) {
	f := sweptFabric(t, 8, 2)
	r := simReader(t, f)
	d := &inFlightDialer{Dialer: r.Dialer, byLID: map[uint16]int{}, mostLID: map[uint16]int{}}
	r.Dialer = d
	sim(t, f, `Error "H1"[1] 50`)
	sim(t, f, `Error "H2"[1] 50`)
	tg := dumpTargets(t, f)
	for _, c := range []struct {
		name          string
		targets       []pkeyread.Target
		least, most   int
		mostToAHostAt int
	}{
		{"every port", tg, 2, r.Workers, 1},
		{"a port a worker", tg[:r.Workers], r.Workers + 1, pkeyread.DefaultWireSMPs, 2},
	} {
		d.mu.Lock()
		d.most = 0
		clear(d.mostLID)
		d.mu.Unlock()
		for _, res := range r.Read(t.Context(), c.targets) {
			if res.Err != nil {
				t.Errorf("%s: %s: %v", c.name, res.Target.Port, res.Err)
			}
		}
		if d.most < c.least || d.most > c.most {
			t.Errorf("%s: %d SMPs outstanding at most, want %d to %d", c.name, d.most, c.least, c.most)
		}
		for _, x := range c.targets {
			if n := d.mostLID[x.LID]; n < 1 || n > c.mostToAHostAt {
				t.Errorf("%s: %s: %d SMPs outstanding to its LID at most, want 1 to %d", c.name, x.Port, n, c.mostToAHostAt)
			}
		}
	}
}
