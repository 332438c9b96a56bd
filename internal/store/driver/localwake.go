package driver

import (
	"context"
	"sync"
)

// LocalWake wakes, after each change this process commits, whoever waits in
// this process: an engine without a cross-process notification (SQLite, one
// process at a time; MariaDB, which has no LISTEN) gives its applier at least
// the changes its own API records without waiting for the next poll, and one
// with a notification (PostgreSQL) wakes its own applier without waiting for
// the server's. Changes committed by other processes are still found by
// polling, or by the engine's notification. It also keeps, for each fabric,
// the newest revision this process committed since its applier last asked
// (TakeCommitted), so that the applier need not read what it was just told.
// The zero value is ready to use.
type LocalWake struct {
	mu        sync.Mutex
	waiters   []localWaiter
	committed map[string]int64 // fabric: the newest revision committed since TakeCommitted
}

// localWaiter is one Wake's channel and the fabric it waits for ("": any).
type localWaiter struct {
	ch     chan<- struct{}
	fabric string
}

// Wake returns a channel that receives after a change this process committed,
// until ctx ends. A wake-up is a hint: several changes may share one.
func (w *LocalWake) Wake(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	w.WakeInto(ctx, "", ch)
	return ch
}

// WakeInto has ch receive (without blocking: ch is buffered, a wake-up
// already pending is enough) after each change this process commits that
// concerns fabric ("": any fabric), until ctx ends: an engine's own
// notifications may share ch.
func (w *LocalWake) WakeInto(ctx context.Context, fabric string, ch chan<- struct{}) {
	w.mu.Lock()
	w.waiters = append(w.waiters, localWaiter{ch: ch, fabric: fabric})
	w.mu.Unlock()
	go func() {
		<-ctx.Done()
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, c := range w.waiters {
			if c.ch == ch {
				w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
				break
			}
		}
	}()
}

// Notify wakes every waiter; call it after a change committed.
func (w *LocalWake) Notify() { w.NotifyCommitted(nil) }

// NotifyCommitted is Notify after a commit that set c's fabric's revision
// (nil, or c not set: any fabric's, or none, so every waiter is woken and no
// revision kept). Call it once the commit has answered: the revision it keeps
// is committed.
func (w *LocalWake) NotifyCommitted(c *Committed) {
	w.mu.Lock()
	defer w.mu.Unlock()
	known := c != nil && c.set
	if known {
		if w.committed == nil {
			w.committed = map[string]int64{}
		}
		w.committed[c.fabric] = max(w.committed[c.fabric], c.revision)
	}
	for _, waiter := range w.waiters {
		if known && waiter.fabric != "" && waiter.fabric != c.fabric {
			continue
		}
		select {
		case waiter.ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// TakeCommitted returns the newest revision of fabric this process committed
// since the last TakeCommitted of fabric (ok false: none), and forgets it.
// It is a hint as a wake-up is: committed, but another process may have
// committed a newer one since (or the database been restored from a backup).
func (w *LocalWake) TakeCommitted(fabric string) (revision int64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	revision, ok = w.committed[fabric]
	delete(w.committed, fabric)
	return revision, ok
}

// Committed is what a change transaction's commit makes a fabric's revision:
// the store sets it in the transaction (WithCommitted), and the engine, once
// the COMMIT has answered, passes it to NotifyCommitted.
type Committed struct {
	fabric   string
	revision int64
	set      bool
}

// Set says the transaction, once committed, leaves fabric at revision.
func (c *Committed) Set(fabric string, revision int64) {
	c.fabric, c.revision, c.set = fabric, revision, true
}

// committedKey is the context key of WithCommitted.
type committedKey struct{}

// WithCommitted is ctx for InChangeTx whose fn sets c (Committed.Set).
func WithCommitted(ctx context.Context, c *Committed) context.Context {
	return context.WithValue(ctx, committedKey{}, c)
}

// CommittedOf is the Committed of WithCommitted; nil when there is none.
func CommittedOf(ctx context.Context) *Committed {
	c, _ := ctx.Value(committedKey{}).(*Committed)
	return c
}
