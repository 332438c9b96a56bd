package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// LeaseElector elects with the HA lease ([ha] ha = true, docs/ha.md): a
// manager leads while it holds the lease row of the database, which it takes
// by compare-and-set when the lease is free or expired, on the database's
// clock. The term it took fences every applier write.
//
// The timeouts, from the lease timeout T: the leader renews every T/5, each
// renewal given T/5 to answer; after T/2 without a successful renewal (timed
// from when the last good one was sent, on this host's monotonic clock) it
// ends the term and stops its OpenSM, which then has the other half of T to be
// gone before the lease can expire for the others. Only once OpenSM is known
// stopped is the lease released, so that a follower can take over at once; a
// leader that could not stop it leaves the lease to expire.
//
// A manager that took a lease that expired instead of being released waits
// T/2 after its take before it leads, renewing meanwhile: the row does not
// prove that the previous leader is gone. A restore from a backup (or a
// failover to an asynchronous replica) can put back an old, expired row while
// a leader still runs, which learns of it only at its next renewal; whoever
// the row names, every leader gives up at most T/2 after its last successful
// renewal, which was sent before the take. A released lease is taken without
// waiting: its holder stopped its OpenSM before releasing it. A term that ends
// during the wait leaves the lease to expire, so that the next taker waits too.
//
// The advisory lock is only a fast path: a follower that cannot take it (its
// holder's session lives) reads the lease before trying to take it; where the
// lock is not cluster-wide (Galera) every follower goes straight to the lease.
// A lock held by a hung process never keeps the others from taking an expired
// lease: the lease decides.
type LeaseElector struct {
	Leases store.LeaseTables
	// TryLock is the advisory lock's fast path; nil: none.
	TryLock func(ctx context.Context) (store.Lock, error)
	Holder  string // who we are, for operators: host and pid
	Log     *slog.Logger
	// LeaseTimeout is [ha] lease_timeout.
	LeaseTimeout time.Duration
	// Stop takes this manager's OpenSM off the fabric when a term ends,
	// within ctx (an OpenSM still there when ctx ends is killed: another
	// manager may lead from then on), and latches the term: no later start of that term may bring
	// OpenSM back (opensm.TermLatch), since the term's work can still be
	// running when it is called. An error leaves the lease to expire instead
	// of releasing it.
	Stop func(ctx context.Context, term int64) error
}

// Term is what a leader learns when it takes the lease.
type Term struct {
	ID int64
	// Taken is the row as the take left it: who held the lease before, and
	// whose OpenSM may still be master (Suspect).
	Taken store.Lease
}

// StopTimeout bounds the wait for OpenSM to stop at the end of a term: longer
// than the supervisor's SIGKILL deadline.
const StopTimeout = 15 * time.Second

func (e *LeaseElector) renewEvery() time.Duration { return e.LeaseTimeout / 5 }

// Run campaigns until ctx ends; lead runs while this manager holds the lease,
// with a context cancelled as soon as it may lose it.
func (e *LeaseElector) Run(ctx context.Context, lead func(ctx context.Context, term Term) error) error {
	return campaign(ctx, e.Log, "leadership term ended", e.renewEvery(), func(ctx context.Context) error {
		return e.termOnce(ctx, lead)
	})
}

func (e *LeaseElector) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.renewEvery())
}

// campaign tries to take the lease once; false when another holds it.
func (e *LeaseElector) campaign(ctx context.Context) (store.Lease, bool, store.Lock, error) {
	var lock store.Lock
	if e.TryLock != nil {
		lctx, cancel := e.bounded(ctx)
		l, err := e.TryLock(lctx)
		cancel()
		switch {
		case errors.Is(err, store.ErrLockNotClusterWide):
		case err != nil:
			e.Log.Debug("applier lock unavailable; trying the lease", "error", err)
		case l == nil:
			// Its holder's session lives: the lease is most likely held.
			rctx, cancel := e.bounded(ctx)
			cur, err := e.Leases.ReadLease(rctx)
			cancel()
			if err != nil {
				return store.Lease{}, false, nil, fmt.Errorf("read the lease: %w", err)
			}
			if cur.Held() {
				return cur, false, nil, nil
			}
		default:
			lock = l
		}
	}
	tctx, cancel := e.bounded(ctx)
	taken, won, err := e.Leases.TakeLease(tctx, e.Holder, e.LeaseTimeout)
	cancel()
	if err != nil || !won {
		e.release(ctx, lock)
		if err != nil {
			return store.Lease{}, false, nil, fmt.Errorf("take the lease: %w", err)
		}
		return taken, false, nil, nil
	}
	return taken, true, lock, nil
}

