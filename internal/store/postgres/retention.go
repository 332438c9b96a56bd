package postgres

import (
	"context"
	"time"

	pgdb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/postgres"
)

// DeleteFinishedJobsBefore implements store.JobPruner.
func (e *Engine) DeleteFinishedJobsBefore(ctx context.Context, before time.Time, batch int) (int64, error) {
	return e.q.DeleteFinishedJobsBefore(ctx, pgdb.DeleteFinishedJobsBeforeParams{Before: &before, Batch: int32(batch)})
}
