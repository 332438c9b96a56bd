package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Service is one of a fabric's background tasks, started when the fabric's
// manager is elected and stopped when its term ends. Stop returns only once
// the service has stopped: a term that ended must leave nothing of itself
// running when the next one, here or on another manager, begins.
type Service interface {
	// Start launches the service and returns once it runs; an error leaves
	// nothing of it running. It does not wait for the service's work.
	Start(ctx context.Context) error
	// Stop stops the service and waits for it. It is safe before Start,
	// during it, and more than once.
	Stop()
}

// ender is a Service whose work can end by itself (the applier's term that
// failed): its term ends with it.
type ender interface {
	Service
	// Done is closed once the work returned; Err is then what it returned.
	Done() <-chan struct{}
	Err() error
}

// routine is the Service that runs one function: Start launches it, Stop
// cancels its context and waits for it to return.
type routine struct {
	name string
	run  func(ctx context.Context) error

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{} // closed once run returned; nil before Start
	err     error
	stopped bool
}

func newRoutine(name string, run func(ctx context.Context) error) *routine {
	return &routine{name: name, run: run}
}

// errStopped is a Start after Stop: a term that ended starts nothing more.
var errStopped = errors.New("stopped")

func (r *routine) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stopped:
		return fmt.Errorf("%s: %w", r.name, errStopped)
	case r.done != nil:
		return fmt.Errorf("%s: started twice", r.name)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", r.name, context.Cause(ctx))
	}
	ctx, r.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	r.done = done
	go func() {
		err := r.run(ctx)
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(done)
	}()
	return nil
}

func (r *routine) Stop() {
	r.mu.Lock()
	r.stopped = true
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel == nil {
		return // never started, and never will be
	}
	cancel()
	<-done
}

func (r *routine) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

func (r *routine) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// runServices runs one term's services: it starts them in order, waits
// until ctx ends or one of them ends by itself, then stops every one it
// started, last first, and waits for each. It returns the error of a
// service that did not start or ended by itself; nil when ctx ended (the
// elector knows why).
func runServices(ctx context.Context, services []Service) error {
	ctx, cancel := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	started, err := startServices(ctx, services)
	if err == nil {
		err = waitServices(ctx, started, &watchers)
	}
	cancel()
	// Whatever the term's end, every started service is waited for before
	// the term returns: the elector stops OpenSM and releases the lease
	// only then.
	for i := len(started) - 1; i >= 0; i-- {
		started[i].Stop()
	}
	watchers.Wait()
	return err
}

// startServices starts services in order until one fails or ctx ends; it
// returns those it started.
func startServices(ctx context.Context, services []Service) ([]Service, error) {
	started := make([]Service, 0, len(services))
	for _, s := range services {
		if ctx.Err() != nil {
			return started, nil // the term ended while starting: not the services' error
		}
		if err := s.Start(ctx); err != nil {
			if ctx.Err() != nil {
				return started, nil
			}
			return started, err
		}
		started = append(started, s)
	}
	return started, nil
}

// waitServices waits until ctx ends or a started service's work ends by
// itself, and returns that work's error. Its watchers end with ctx.
func waitServices(ctx context.Context, started []Service, watchers *sync.WaitGroup) error {
	ended := make(chan error, len(started))
	for _, s := range started {
		e, ok := s.(ender)
		if !ok {
			continue
		}
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			select {
			case <-e.Done():
				ended <- e.Err()
			case <-ctx.Done():
			}
		}()
	}
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		return nil
	}
}
