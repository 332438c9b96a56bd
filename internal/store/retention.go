package store

import (
	"context"
	"fmt"
	"time"
)

// Bounds of one pruning: each statement deletes at most PruneBatch rows (jobs,
// or applies), and one call runs at most pruneMaxBatches of them, so that a
// large backlog (a first run with a short retention, a year of applies) is
// worked off over several calls instead of holding the database (on Galera,
// every node, with one large writeset) for long.
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
	return deleteInBatches("jobs", before, func() (int64, error) {
		return s.DeleteFinishedJobsBefore(ctx, term, before, PruneBatch)
	})
}

// deleteInBatches runs batch, which deletes at most PruneBatch rows of what
// finished before the time, until it deletes fewer (or pruneMaxBatches
// times), and returns how many rows it deleted, errors included.
func deleteInBatches(what string, before time.Time, batch func() (int64, error)) (int64, error) {
	var total int64
	for range pruneMaxBatches {
		n, err := batch()
		total += n
		if err != nil {
			return total, fmt.Errorf("delete %s finished before %s: %w", what, before.Format(time.RFC3339), err)
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
	return s.d.Queries(ctx).DeleteFinishedJobsBefore(ctx, s.FabricName(), &before, int64(batch), term)
}

// DeleteExpiredApplies deletes, in batches, the rows of applies (one per
// attempt: retries and drift repairs included) that finished more than
// retention before now, and returns how many it deleted, fenced by term.
// It keeps every row from the first one something still reads
// (FirstApplyToKeep): the newest, which --status shows, and, for every
// Completed job still kept, an applied row of its revision or a later one
// that finished before it, the record that proves the job. The first row to
// keep is read once: a row written or a job completed meanwhile is newer, so
// the rows below it stay unread.
func (s *Store) DeleteExpiredApplies(ctx context.Context, term int64, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("delete expired applies: retention %s is not positive", retention)
	}
	before := s.now().Add(-retention)
	keepFrom, err := s.d.Queries(ctx).FirstApplyToKeep(ctx, s.FabricName())
	if err != nil {
		return 0, fmt.Errorf("delete expired applies: the first row to keep: %w", err)
	}
	return deleteInBatches("applies", before, func() (int64, error) {
		return s.DeleteAppliesBefore(ctx, term, keepFrom, before, PruneBatch)
	})
}

// DeleteAppliesBefore deletes at most batch rows of applies whose id is below
// keepFrom and that finished before the time, oldest first, and says how
// many: one batch of DeleteExpiredApplies. None once term is not the current
// leadership term.
func (s *Store) DeleteAppliesBefore(ctx context.Context, term, keepFrom int64, before time.Time, batch int) (int64, error) {
	return s.d.Queries(ctx).DeleteAppliesBefore(ctx, s.FabricName(), keepFrom, before, int64(batch), term)
}
