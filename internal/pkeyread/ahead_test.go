package pkeyread_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// aheadDialer is a fake Dialer that counts what it opened and closed, and
// fails the dials it is told to.
type aheadDialer struct {
	mu             sync.Mutex
	opened, closed int
	fail           int // the next dials that fail
}

type aheadConn struct{ d *aheadDialer }

func (c aheadConn) Send(context.Context, uint16, []byte) ([]byte, error) { return nil, nil }
func (c aheadConn) Close() error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.closed++
	return nil
}

func (d *aheadDialer) Dial(context.Context) (pkeyread.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail > 0 {
		d.fail--
		return nil, errors.New("the simulator refused the control message")
	}
	d.opened++
	return aheadConn{d}, nil
}

func (d *aheadDialer) counts() (opened, closed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opened, d.closed
}

// TestAhead: a prepared connection is the next Dial's, and one no Dial took
// is closed by the release; a prepared dial that failed costs the Dial
// nothing but its own dial.
func TestAhead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		prepare    bool
		failFirst  bool
		dials      int // Dials before the release
		wantOpened int
		wantClosed int // by the release, the Dials' connections left open
	}{
		{name: "prepared, taken", prepare: true, dials: 1, wantOpened: 1, wantClosed: 0},
		{name: "prepared, not taken: the release closes it", prepare: true, dials: 0, wantOpened: 1, wantClosed: 1},
		{name: "prepared, two Dials: the second dials its own", prepare: true, dials: 2, wantOpened: 2, wantClosed: 0},
		{name: "the prepared dial failed: the Dial dials", prepare: true, failFirst: true, dials: 1, wantOpened: 1, wantClosed: 0},
		{name: "nothing prepared", dials: 1, wantOpened: 1, wantClosed: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &aheadDialer{}
			if tc.failFirst {
				d.fail = 1
			}
			a := &pkeyread.Ahead{Dialer: d}
			release := func() {}
			if tc.prepare {
				release = a.Prepare(t.Context())
			}
			for range tc.dials {
				if _, err := a.Dial(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			release()
			if opened, closed := d.counts(); opened != tc.wantOpened || closed != tc.wantClosed {
				t.Errorf("opened %d, closed %d; want %d, %d", opened, closed, tc.wantOpened, tc.wantClosed)
			}
		})
	}
}

// TestAheadReleaseOfAReplacedPrepare: a Prepare made while an earlier one's
// connection is untaken (a term's next apply) leaves that one to its own
// release, which closes it; the next Dial takes the newer one.
func TestAheadReleaseOfAReplacedPrepare(t *testing.T) {
	d := &aheadDialer{}
	a := &pkeyread.Ahead{Dialer: d}
	first := a.Prepare(t.Context())
	second := a.Prepare(t.Context())
	first()
	if _, closed := d.counts(); closed != 1 {
		t.Fatalf("the replaced prepare's release closed %d connections; want 1", closed)
	}
	if _, err := a.Dial(t.Context()); err != nil {
		t.Fatal(err)
	}
	second()
	if opened, closed := d.counts(); opened != 2 || closed != 1 {
		t.Errorf("opened %d, closed %d; want 2, 1 (the newer prepared connection taken by the Dial)", opened, closed)
	}
}
