package opensm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

// Restart ends the running OpenSM and returns only once the supervisor runs
// the next one and it may be signalled: the audit's heal and the second-SM
// look go on with a new OpenSM, never the old one or none.
func TestSupervisorRestart(t *testing.T) {
	p, pid, _ := startScriptedOpenSM(t, "trap 'kill $!; exit 0' TERM")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := p.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	st := p.Status()
	if st.State != StateRunning || st.PID == 0 || st.PID == pid || st.Restarts != 1 {
		t.Errorf("Status() after Restart = %+v; want a new OpenSM running (not pid %d), restarted once", st, pid)
	}
	if opensmtest.Alive(pid) {
		t.Errorf("the OpenSM Restart ended (pid %d) still runs", pid)
	}
	if err := p.Reload(ctx); err != nil {
		t.Errorf("the new OpenSM cannot be signalled after Restart returned: %v", err)
	}
}

// A Restart whose context ends before the next OpenSM runs returns then,
// with the context's error: an OpenSM that ignores SIGTERM does not hang the
// audit or the second-SM look. Without an OpenSM there is nothing to restart.
func TestSupervisorRestartStopsWithItsContext(t *testing.T) {
	p, _, _ := startScriptedOpenSM(t, "trap '' TERM")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := p.Restart(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Restart of an OpenSM that ignores SIGTERM = %v; want the context's deadline", err)
	}
	// A stop whose time is up kills it at once, rather than after the grace.
	stop, cancelStop := context.WithTimeout(t.Context(), stopTimeout/10)
	defer cancelStop()
	if err := p.Stop(stop); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(t.Context()); err == nil {
		t.Error("Restart with no OpenSM running succeeded; want an error")
	}
}

// A Restart under way when the term stops (StopTerm: the lease lost, the
// manager shutting down) returns then, with an error: nothing will start
// OpenSM again, and the audit or second-SM look must not wait out its
// context for it.
func TestSupervisorRestartEndsWhenTheTermStops(t *testing.T) {
	p, _, _ := startScriptedOpenSM(t, "trap '' TERM") // the restart's SIGTERM does nothing
	restarted := make(chan error, 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	go func() { restarted <- p.Restart(ctx) }()
	stop, cancelStop := context.WithTimeout(t.Context(), stopTimeout/10)
	defer cancelStop()
	if err := p.StopTerm(stop, 1); err != nil {
		t.Fatal(err)
	}
	err := <-restarted
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Restart across StopTerm = %v; want an error as the term stopped, not its context's end", err)
	}
}
