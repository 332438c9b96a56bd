package postgres

import (
	"context"
	"time"
)

// The lease's queries (driver.LeaseQueries): PostgreSQL's SQL takes the ttl
// in seconds; its other lease queries already have the driver's signatures.

func (q queries) TakeLease(ctx context.Context, fabric, holder string, ttl time.Duration) (int64, error) {
	return q.Queries.TakeLease(ctx, holder, ttl.Seconds(), fabric)
}

func (q queries) RenewLease(ctx context.Context, fabric string, ttl time.Duration, term int64) (int64, error) {
	return q.Queries.RenewLease(ctx, ttl.Seconds(), fabric, term)
}
