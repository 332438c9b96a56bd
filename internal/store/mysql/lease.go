package mysql

import (
	"context"
	"time"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// The lease's queries (driver.LeaseQueries): MariaDB's SQL takes the ttl in
// microseconds and its arguments in Params structs.

func (q queries) TakeLease(ctx context.Context, holder string, ttl time.Duration) (int64, error) {
	return q.Queries.TakeLease(ctx, mysqldb.TakeLeaseParams{Holder: holder, TtlMicros: ttl.Microseconds()})
}

func (q queries) RenewLease(ctx context.Context, ttl time.Duration, term int64) (int64, error) {
	return q.Queries.RenewLease(ctx, mysqldb.RenewLeaseParams{TtlMicros: ttl.Microseconds(), Term: term})
}

func (q queries) SetFreeze(ctx context.Context, reason string, term int64) (int64, error) {
	return q.Queries.SetFreeze(ctx, mysqldb.SetFreezeParams{Reason: reason, Term: term})
}

func (q queries) ReadLease(ctx context.Context) (driver.ReadLeaseRow, error) {
	l, err := q.Queries.ReadLease(ctx)
	return driver.ReadLeaseRow(l), err
}

var _ driver.LeaseQueries = queries{}
