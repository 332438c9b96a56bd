package driver

import (
	"context"
	"time"
)

// LeaseQueries are the HA lease's queries (queries/postgres/lease.sql and
// queries/mysql/lease.sql), under the same names. The server engines' Queries
// implement them besides Queries; SQLite, which serves one manager, has no
// lease. Package store holds what the lease means: an engine only adapts its
// arguments (the ttl in the unit its SQL takes) and its row.
type LeaseQueries interface {
	// TakeLease starts a new term for holder, valid for ttl, if the lease is
	// free or expired; it returns the rows changed (1: taken).
	TakeLease(ctx context.Context, fabric string, holder string, ttl time.Duration) (int64, error)
	RenewLease(ctx context.Context, fabric string, ttl time.Duration, term int64) (int64, error)
	ReleaseLease(ctx context.Context, fabric string, term int64) (int64, error)
	ReadLease(ctx context.Context, fabric string) (ReadLeaseRow, error)
	SetFreeze(ctx context.Context, fabric string, reason string, term int64) (int64, error)
	RequestUnfreeze(ctx context.Context, fabric string) (int64, error)
	LiftFreeze(ctx context.Context, fabric string, term int64) (int64, error)
}
