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

// TestHookPauseInsideFinish names the environment variable of a test hook:
// the end-to-end test of a leader cut off from the database inside
// FinishApply's transaction sets it to a directory of its own, so that the
// window, a few milliseconds wide, can be opened on a real manager at will.
// While DIR/pause exists, a change transaction whose read of the gates
// (GateSwitches, FinishApply's read after its fenced write of the apply's
// row: on MariaDB the fence has share-locked the lease's row) has answered
// writes DIR/paused and waits, before it sends anything more (the jobs'
// completion and the COMMIT), until DIR/pause is removed or its context ends.
// Unset, as in production, there is no hook.
const TestHookPauseInsideFinish = "AFM_TEST_HOOK_PAUSE_INSIDE_FINISH"

// PauseInsideFinish is the test hook's pause, nil when the variable is
// unset. An engine opened with it says so, as a warning: it makes a change
// transaction wait on files.
func PauseInsideFinish(log *slog.Logger) func(ctx context.Context) {
	dir := os.Getenv(TestHookPauseInsideFinish)
	if dir == "" {
		return nil
	}
	log.Warn("test hook set: a change transaction pauses after its read of the gates while the directory holds a file named pause",
		"variable", TestHookPauseInsideFinish, "directory", dir)
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

// Paused is q with pause (PauseInsideFinish) run after each read of the
// gates; q itself when pause is nil.
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

func (q pausedQueries) GateSwitches(ctx context.Context, fabric string) ([]GateSwitchesRow, error) {
	rows, err := q.Queries.GateSwitches(ctx, fabric)
	if err == nil {
		q.pause(ctx)
	}
	return rows, err
}