func (e *LeaseElector) release(ctx context.Context, lock store.Lock) {
	if lock == nil {
		return
	}
	rctx, cancel := e.bounded(context.WithoutCancel(ctx))
	defer cancel()
	if err := lock.Release(rctx); err != nil {
		e.Log.Warn("release applier lock", "error", err)
	}
}

// termOnce takes the lease if it can, leads while it holds it, and ends the
// term: OpenSM stopped first, the lease released only once it is.
func (e *LeaseElector) termOnce(ctx context.Context, lead func(context.Context, Term) error) error {
	sent := time.Now() // the lease cannot expire before sent + LeaseTimeout
	taken, won, lock, err := e.campaign(ctx)
	if err != nil || !won {
		return err
	}
	tookAt := time.Now()
	defer e.release(ctx, lock)
	term := taken.Term
	log := e.Log.With("term", term, "holder", e.Holder)
	if taken.PreviousExpired {
		log.Warn("took over a lease that expired instead of being released: its holder was killed, hung or cut off",
			"previous_holder", taken.PreviousHolder, "suspect", taken.Suspect)
	} else {
		log.Info("took the lease", "previous_holder", taken.PreviousHolder)
	}

	r := e.startRenewal(ctx, term, sent, log)
	var leadErr error
	waited := !taken.PreviousExpired || e.waitOutPrevious(r.ctx, tookAt, log)
	if waited {
		leadErr = lead(r.ctx, Term{ID: term, Taken: taken})
	}
	e.endTerm(ctx, term, log, r.end(), waited)
	if cause := context.Cause(r.ctx); cause != nil && !errors.Is(cause, context.Canceled) && ctx.Err() == nil {
		return fmt.Errorf("term %d: %w", term, cause)
	}
	if leadErr != nil {
		return fmt.Errorf("term %d: %w", term, leadErr)
	}
	return nil
}

// endTerm stops OpenSM, within what is left of the lease, and only then
// releases the lease, so that another manager may take over at once; it
// leaves the lease to expire when the lease was lost, when OpenSM may still
// run, or when the term ended before the previous leader was known to have
// given up (waited false).
func (e *LeaseElector) endTerm(ctx context.Context, term int64, log *slog.Logger, renewed renewalOutcome, waited bool) {
	// The stop is made again even when the renewal stopped OpenSM already:
	// it costs nothing on a stopped driver, and it is what proves OpenSM
	// stopped now, after the term's work has returned, rather than at some
	// earlier moment.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), StopTimeout)
	stopErr := e.Stop(sctx, term)
	scancel()
	offAt := time.Now()
	if !renewed.stoppedAt.IsZero() {
		offAt = renewed.stoppedAt // the latch kept it off since
	}
	if late := offAt.Sub(renewed.validUntil); stopErr == nil && late > 0 {
		log.Error("OpenSM stopped after the lease could have expired", "late", late)
	}
	switch {
	case stopErr != nil:
		log.Error("OpenSM may still run; leaving the lease to expire", "error", stopErr)
	case renewed.lost:
	case !waited:
		log.Warn("the term ended before the previous leader was known to have given up; leaving the lease to expire")
	default:
		rctx, rcancel := e.bounded(context.WithoutCancel(ctx))
		if _, err := e.Leases.ReleaseLease(rctx, term); err != nil {
			log.Warn("release the lease; it will expire", "error", err)
		} else {
			log.Info("released the lease")
		}
		rcancel()
	}
}

// waitOutPrevious waits until half the lease timeout has passed since the
// take of an expired lease (the renewal renews it meanwhile): by
// then any previous leader has seen its renewal fail or given up, and stopped
// its OpenSM. False when the term ended first.
func (e *LeaseElector) waitOutPrevious(ctx context.Context, tookAt time.Time, log *slog.Logger) bool {
	wait := time.Until(tookAt.Add(e.LeaseTimeout / 2))
	log.Info("waiting for any previous leader to have given up before leading", "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
