package mysql

import (
	"context"
	"time"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
)

// The lease's queries (driver.LeaseQueries) that differ: MariaDB's SQL takes
// the ttl in microseconds. The others are generated (adapters_gen.go).

func (q queries) TakeLease(ctx context.Context, fabric, holder string, ttl time.Duration) (int64, error) {
	return q.Queries.TakeLease(ctx, mysqldb.TakeLeaseParams{Holder: holder, TtlMicros: ttl.Microseconds(), Fabric: fabric})
}

func (q queries) RenewLease(ctx context.Context, fabric string, ttl time.Duration, term int64) (int64, error) {
	return q.Queries.RenewLease(ctx, mysqldb.RenewLeaseParams{TtlMicros: ttl.Microseconds(), Fabric: fabric, Term: term})
}
