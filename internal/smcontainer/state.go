package smcontainer

import (
	"context"
	"errors"
	"regexp"
	"sync"
)

// versionLine is the first line OpenSM logs ("OpenSM 3.3.23"), right after it
// has blocked the signals it handles: before it, a SIGHUP kills OpenSM.
var versionLine = regexp.MustCompile(`^OpenSM [0-9]\S*$`)

// state is what both drivers share with their callers: the OpenSM container
// that runs now, whether it may be signalled, and how often it restarted.
type state struct {
	mu       sync.Mutex
	current  string // ID of the container OpenSM runs in now; "" when none
	ready    bool   // current has logged its version line
	restarts int
	running  bool          // Run has been called
	finished bool          // Run has returned
	changed  chan struct{} // closed and replaced at every change of the fields above
}

func newState() state { return state{changed: make(chan struct{})} }

// notify wakes WaitReady callers; s.mu must be held.
func (s *state) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *state) set(f func(s *state)) {
	s.mu.Lock()
	f(s)
	s.notify()
	s.mu.Unlock()
}

// begin marks Run as called, once.
func (s *state) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return errors.New("opensm: Run called twice")
	}
	s.running = true
	return nil
}

// end marks Run as returned: WaitReady fails from then on.
func (s *state) end() {
	s.set(func(s *state) { s.finished = true; s.current = ""; s.ready = false })
}

// WaitReady waits until the current OpenSM has logged its version line, after
// which it is safe to signal. It returns an error once Run has returned.
func (s *state) WaitReady(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.current != "" && s.ready {
			s.mu.Unlock()
			return nil
		}
		if s.finished {
			s.mu.Unlock()
			return errStopped
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
