package mysql

import (
	"context"
	"fmt"
	"time"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

func (e *Engine) TakeLease(ctx context.Context, holder string, ttl time.Duration) (store.Lease, bool, error) {
	// On Galera, two nodes' takes of the row certify in order: the loser's
	// commit fails (a deadlock error), and it has not taken the lease.
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Lease{}, false, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	q := e.q.WithTx(tx)
	n, err := q.TakeLease(ctx, mysqldb.TakeLeaseParams{Holder: holder, TtlMicros: ttl.Microseconds()})
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("take lease: %w", err)
	}
	l, err := q.ReadLease(ctx)
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("read lease: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return store.Lease{}, false, fmt.Errorf("take lease: commit: %w", err)
	}
	return lease(l), n == 1, nil
}

func (e *Engine) RenewLease(ctx context.Context, term int64, ttl time.Duration) (bool, error) {
	n, err := e.q.RenewLease(ctx, mysqldb.RenewLeaseParams{TtlMicros: ttl.Microseconds(), Term: term})
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
	n, err := e.q.SetFreeze(ctx, mysqldb.SetFreezeParams{Reason: store.FreezeReason(reason), Term: term})
	return n == 1, err
}

func (e *Engine) RequestUnfreeze(ctx context.Context) (int64, error) { return e.q.RequestUnfreeze(ctx) }

func (e *Engine) LiftFreeze(ctx context.Context, term int64) (bool, error) {
	n, err := e.q.LiftFreeze(ctx, term)
	return n == 1, err
}

func lease(l mysqldb.ReadLeaseRow) store.Lease {
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
