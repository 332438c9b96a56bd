package smcontainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// versionLine is the first line OpenSM logs ("OpenSM 3.3.23"), right after it
// has blocked the signals it handles: before it, a SIGHUP kills OpenSM.
var versionLine = regexp.MustCompile(`^OpenSM [0-9]\S*$`)

// state is what both drivers share with their callers, as opensm.Process
// offers it: a supervisor started by Start and ended by Stop, the OpenSM
// container that runs now, whether it may be signalled, how often it
// restarted, and the driver's status for operators.
type state struct {
	log        *slog.Logger
	statusFile string // "" for none

	mu        sync.Mutex
	current   string // ID of the container OpenSM runs in now; "" when none
	pid       int    // OpenSM's process ID on the host, when known
	ready     bool   // current has logged its version line
	restarts  int
	state     opensm.DriverState
	since     time.Time
	lastErr   string
	lastErrAt time.Time
	cancel    context.CancelFunc // ends the supervisor; nil when none runs
	done      chan struct{}      // closed when the last supervisor started has returned
	latch     opensm.TermLatch   // the terms whose stop ran: never started again
	changed   chan struct{}      // closed and replaced at every change of the fields above
}

func newState(log *slog.Logger, statusFile string) state {
	done := make(chan struct{})
	close(done)
	return state{log: log, statusFile: statusFile, state: opensm.DriverStopped, since: time.Now().UTC(),
		done: done, changed: make(chan struct{})}
}

// set changes the state under its lock, wakes WaitReady callers and writes
// the status file.
func (s *state) set(f func(s *state)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.state
	f(s)
	if s.state != before {
		s.since = time.Now().UTC()
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.writeStatus(s.statusLocked())
}

// failed records err as the driver's last error and logs it.
func (s *state) failed(err error, newState opensm.DriverState) {
	s.log.Error("OpenSM driver", "error", err, "state", newState)
	s.set(func(s *state) {
		s.lastErr, s.lastErrAt = err.Error(), time.Now().UTC()
		s.state, s.current, s.ready, s.pid = newState, "", false, 0
	})
}

// start runs supervise until Stop or StopTerm, unless a supervisor runs
// already or a stop latched term (opensm.ErrTermStopped). A Stop that gave up
// waiting may have left the previous supervisor ending: the new one starts once
// it has.
func (s *state) start(term int64, supervise func(ctx context.Context)) error {
	s.mu.Lock()
	if err := s.latch.Allows(term); err != nil || s.cancel != nil {
		s.mu.Unlock()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	prev, done := s.done, make(chan struct{})
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
	s.set(func(s *state) { s.state = opensm.DriverStarting })
	go func() {
		defer close(done)
		<-prev
		supervise(ctx)
		s.set(func(s *state) { s.state, s.current, s.ready, s.pid = opensm.DriverStopped, "", false, 0 })
	}()
	return nil
}

// StopTerm ends the supervisor at the end of term and waits until it has
// returned (with the managed driver: until OpenSM's container is gone), or ctx
// ends. The stop is latched first: no Start for term or an earlier term starts
// OpenSM afterwards, even when the wait gives up (see opensm.TermLatch).
func (s *state) StopTerm(ctx context.Context, term int64) error {
	return s.stop(ctx, func(l *opensm.TermLatch) { l.Stop(term) })
}

// Stop is StopTerm for good (the manager is shutting down): every later Start
// is refused.
func (s *state) Stop(ctx context.Context) error {
	return s.stop(ctx, (*opensm.TermLatch).StopForGood)
}

func (s *state) stop(ctx context.Context, latch func(*opensm.TermLatch)) error {
	s.mu.Lock()
	latch(&s.latch)
	cancel, done := s.cancel, s.done
	s.cancel = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("opensm: stop: %w", ctx.Err())
	}
}

// WaitReady waits until the current OpenSM has logged its version line, after
// which it is safe to signal. It fails at once when no OpenSM runs or is about
// to: the driver is stopped, or its last start failed.
func (s *state) WaitReady(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.current != "" && s.ready {
			s.mu.Unlock()
			return nil
		}
		switch s.state {
		case opensm.DriverStopped:
			s.mu.Unlock()
			return errors.New("opensm: stopped")
		case opensm.DriverFailed:
			err := fmt.Errorf("opensm: not running: %s", s.lastErr)
			s.mu.Unlock()
			return err
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signallable returns the container to send SIGHUP to, or why none may be.
func (s *state) signallable() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.current == "":
		return "", errors.New("opensm: not running; no SIGHUP sent")
	case !s.ready:
		return "", errors.New("opensm: still starting; no SIGHUP sent (it could kill OpenSM)")
	}
	return s.current, nil
}

// Restarts counts how many times OpenSM was started again after it exited.
func (s *state) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Container returns the ID of the container OpenSM runs in now, "" when none.
func (s *state) Container() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Status is the driver's state for operators (--status).
func (s *state) Status() opensm.DriverStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *state) statusLocked() opensm.DriverStatus {
	return opensm.DriverStatus{State: s.state, PID: s.pid, Restarts: s.restarts, Since: s.since,
		LastError: s.lastErr, LastErrorAt: s.lastErrAt}
}

// writeStatus writes st to the status file, which --status reads; s.mu is
// held, so that the file never goes back to an older status.
func (s *state) writeStatus(st opensm.DriverStatus) {
	if s.statusFile == "" {
		return
	}
	b, err := json.Marshal(st)
	if err == nil {
		err = opensm.WriteFileAtomic(s.statusFile, append(b, '\n'), 0o644)
	}
	if err != nil {
		s.log.Warn("write OpenSM's driver status", "file", s.statusFile, "error", err)
	}
}
