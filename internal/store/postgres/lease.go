package postgres

import (
	"context"
	"fmt"
	"time"

	pgdb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func (e *Engine) TakeLease(ctx context.Context, holder string, ttl time.Duration) (store.Lease, bool, error) {
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return store.Lease{}, false, err
	}
	defer tx.Rollback(ctx)
	q := e.q.WithTx(tx)
	n, err := q.TakeLease(ctx, holder, ttl.Seconds())
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("take lease: %w", err)
	}
	l, err := q.ReadLease(ctx)
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("read lease: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return store.Lease{}, false, fmt.Errorf("take lease: commit: %w", err)
	}
	return lease(l), n == 1, nil
}

func (e *Engine) RenewLease(ctx context.Context, term int64, ttl time.Duration) (bool, error) {
	n, err := e.q.RenewLease(ctx, ttl.Seconds(), term)
	return n == 1, err
}

func (e *Engine) ReleaseLease(ctx context.Context, term int64) (bool, error) {
	n, err := e.q.ReleaseLease(ctx, term)
	return n == 1, err
}

func (e *Engine) ReadLease(ctx context.Context) (store.Lease, error) {
	l, err := e.q.ReadLease(ctx)
	if err != nil {
		return store.Lease{}, err
	}
	return lease(l), nil
}

func (e *Engine) SetFreeze(ctx context.Context, term int64, reason string) (bool, error) {
	n, err := e.q.SetFreeze(ctx, store.FreezeReason(reason), term)
	return n == 1, err
}

func (e *Engine) RequestUnfreeze(ctx context.Context) (int64, error) { return e.q.RequestUnfreeze(ctx) }

func (e *Engine) LiftFreeze(ctx context.Context, term int64) (bool, error) {
	n, err := e.q.LiftFreeze(ctx, term)
	return n == 1, err
}

func lease(l pgdb.ReadLeaseRow) store.Lease {
	return store.Lease{Term: l.Term, Holder: l.Holder, Heartbeat: utc(l.Heartbeat), ExpiresAt: utc(l.ExpiresAt),
		Now: l.DbNow.UTC(), PreviousHolder: l.PreviousHolder, PreviousExpired: l.PreviousExpired,
		Suspect: l.Suspect, Freeze: l.FreezeReason, UnfreezeRequested: l.UnfreezeRequested}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
