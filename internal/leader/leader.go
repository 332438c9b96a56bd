// Package leader elects the single applier among the manager's replicas.
//
// A manager that takes the database's applier lock (store.Store.TryLock: an
// advisory lock, GET_LOCK, or a file lock on SQLite) starts a new term, a number
// every applier write is conditioned on (fencing): once another manager starts
// a newer term, the old one's late writes change nothing. The lock is re-checked
// on its own session every CheckInterval; any doubt ends the term at once.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tick"
)

// Store is what election needs of the database.
type Store interface {
	TryLock(ctx context.Context) (store.Lock, error)
	NewTerm(ctx context.Context, holder string) (int64, error)
	// Heartbeat tells operators (--status) the term's holder is alive.
	Heartbeat(ctx context.Context, term int64) error
}

// Elector campaigns for the applier lock and runs the leader's work while it
// holds it.
type Elector struct {
	Store  Store
	Holder string // who we are, for operators: host and pid
	Log    *slog.Logger
	// RetryInterval is how often a follower tries the lock; CheckInterval how
	// often the leader makes sure it still holds it.
	RetryInterval, CheckInterval time.Duration
	// Timeout bounds every database call, the lock check included: a
	// black-holed connection must end the term, not hang it. 0: DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is Elector.Timeout when it is not set.
const DefaultTimeout = 5 * time.Second

// ManagerCheckInterval is the manager's Elector.CheckInterval: how often the
// lock's holder checks it, and writes its heartbeat.
const ManagerCheckInterval = time.Second

// HeartbeatTimeout is how old the manager's heartbeat may be before --status
// says no manager applies, and a follower is not ready: ten of the elector's
// checks, each of which writes the heartbeat.
const HeartbeatTimeout = 10 * ManagerCheckInterval

// bounded returns ctx with the deadline of one database call.
func (e *Elector) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	t := e.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	return context.WithTimeout(ctx, t)
}

// Run campaigns until ctx ends. Each time the lock is won, lead runs with a
// context that is cancelled as soon as the lock may be lost, and the term it
// must fence its writes with.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, term int64) error) error {
	return campaign(ctx, e.Log, "applier term ended", e.RetryInterval, func(ctx context.Context) error {
		return e.termOnce(ctx, lead)
	})
}

// campaign runs one term after another, retry apart, until ctx ends; a term
// that ends with an error while ctx lives is logged as ended. Both electors
// campaign so: they differ only in how a term is won and kept.
func campaign(ctx context.Context, log *slog.Logger, ended string, retry time.Duration, termOnce func(context.Context) error) error {
	for {
		if err := termOnce(ctx); err != nil && ctx.Err() == nil {
			log.Error(ended, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

func (e *Elector) termOnce(ctx context.Context, lead func(context.Context, int64) error) error {
	tctx, tcancel := e.bounded(ctx)
	lock, err := e.Store.TryLock(tctx)
	tcancel()
	if err != nil {
		return fmt.Errorf("take applier lock: %w", err)
	}
	if lock == nil {
		return nil // another manager applies
	}
	defer func() {
		rctx, cancel := e.bounded(context.WithoutCancel(ctx))
		defer cancel()
		if err := lock.Release(rctx); err != nil {
			e.Log.Warn("release applier lock", "error", err)
		}
	}()
	nctx, ncancel := e.bounded(ctx)
	term, err := e.Store.NewTerm(nctx, e.Holder)
	ncancel()
	if err != nil {
		return fmt.Errorf("start a new term: %w", err)
	}
	e.Log.Info("won the applier lock", "term", term, "holder", e.Holder)

	lctx, cancel := context.WithCancelCause(ctx)
	checked := make(chan struct{})
	// Deferred calls run last first: the checker stops, and is waited for, before
	// the lock is released, since a lock's session is not safe for concurrent use.
	defer func() {
		cancel(nil)
		<-checked
	}()
	go func() {
		defer close(checked)
		tick.Every(lctx, e.CheckInterval, func() bool {
			cause := e.check(lctx, lock, term)
			if cause != nil {
				cancel(cause)
			}
			return cause == nil
		})
	}()
	err = lead(lctx, term)
	if cause := context.Cause(lctx); cause != nil && ctx.Err() == nil {
		return fmt.Errorf("term %d: %w", term, cause)
	}
	if err != nil {
		return fmt.Errorf("term %d: %w", term, err)
	}
	return nil
}

// check makes sure, every CheckInterval, that the term still holds the lock
// and is still the one the database records; it returns why the term must
// end, nil while it may go on.
func (e *Elector) check(ctx context.Context, lock store.Lock, term int64) error {
	cctx, ccancel := e.bounded(ctx)
	err := lock.Check(cctx)
	ccancel()
	if err != nil {
		if ctx.Err() == nil {
			e.Log.Error("applier lock may be lost; ending the term", "term", term, "error", err)
		}
		return fmt.Errorf("applier lock lost: %w", err)
	}
	// For --status; and the lock, not the row, decides who applies, but a
	// row that no longer records this term (the database was restored from a
	// backup taken in an earlier term) refuses every fenced write of it: the
	// term ends, and the next one starts above every term recorded.
	hctx, hcancel := e.bounded(ctx)
	err = e.Store.Heartbeat(hctx, term)
	hcancel()
	if errors.Is(err, store.ErrFenced) {
		e.Log.Error("the database no longer records this term; ending it", "term", term, "error", err)
		return fmt.Errorf("the database no longer records the term: %w", err)
	}
	if err != nil && ctx.Err() == nil {
		e.Log.Warn("write the applier's heartbeat", "term", term, "error", err)
	}
	return nil
}
