package mysql

import (
	"context"
	"time"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
)

// DeleteFinishedJobsBefore implements store.JobPruner.
func (e *Engine) DeleteFinishedJobsBefore(ctx context.Context, before time.Time, batch int) (int64, error) {
	return e.q.DeleteFinishedJobsBefore(ctx, mysqldb.DeleteFinishedJobsBeforeParams{Before: &before, Limit: int32(batch)})
}
