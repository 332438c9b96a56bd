package pkeyread

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// gateFabric is a FAKE transport (a Conn taking overlapping Sends) over
// fakeFabric's answers that holds every answer back until the read has sent
// all the SMPs of the current phase, then answers that phase's SMPs tables
// first and NodeInfo last: the order in which an answer that a node's
// identity must approve arrives before the identity. A read that waits for
// an answer before it sends an SMP of the same phase gets none (its Sends
// end at their deadline, and the port fails); the phases a read went
// through are the depth of its SMPs.
type gateFabric struct {
	answers map[smpKey][]byte
	phases  [][]smpKey

	mu        sync.Mutex
	phase     int
	held      []*heldSMP
	answered  []smpKey // in the order the answers were handed over
	most      int      // SMPs outstanding at once, at most
	sentTotal int
}

type heldSMP struct {
	key    smpKey
	mad    []byte
	answer chan []byte
}

func (g *gateFabric) Dial(context.Context) (Conn, error) { return g, nil }
func (g *gateFabric) Close() error                       { return nil }
func (g *gateFabric) Concurrent() bool                   { return true }

func (g *gateFabric) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	h := &heldSMP{key: smpKey{lid, binary.BigEndian.Uint16(mad[offAttrID:]), binary.BigEndian.Uint32(mad[offModifier:])},
		mad: mad, answer: make(chan []byte, 1)}
	g.mu.Lock()
	g.sentTotal++
	g.held = append(g.held, h)
	g.most = max(g.most, len(g.held))
	g.releaseLocked()
	g.mu.Unlock()
	select {
	case a := <-h.answer:
		return a, nil
	case <-ctx.Done():
		g.mu.Lock()
		g.held = slices.DeleteFunc(g.held, func(x *heldSMP) bool { return x == h })
		g.mu.Unlock()
		return nil, fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// releaseLocked answers the phase's SMPs once every one of them is held:
// P_KeyTable blocks first, SwitchInfo next, NodeInfo last.
func (g *gateFabric) releaseLocked() {
	if g.phase >= len(g.phases) {
		return
	}
	want := g.phases[g.phase]
	for _, k := range want {
		if !slices.ContainsFunc(g.held, func(h *heldSMP) bool { return h.key == k }) {
			return
		}
	}
	release := slices.Clone(g.held)
	g.held = nil
	g.phase++
	rank := map[uint16]int{attrPKeyTable: 0, attrSwitchInfo: 1, attrNodeInfo: 2}
	slices.SortStableFunc(release, func(a, b *heldSMP) int { return rank[a.key.attr] - rank[b.key.attr] })
	for _, h := range release {
		g.answered = append(g.answered, h.key)
		h.answer <- g.answer(h)
	}
}

// answer is the GetResp to h from fakeFabric's ports.
func (g *gateFabric) answer(h *heldSMP) []byte {
	resp := slices.Clone(h.mad)
	resp[3] = methodGetResp
	if data, ok := g.answers[h.key]; ok {
		copy(resp[offData:], data)
	} else {
		binary.BigEndian.PutUint16(resp[offStatus:], 7<<2)
	}
	return resp
}

// fakeH1Phases are the SMPs of fakeH1's read that wait for no other's
// answer (its NodeInfo and block 0, its switch's NodeInfo and SwitchInfo,
// the switch port's block 0), then those that wait for the NodeInfo and
// SwitchInfo (the tables' block 1).
var fakeH1Phases = [][]smpKey{
	{{2, attrNodeInfo, 0}, {2, attrPKeyTable, 0}, {1, attrNodeInfo, 0}, {1, attrSwitchInfo, 0},
		{1, attrPKeyTable, pkeyModifier(2, 0)}},
	{{2, attrPKeyTable, 1}, {1, attrPKeyTable, pkeyModifier(2, 1)}},
}

// TestReadOverlapsSMPs: a host port's read sends its SMPs that wait for no
// other answer at once on its one connection (a depth of two phases, not
// seven SMPs one after another), and matches the answers, which come back
// in another order than the requests, by their transaction ids.
func TestReadOverlapsSMPs(t *testing.T) {
	g := &gateFabric{answers: fakeFabric(t), phases: fakeH1Phases}
	r := &Reader{Dialer: g, Workers: 1, PortTimeout: 500 * time.Millisecond}
	res := r.Read(t.Context(), []Target{fakeH1})[0]
	if res.Err != nil {
		t.Fatalf("H1: %v (answered %v)", res.Err, g.answered)
	}
	if res.PKeys.Membership(0x64) != Full || res.SwitchPKeys.Membership(0x64) != Full ||
		len(res.PKeys) != 2 || len(res.SwitchPKeys) != 2 {
		t.Errorf("H1: %#04x, switch %#04x; want 0x7fff and 0x8064 in both", res.PKeys, res.SwitchPKeys)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.phase != 2 || g.sentTotal != 7 {
		t.Errorf("%d phases, %d SMPs; want 2 phases of 7 SMPs", g.phase, g.sentTotal)
	}
	if g.most > portSMPs {
		t.Errorf("%d SMPs outstanding for one port, want at most %d", g.most, portSMPs)
	}
}

// TestReadOverlapProvesFirst: an answer that came back before the NodeInfo
// of its node (a table's block sent with it) is never used when the
// NodeInfo shows another port or node there: the read fails with ErrMoved
// and returns no table, though the block's answer was handed over.
func TestReadOverlapProvesFirst(t *testing.T) {
	for _, c := range []struct {
		name  string
		at    smpKey
		field int // NodeInfo's GUID the impostor changes: PortGUID (20), NodeGUID (12)
	}{
		{"host port", smpKey{2, attrNodeInfo, 0}, 20},
		{"switch", smpKey{1, attrNodeInfo, 0}, 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			answers := fakeFabric(t)
			ni := slices.Clone(answers[c.at])
			binary.BigEndian.PutUint64(ni[c.field:], 0x0002c90300abcdef)
			answers[c.at] = ni
			g := &gateFabric{answers: answers, phases: fakeH1Phases[:1]}
			r := &Reader{Dialer: g, Workers: 1, PortTimeout: 500 * time.Millisecond}
			res := r.Read(t.Context(), []Target{fakeH1})[0]
			if !errors.Is(res.Err, ErrMoved) || res.PKeys != nil || res.SwitchPKeys != nil {
				t.Errorf("%v, tables %#04x and %#04x; want ErrMoved and no table", res.Err, res.PKeys, res.SwitchPKeys)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			block0 := smpKey{c.at.lid, attrPKeyTable, 0}
			if c.at.lid == 1 {
				block0.modifier = pkeyModifier(2, 0)
			}
			if i, j := slices.Index(g.answered, block0), slices.Index(g.answered, c.at); i < 0 || j < i {
				t.Errorf("answers %v: want the block %v answered before the NodeInfo", g.answered, block0)
			}
		})
	}
}

// TestUmadSendsOverlap: two Sends outstanding at once on one umad file,
// the first answered after the second: each gets the answer to its own
// request (the kernel hands both to the file, in the order they come).
func TestUmadSendsOverlap(t *testing.T) {
	k := newFakeUmadKernel(t, fakeFabric(t))
	k.delay[1] = 50 * time.Millisecond // the switch answers late
	c := dialFake(t, k)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	late := make(chan error, 1)
	go func() {
		req := getSMP(attrNodeInfo, 0, 0, 51)
		answer, err := c.Send(ctx, 1, req)
		if err == nil {
			err = wantNodeInfo(req, answer, fakeH1.Switch.GUID, true)
		}
		late <- err
	}()
	<-k.written // the switch's request is outstanding
	req := getSMP(attrNodeInfo, 0, 0, 52)
	answer, err := c.Send(ctx, 2, req)
	if err == nil {
		err = wantNodeInfo(req, answer, fakeH1.Port, false)
	}
	if err != nil {
		t.Errorf("the host, answered first: %v", err)
	}
	if err := <-late; err != nil {
		t.Errorf("the switch, answered last: %v", err)
	}
}

// wantNodeInfo checks that answer is request's NodeInfo, of guid (a node's
// or a port's).
func wantNodeInfo(request, answer []byte, guid fabric.GUID, node bool) error {
	data, err := answerData(request, answer)
	if err != nil {
		return err
	}
	ni := parseNodeInfo(data)
	got := fabric.GUID(ni.portGUID)
	if node {
		got = fabric.GUID(ni.nodeGUID)
	}
	if got != guid {
		return fmt.Errorf("answered as %s, want %s", got, guid)
	}
	return nil
}

// firstSendDialer says on sent when one of its connections sends an SMP
// (arm: anew).
type firstSendDialer struct {
	Dialer
	mu   sync.Mutex
	sent chan struct{}
	once *sync.Once
}

func (d *firstSendDialer) arm() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent, d.once = make(chan struct{}), &sync.Once{}
	return d.sent
}

func (d *firstSendDialer) Dial(ctx context.Context) (Conn, error) {
	c, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return firstSendConn{Conn: c, d: d}, nil
}

type firstSendConn struct {
	Conn
	d *firstSendDialer
}

func (c firstSendConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	c.d.mu.Lock()
	sent, once := c.d.sent, c.d.once
	c.d.mu.Unlock()
	once.Do(func() { close(sent) })
	return c.Conn.Send(ctx, lid, mad)
}

func (c firstSendConn) Concurrent() bool { return true }

// TestReadKeysOverlapReads: with MKeys (a database read on a change's
// path), a Read after the first sends its SMPs while the keys are asked for,
// with the keys the last Read was given, and returns what they read when
// the keys are the same.
func TestReadKeysOverlapReads(t *testing.T) {
	g := &gateFabric{answers: fakeFabric(t), phases: slices.Concat(fakeH1Phases, fakeH1Phases)}
	d := &firstSendDialer{Dialer: g}
	var waiting chan struct{}
	r := &Reader{Dialer: d, Workers: 1, PortTimeout: 500 * time.Millisecond}
	r.MKeys = func(ctx context.Context) ([]uint64, error) {
		if waiting == nil {
			return []uint64{7}, nil
		}
		select {
		case <-waiting:
			return []uint64{7}, nil
		case <-time.After(5 * time.Second):
			return nil, errors.New("no SMP was sent while the keys were asked for")
		}
	}
	d.arm()
	if res := r.Read(t.Context(), []Target{fakeH1})[0]; res.Err != nil {
		t.Fatalf("the first Read: %v", res.Err)
	}
	waiting = d.arm()
	res := r.Read(t.Context(), []Target{fakeH1})[0]
	if res.Err != nil || res.PKeys.Membership(0x64) != Full || res.SwitchPKeys.Membership(0x64) != Full {
		t.Errorf("the second Read: %#04x, switch %#04x, %v", res.PKeys, res.SwitchPKeys, res.Err)
	}
}
