package pkeyread_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// Attribute ids of the SMPs a Reader sends (IBA 14.2.5).
const (
	attrNodeInfo   = 0x11
	attrSwitchInfo = 0x12
)

// sent is one SMP a Reader sent: to which LID, of which attribute.
type sent struct {
	lid  uint16
	attr uint16
}

// recordingDialer records the SMPs sent on its connections, and fails those
// that lose says to lose with "no answer": at once, as ibsim answers a MAD its
// error injection drops, or, when wait is set, at the send's deadline, as a
// MAD lost on the wire (lose may be nil).
type recordingDialer struct {
	pkeyread.Dialer
	lose func(sent) bool
	wait bool

	mu   sync.Mutex
	sent map[sent]int
}

func newRecordingDialer(d pkeyread.Dialer, lose func(sent) bool) *recordingDialer {
	return &recordingDialer{Dialer: d, lose: lose, sent: map[sent]int{}}
}

func (d *recordingDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	c, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return recordingConn{Conn: c, d: d}, nil
}

// counts returns the SMPs sent so far, and forgets them.
func (d *recordingDialer) counts() map[sent]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.sent
	d.sent = map[sent]int{}
	return c
}

type recordingConn struct {
	pkeyread.Conn
	d *recordingDialer
}

func (c recordingConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	s := sent{lid: lid, attr: binary.BigEndian.Uint16(mad[16:])}
	c.d.mu.Lock()
	c.d.sent[s]++
	lose := c.d.lose != nil && c.d.lose(s)
	c.d.mu.Unlock()
	if lose && c.d.wait {
		<-ctx.Done()
		return nil, fmt.Errorf("no answer: %w", ctx.Err())
	}
	if lose {
		return nil, errors.New("no answer: lost")
	}
	return c.Conn.Send(ctx, lid, mad)
}

// TestReadSwitchOnce: one Read asks each switch who it is (NodeInfo) and the
// size of its ports' tables (SwitchInfo) once, however many of its ports it
// reads and on however many workers; the next Read asks again (a switch may
// have been replaced since). Each host port then costs its own three SMPs and
// its switch port's two blocks.
func TestReadSwitchOnce(t *testing.T) {
	f := sweptFabric(t, 6, 2)
	r := simReader(t, f)
	rec := newRecordingDialer(r.Dialer, nil)
	r.Dialer = rec
	tg := targets(t, f)
	switchLIDs := map[uint16]bool{}
	for _, x := range tg {
		switchLIDs[x.Switch.LID] = true
	}
	if len(switchLIDs) != 2 {
		t.Fatalf("the hosts hang on %d switches, want 2: %+v", len(switchLIDs), tg)
	}
	for read := range 2 {
		for _, res := range r.Read(t.Context(), tg) {
			if res.Err != nil {
				t.Fatalf("read %d: %s: %v", read, res.Target.Port, res.Err)
			}
		}
		counts := rec.counts()
		for lid := range switchLIDs {
			for _, attr := range []uint16{attrNodeInfo, attrSwitchInfo} {
				if n := counts[sent{lid, attr}]; n != 1 {
					t.Errorf("read %d: switch at LID %d asked attribute %#x %d times, want once", read, lid, attr, n)
				}
			}
		}
		total := 0
		for _, n := range counts {
			total += n
		}
		if want := 5*len(tg) + 2*len(switchLIDs); total != want {
			t.Errorf("read %d: %d SMPs for %d ports behind %d switches, want %d", read, total, len(tg), len(switchLIDs), want)
		}
	}
}

// TestReadSwitchMoved: when a switch's LID answers as another node, every
// port behind it fails with ErrMoved naming its own switch port and the node
// that answered, while the ports behind the node that answered, read at the
// same LID as what they look for, are read.
func TestReadSwitchMoved(t *testing.T) {
	f := sweptFabric(t, 6, 2)
	r := simReader(t, f)
	tg := targets(t, f)
	s1, s2 := tg[0].Switch, pkeyread.SwitchPort{}
	for _, x := range tg {
		if x.Switch.GUID != s1.GUID {
			s2 = x.Switch
		}
	}
	if s2.GUID == 0 {
		t.Fatalf("every host hangs on switch %s", s1.GUID)
	}
	behindS1 := 0
	for i := range tg {
		if tg[i].Switch.GUID == s1.GUID {
			tg[i].Switch.LID = s2.LID // s1 looked for where s2 is
			behindS1++
		}
	}
	if behindS1 < 2 {
		t.Fatalf("%d hosts behind switch %s, want several", behindS1, s1.GUID)
	}
	for _, res := range r.Read(t.Context(), tg) {
		if res.Target.Switch.GUID != s1.GUID {
			if res.Err != nil || len(res.SwitchPKeys) == 0 {
				t.Errorf("%s behind %s: %#04x, %v", res.Target.Port, s2.GUID, res.SwitchPKeys, res.Err)
			}
			continue
		}
		port := fmt.Sprintf("switch %s port %d at LID %d", s1.GUID, res.Target.Switch.Port, s2.LID)
		if err := res.Err; !errors.Is(err, pkeyread.ErrMoved) || !strings.Contains(err.Error(), port) ||
			!strings.Contains(err.Error(), "answers as node "+s2.GUID.String()) {
			t.Errorf("%s, its switch looked for at %s's LID: %v, want ErrMoved naming %q and %s",
				res.Target.Port, s2.GUID, err, port, s2.GUID)
		}
		if res.PKeys != nil || res.SwitchPKeys != nil {
			t.Errorf("%s failed but returned tables", res.Target.Port)
		}
	}
}

