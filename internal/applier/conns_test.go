package applier

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// idleDialer is a FAKE pkeyread.Pool: it opens nothing, and counts the
// CloseIdle calls of a term's end.
type idleDialer struct{ closed atomic.Int32 }

func (d *idleDialer) Dial(context.Context) (pkeyread.Conn, error) {
	return nil, errors.New("no fabric in this test")
}

func (d *idleDialer) CloseIdle() error {
	d.closed.Add(1)
	return nil
}

// TestTermClosesItsConns: the SMP connections a term's reads kept open
// (the read-back's, the audit's, the second-SM look's: pkeyread.Pool) are
// closed when the term ends, not held by a deposed leader for the
// simulator's ten clients, nor handed to the next term.
func TestTermClosesItsConns(t *testing.T) {
	r := newLeadRig(t)
	readback, audit, look := &idleDialer{}, &idleDialer{}, &idleDialer{}
	r.app.Cfg.Readback = &pkeyread.Reader{Dialer: readback}
	r.app.Cfg.Audit = AuditConfig{Reader: &pkeyread.Reader{Dialer: audit}}
	r.app.SecondSM = &SecondSMCheck{Dialer: look}
	_, end := r.lead()
	waitLog(t, r.logs, "SIGHUP sent") // the term runs: its first apply
	if readback.closed.Load()+audit.closed.Load()+look.closed.Load() != 0 {
		t.Fatal("a term closed its connections before its end")
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*idleDialer{"read-back": readback, "audit": audit, "second-SM look": look} {
		if n := d.closed.Load(); n != 1 {
			t.Errorf("the %s's kept connections closed %d times at the term's end, want once", name, n)
		}
	}
}
