package store

import (
	"context"
	"fmt"
	"time"
)

// Bounds of one pruning: each statement deletes at most PruneBatch jobs, and
// one call runs at most pruneMaxBatches of them, so that a large backlog (a
// first run with a short retention) is worked off over several calls instead
// of holding the database for long.
const (
	PruneBatch      = 500
	pruneMaxBatches = 20
)

// DeleteExpiredJobs deletes the finished (Completed or Failed) jobs that
// finished more than retention before now, in batches, and returns how many it
// deleted, fenced by term (a deposed leader deletes nothing). Open jobs are
// never deleted, however old.
func (s *Store) DeleteExpiredJobs(ctx context.Context, term int64, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("delete expired jobs: retention %s is not positive", retention)
	}
	before := s.now().Add(-retention)
	var total int64
	for range pruneMaxBatches {
		n, err := s.DeleteFinishedJobsBefore(ctx, term, before, PruneBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("delete jobs finished before %s: %w", before.Format(time.RFC3339), err)
		}
		if n < PruneBatch {
			break
		}
	}
	return total, nil
}

// DeleteFinishedJobsBefore deletes at most batch Completed or Failed jobs whose
// finished_at is before the time, oldest first, and says how many: one batch
// of DeleteExpiredJobs. None once term is not the current leadership term.
func (s *Store) DeleteFinishedJobsBefore(ctx context.Context, term int64, before time.Time, batch int) (int64, error) {
	return s.d.Queries(ctx).DeleteFinishedJobsBefore(ctx, &before, int64(batch), term)
}
