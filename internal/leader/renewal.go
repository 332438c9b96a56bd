package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// renewal keeps a term's lease while the term's work runs: it renews the
// lease every T/5 and, as soon as the lease is lost or in doubt, cancels the
// term's context and takes OpenSM off the fabric (LeaseElector's comment has
// the timeouts).
type renewal struct {
	e    *LeaseElector
	term int64
	log  *slog.Logger
	// ctx is the term's: cancelled, with the cause, when the lease is in
	// doubt or the term's work returned.
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu sync.Mutex
	renewalOutcome
}

// renewalOutcome is what the renewal learned of the lease by the end of the
// term.
type renewalOutcome struct {
	// validUntil is when the others may take over: the lease timeout after
	// the last successful renewal (or the take) was sent.
	validUntil time.Time
	// lost: a renewal found the lease expired or taken by another manager.
	lost bool
	// stoppedAt is when OpenSM was stopped as soon as the lease was in
	// doubt; zero when it was not.
	stoppedAt time.Time
}

// startRenewal renews the lease of term, which was taken by a request sent
// at sent, until end is called.
func (e *LeaseElector) startRenewal(ctx context.Context, term int64, sent time.Time, log *slog.Logger) *renewal {
	lctx, cancel := context.WithCancelCause(ctx)
	r := &renewal{e: e, term: term, log: log, ctx: lctx, cancel: cancel, done: make(chan struct{}),
		renewalOutcome: renewalOutcome{validUntil: sent.Add(e.LeaseTimeout)}}
	go r.run(sent.Add(e.LeaseTimeout / 2))
	return r
}

// end cancels the term's context, waits for the renewal to return and says
// what it learned.
func (r *renewal) end() renewalOutcome {
	r.cancel(nil)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renewalOutcome
}

// run renews until the term ends, or gives up at giveUpAt, which each
// successful renewal moves on.
func (r *renewal) run(giveUpAt time.Time) {
	defer close(r.done)
	t := time.NewTicker(r.e.renewEvery())
	defer t.Stop()
	giveUp := time.NewTimer(time.Until(giveUpAt))
	defer giveUp.Stop()
	// The deadline is checked by the clock, not only by the timer: when the
	// timer and the ticker are both ready (a renewal that used its whole
	// time), select would pick either at random, and a leader cut from its
	// database could keep renewing in vain past the lease's expiry.
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-giveUp.C:
		case <-t.C:
		}
		if !time.Now().Before(giveUpAt) {
			r.log.Error("lease not renewed for half its timeout; stopping OpenSM before it can expire",
				"lease_timeout", r.e.LeaseTimeout)
			r.cancel(errors.New("lease not renewed in time"))
			r.mu.Lock()
			validUntil := r.validUntil
			r.mu.Unlock()
			r.stopNow(validUntil)
			return
		}
		switch next, ok := r.renew(giveUpAt); {
		case !ok:
			return
		case !next.IsZero():
			giveUpAt = next
			giveUp.Reset(time.Until(giveUpAt))
		}
	}
}

// renew renews the lease once, never past giveUpAt, and returns when to give
// up after this renewal (zero when it failed, and the time to give up stays).
// False when the lease is lost: the term ended.
func (r *renewal) renew(giveUpAt time.Time) (time.Time, bool) {
	start := time.Now()
	// A renewal never runs past the time to give up.
	deadline := start.Add(r.e.renewEvery())
	if giveUpAt.Before(deadline) {
		deadline = giveUpAt
	}
	rctx, rcancel := context.WithDeadline(r.ctx, deadline)
	ok, err := r.e.Leases.RenewLease(rctx, r.term, r.e.LeaseTimeout)
	rcancel()
	switch {
	case err != nil:
		if r.ctx.Err() == nil {
			r.log.Warn("renew the lease", "error", err)
		}
		return time.Time{}, true
	case !ok:
		r.mu.Lock()
		r.lost = true
		r.mu.Unlock()
		r.log.Error("lease lost: it expired or another manager took it; stopping OpenSM")
		r.cancel(errors.New("lease lost"))
		r.stopNow(time.Now()) // another manager may lead already
		return time.Time{}, false
	default:
		r.mu.Lock()
		r.validUntil = start.Add(r.e.LeaseTimeout)
		r.mu.Unlock()
		return start.Add(r.e.LeaseTimeout / 2), true
	}
}

// stopNow takes OpenSM off the fabric at once when the lease is in doubt,
// without waiting for the term's work to return: that work may be blocked on
// a database call that only its own, longer deadline ends (a cut link), and
// the lease may expire meanwhile. The stop latches the term, so that the
// work, when it returns, cannot start OpenSM again. OpenSM gets until
// otherMayLead, when another manager may take the lease, to exit on its own
// (the Stop's deadline); the supervisor kills it then.
func (r *renewal) stopNow(otherMayLead time.Time) {
	sctx, scancel := context.WithDeadline(context.WithoutCancel(r.ctx), otherMayLead)
	defer scancel()
	if err := r.e.Stop(sctx, r.term); err != nil {
		r.log.Error("stop OpenSM", "error", err)
		return
	}
	r.mu.Lock()
	r.stoppedAt = time.Now()
	r.mu.Unlock()
}
