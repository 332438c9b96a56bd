package driver

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// TestHookPauseAfterCompletion names the environment variable of a test
// hook: the end-to-end test of a leader cut off from the database inside
// FinishApply's transaction sets it to a directory of its own, so that the
// window, a few milliseconds wide, can be opened on a real manager at will.
// While DIR/pause exists, a change transaction whose CompleteJobs or
// CompleteJob has just completed a job on the server (the jobs' rows locked, and on
// MariaDB the lease's row share-locked by the fence) writes DIR/paused and
// waits, before it sends anything more, until DIR/pause is removed or its
// context ends. Unset, as in production, there is no hook.
const TestHookPauseAfterCompletion = "AFM_TEST_HOOK_PAUSE_AFTER_COMPLETION"

// PauseAfterCompletion is the test hook's pause, nil when the variable is
// unset. An engine opened with it says so, as a warning: it makes a change
// transaction wait on files.
func PauseAfterCompletion(log *slog.Logger) func(ctx context.Context) {
	dir := os.Getenv(TestHookPauseAfterCompletion)
	if dir == "" {
		return nil
	}
	log.Warn("test hook set: a change transaction pauses after completing jobs while the directory holds a file named pause",
		"variable", TestHookPauseAfterCompletion, "directory", dir)
	pause, paused := filepath.Join(dir, "pause"), filepath.Join(dir, "paused")
	return func(ctx context.Context) {
		if _, err := os.Stat(pause); err != nil {
			return
		}
		if err := os.WriteFile(paused, nil, 0o600); err != nil {
			log.Error("test hook: write the paused file", "error", err)
		}
		for ctx.Err() == nil {
			if _, err := os.Stat(pause); errors.Is(err, fs.ErrNotExist) {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// Paused is q with pause (PauseAfterCompletion) run after each completion
// that completed a job (one that matched none locked no job's row); q itself
// when pause is nil.
func Paused(q Queries, pause func(ctx context.Context)) Queries {
	if pause == nil {
		return q
	}
	return pausedQueries{Queries: q, pause: pause}
}

type pausedQueries struct {
	Queries
	pause func(ctx context.Context)
}

func (q pausedQueries) CompleteJobs(ctx context.Context, fabric string, now *time.Time, revision, term int64) (int64, error) {
	n, err := q.Queries.CompleteJobs(ctx, fabric, now, revision, term)
	if err == nil && n > 0 {
		q.pause(ctx)
	}
	return n, err
}

func (q pausedQueries) CompleteJob(ctx context.Context, fabric string, now *time.Time, jobID, revision, term int64) (int64, error) {
	n, err := q.Queries.CompleteJob(ctx, fabric, now, jobID, revision, term)
	if err == nil && n > 0 {
		q.pause(ctx)
	}
	return n, err
}
