package driver

import (
	"context"
	"sync"
	"time"
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
	echoes    map[string]echo  // fabric: the newest revision woken for whose notification is still to come
	now       func() time.Time // nil: time.Now
}

// echo is a revision this process woke its waiters for, and when.
type echo struct {
	revision int64
	at       time.Time
}

// echoWindow bounds how long after a commit its notification is taken for
// the echo of the wake-up already given: the server delivers it a round trip
// after the COMMIT, and a listener reconnecting meanwhile never gets it.
const echoWindow = time.Second

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

// ExpectEcho says, just before a transaction's COMMIT is sent, that the
// engine's notification of c (its fabric's revision once committed) will
// be the echo of this commit, whose waiters NotifyCommitted wakes at the
// COMMIT's answer: the server may deliver the notification before that
// answer is read. Call forget when the COMMIT failed (no notification
// comes, and another process may commit that revision). A COMMIT whose
// answer never came leaves the expectation, for echoWindow: if it did
// commit, its change is found by the applier's next poll, as after a lost
// notification.
func (w *LocalWake) ExpectEcho(c *Committed) (forget func()) {
	if c == nil || !c.set {
		return func() {}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.echoes == nil {
		w.echoes = map[string]echo{}
	}
	e := echo{revision: max(w.echoes[c.fabric].revision, c.revision), at: w.clock()}
	w.echoes[c.fabric] = e
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.echoes[c.fabric] == e {
			delete(w.echoes, c.fabric)
		}
	}
}

// Echo says whether the engine's notification that fabric's revision is
// now revision is the echo of a commit of this process (ExpectEcho), whose
// waiters are woken at its COMMIT's answer: the one for the newest revision
// expected, or for one before it (a transaction of several changes is
// notified for each), within echoWindow. Waking them again costs the
// applier, just done with that change, a read of the revision (and of the
// newest job's row) at the moment the change's client reads its job and
// sends its next. Once the echo of the newest revision came, any later
// notification wakes: a database restored from a backup may commit that
// revision again, from another process.
func (w *LocalWake) Echo(fabric string, revision int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.echoes[fabric]
	if !ok || revision > e.revision || w.clock().Sub(e.at) > echoWindow {
		return false
	}
	if revision == e.revision {
		delete(w.echoes, fabric)
	}
	return true
}

func (w *LocalWake) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
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
