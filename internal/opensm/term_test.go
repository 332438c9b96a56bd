package opensm

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

// A stop for a term is a latch: no later Start of that term (or of an earlier
// one) starts OpenSM again, whichever comes first; a newer term does. The
// processes are real children, read from the kernel.
func TestProcessStopForATermIsFinal(t *testing.T) {
	sm := opensmtest.NewStandIn(t)
	p := NewProcess(ProcessConfig{Command: sm.Command, LogFile: sm.LogFile})
	ctx := t.Context()
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	running := func(want int, what string) {
		t.Helper()
		if got := sm.Running(t); len(got) != want {
			t.Fatalf("%s: %d stand-in OpenSMs run (%v), want %d", what, len(got), got, want)
		}
	}

	if err := p.Start(5); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	running(1, "term 5 started")
	if err := p.StopTerm(ctx, 5); err != nil {
		t.Fatal(err)
	}
	running(0, "term 5 stopped")

	// The term's work reaching its Start after the stop (LeadTerm's Start,
	// a drift repair) and a late Start of an older term: refused, nothing
	// started.
	for _, term := range []int64{5, 4} {
		if err := p.Start(term); !errors.Is(err, ErrTermStopped) {
			t.Errorf("Start(%d) after StopTerm(5) = %v, want ErrTermStopped", term, err)
		}
	}
	if st := p.Status(); st.State != StateStopped || st.PID != 0 {
		t.Errorf("after refused starts: Status() = %+v, want stopped", st)
	}
	if err := p.WaitReady(ctx); err == nil {
		t.Error("WaitReady succeeded for a stopped term")
	}
	running(0, "refused starts")
	if n := len(sm.Starts(t)); n != 1 {
		t.Errorf("%d starts, want only term 5's", n)
	}

	// A stop that comes first latches too: term 6 is stopped before it ever
	// started (the lease was lost while the term's first database read ran).
	if err := p.StopTerm(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(6); !errors.Is(err, ErrTermStopped) {
		t.Errorf("Start(6) after StopTerm(6) = %v, want ErrTermStopped", err)
	}

	// A newer term starts a new OpenSM.
	if err := p.Start(7); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	running(1, "term 7 started")
	if got := sm.Running(t); !slices.Contains(got, p.Status().PID) {
		t.Errorf("running %v, Status() says pid %d", got, p.Status().PID)
	}

	// Stop for good (shutdown): no term starts it again.
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	running(0, "stopped for good")
	if err := p.Start(8); !errors.Is(err, ErrTermStopped) {
		t.Errorf("Start(8) after Stop = %v, want ErrTermStopped", err)
	}
	running(0, "a start after Stop")
}
