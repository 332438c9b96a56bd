package sqlite

import (
	"context"
	"time"

	sqlitedb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/sqlite"
)

// DeleteFinishedJobsBefore implements store.JobPruner.
func (e *Engine) DeleteFinishedJobsBefore(ctx context.Context, before time.Time, batch int) (int64, error) {
	return e.q.DeleteFinishedJobsBefore(ctx, sqlitedb.DeleteFinishedJobsBeforeParams{Before: &before, Batch: int64(batch)})
}
