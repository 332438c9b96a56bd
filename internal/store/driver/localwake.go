package driver

import (
	"context"
	"sync"
)

// LocalWake wakes, after each change this process commits, whoever waits in
// this process: an engine without a cross-process notification (SQLite, one
// process at a time; MariaDB, which has no LISTEN) gives its applier at least
// the changes its own API records without waiting for the next poll. Changes
// committed by other processes are still found by polling. The zero value is
// ready to use.
type LocalWake struct {
	mu      sync.Mutex
	waiters []chan struct{}
}

// Wake returns a channel that receives after a change this process committed,
// until ctx ends. A wake-up is a hint: several changes may share one.
func (w *LocalWake) Wake(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.waiters = append(w.waiters, ch)
	w.mu.Unlock()
	go func() {
		<-ctx.Done()
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, c := range w.waiters {
			if c == ch {
				w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
				break
			}
		}
	}()
	return ch
}

// Notify wakes every waiter; call it after a change committed.
func (w *LocalWake) Notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.waiters {
		select {
		case c <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}
