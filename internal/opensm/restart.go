package opensm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Restart ends the current OpenSM (SIGTERM) and returns once the supervisor
// has started the next one and it may be signalled. The audit's heal and the
// second-SM look restart OpenSM through it: a fresh OpenSM sweeps the whole
// subnet as it starts (a heavy sweep that SIGHUP does not always bring). It
// fails when OpenSM is not running, when its supervision stops before it
// starts again, and when ctx ends first.
func (s *Supervisor) Restart(ctx context.Context) error {
	s.mu.Lock()
	inst, restarts := s.current, s.restarts
	s.mu.Unlock()
	if inst == nil {
		return errors.New("OpenSM is not running")
	}
	if err := inst.Signal(ctx, syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop OpenSM: %w", err)
	}
	for {
		s.mu.Lock()
		again, supervised, changed := s.restarts != restarts, s.cancel != nil, s.changed
		s.mu.Unlock()
		switch {
		case again:
			return s.WaitReady(ctx)
		case !supervised:
			// The term ended meanwhile (StopTerm, Stop): nothing starts
			// OpenSM again, and waiting would only wait out ctx.
			return errors.New("OpenSM was stopped before it started again")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("OpenSM not started again: %w", ctx.Err())
		case <-changed:
		}
	}
}