// TestReadSwitchReadFails: a lost SwitchInfo is asked again, within the
// port's deadline, and no port fails for it. A switch that answers none
// fails every port behind it at its own deadline, naming the switch port
// (what the port's own attempt got: one that waited for another port's read
// of the switch has little time left for its own), and is asked again, not
// taken for the switch's answer.
func TestReadSwitchReadFails(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	r := simReader(t, f)
	r.PortTimeout = 300 * time.Millisecond
	tg := targets(t, f)
	switchInfo := sent{tg[0].Switch.LID, attrSwitchInfo}

	asked := 0
	loseFirst := newRecordingDialer(r.Dialer, func(s sent) bool {
		if s != switchInfo {
			return false
		}
		asked++ // under the dialer's lock
		return asked == 1
	})
	r.Dialer = loseFirst
	for _, res := range r.Read(t.Context(), tg) {
		if res.Err != nil {
			t.Errorf("%s, whose switch's SwitchInfo was lost once: %v", res.Target.Port, res.Err)
		}
	}
	if n := loseFirst.counts()[switchInfo]; n != 2 {
		t.Errorf("SwitchInfo asked %d times, want twice: the lost one and once again", n)
	}

	loseAll := newRecordingDialer(simReader(t, f).Dialer, func(s sent) bool { return s == switchInfo })
	r.Dialer = loseAll
	for _, res := range r.Read(t.Context(), tg) {
		where := fmt.Sprintf("port %d at LID %d: ", res.Target.Switch.Port, switchInfo.lid)
		if !errors.Is(res.Err, context.DeadlineExceeded) || !strings.Contains(res.Err.Error(), where) {
			t.Errorf("%s, whose switch answers no SwitchInfo: %v", res.Target.Port, res.Err)
		}
	}
	if n := loseAll.counts()[switchInfo]; n <= len(tg) {
		t.Errorf("a switch answering no SwitchInfo was asked %d times, want again after a loss (more than %d)", n, len(tg))
	}

	loseAll.wait = true // now each SwitchInfo goes unanswered until its deadline
	for _, res := range r.Read(t.Context(), tg) {
		// The port's deadline, seen by its context or, when it passed during
		// a send, by the socket.
		deadline := errors.Is(res.Err, context.DeadlineExceeded) || errors.Is(res.Err, os.ErrDeadlineExceeded)
		if !deadline ||
			!strings.Contains(res.Err.Error(), fmt.Sprintf("port %d at LID %d: ", res.Target.Switch.Port, switchInfo.lid)) {
			t.Errorf("%s, whose switch's SwitchInfo goes unanswered: %v", res.Target.Port, res.Err)
		}
	}
}

// mkeyDialer is a FAKE of M_Key protection (levels 2 and 3), which the
// simulated fabric does not enforce: an SMP whose M_Key is not the one the
// ports carry gets no answer. It counts the SMPs refused.
type mkeyDialer struct {
	pkeyread.Dialer
	carried atomic.Uint64
	refused atomic.Int64
}

func (d *mkeyDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	c, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return mkeyConn{Conn: c, d: d}, nil
}

type mkeyConn struct {
	pkeyread.Conn
	d *mkeyDialer
}

func (c mkeyConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	if binary.BigEndian.Uint64(mad[24:]) != c.d.carried.Load() {
		c.d.refused.Add(1)
		return nil, errors.New("no answer: the M_Key does not match")
	}
	return c.Conn.Send(ctx, lid, mad)
}

// TestReadMKeyRotation: the M_Keys are asked for at each Read (they change
// while the manager runs); ports still carrying the old key are read with it
// once the new one gets no answer, and the key that answered is tried first
// at the next Read; a key fixed at the start reads nothing once the ports
// carry another, nor does the new key alone while they carry the old one.
func TestReadMKeyRotation(t *testing.T) {
	const oldKey, newKey = 0x1111, 0x2222
	f := sweptFabric(t, 2, 1)
	r := simReader(t, f)
	d := &mkeyDialer{Dialer: r.Dialer}
	r.Dialer = d
	tg := targets(t, f)
	read := func(what string, wantRefused func(int64) bool) {
		t.Helper()
		d.refused.Store(0)
		for _, res := range r.Read(t.Context(), tg) {
			if res.Err != nil {
				t.Fatalf("%s: %s: %v", what, res.Target.Port, res.Err)
			}
		}
		if n := d.refused.Load(); !wantRefused(n) {
			t.Errorf("%s: %d SMPs refused", what, n)
		}
	}
	some := func(n int64) bool { return n > 0 }
	none := func(n int64) bool { return n == 0 }

	d.carried.Store(oldKey)
	r.MKey = oldKey
	read("the key fixed at the start", none)
	d.carried.Store(newKey) // OpenSM moved the ports to the rotated key
	for _, res := range r.Read(t.Context(), tg) {
		if res.Err == nil {
			t.Fatalf("%s read with the old key while it carries the new one", res.Target.Port)
		}
	}

	keys := []uint64{newKey}
	r.MKeys = func(context.Context) ([]uint64, error) { return keys, nil }
	read("the rotated key", none)
	d.carried.Store(oldKey)
	for _, res := range r.Read(t.Context(), tg) {
		if res.Err == nil {
			t.Fatalf("%s read with the new key alone while it carries the old one", res.Target.Port)
		}
	}
	keys = []uint64{newKey, oldKey} // during the rotation both are known
	read("new then old, the ports carrying the old", some)
	read("the key that answered first", none)
	d.carried.Store(newKey)
	read("new then old, the ports moved to the new", some)
	read("the new key, first now", none)

	r.MKeys = func(context.Context) ([]uint64, error) { return nil, errors.New("database away") }
	for _, res := range r.Read(t.Context(), tg) {
		if res.Err == nil || !strings.Contains(res.Err.Error(), "the M_Key: database away") {
			t.Fatalf("%s without its M_Key: %v", res.Target.Port, res.Err)
		}
	}
}
