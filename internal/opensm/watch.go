package opensm

import "context"

// Watcher follows an OpenSM that someone else runs (smcontainer's External):
// the supervisor never starts, stops or restarts it, and learns what runs
// from the Watcher's Sightings.
type Watcher interface {
	// Watch reports what it sees to seen until ctx ends.
	Watch(ctx context.Context, seen Sightings)
}

// Sightings is how a Watcher tells its supervisor what it sees.
type Sightings struct{ s *Supervisor }

// NewWatch returns a Supervisor of the OpenSM w watches, which does nothing
// until Start is called. Its Stop ends the watch and leaves OpenSM running.
func NewWatch(w Watcher, c SupervisorConfig) *Supervisor {
	s := NewSupervisor(nil, c)
	s.watcher, s.invalid = w, nil
	return s
}

// watch runs the watcher until ctx ends.
func (s *Supervisor) watch(ctx context.Context) {
	defer s.update(func() { s.current, s.ready = nil, false; s.setState(StateStopped) })
	s.watcher.Watch(ctx, Sightings{s})
}

// Running says that inst runs and is not known to be ready yet unless it was
// before; restarted says that it is a new start of OpenSM since the one seen
// before (a restart, counted in Restarts).
func (w Sightings) Running(inst Instance, restarted bool) {
	if restarted {
		w.s.log.Warn("OpenSM started again", inst.LogAttrs()...)
	}
	w.s.update(func() {
		if restarted {
			w.s.restarts++
			w.s.ready = false
		}
		if w.s.current == nil || restarted {
			w.s.current = inst
			w.s.setState(StateStarting)
		}
	})
}

// Ready says that the running instance may be signalled.
func (w Sightings) Ready(inst Instance) {
	w.s.update(func() {
		if w.s.current == inst {
			w.s.ready = true
			w.s.setState(StateRunning)
		}
	})
	w.s.log.Info("OpenSM ready", inst.LogAttrs()...)
}

// Lost says that OpenSM is not running, or cannot be seen: err says why.
func (w Sightings) Lost(err error) {
	w.s.log.Error("OpenSM is not running", "error", err)
	w.s.update(func() {
		w.s.current, w.s.ready = nil, false
		w.s.setState(StateFailed)
		w.s.setError(err.Error())
	})
}
