package manager

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// testHookPauseAfterSMLook names the environment variable of a test hook:
// the end-to-end test of an SM that appears between finish's second-SM look
// and the jobs' completion sets it to a directory of its own, so that the
// window, a few milliseconds wide, can be opened on a real OpenSM at will.
// While DIR/pause exists, finish writes its sweep's revision to
// DIR/paused after the look and waits until DIR/pause is removed (or the
// term ends). Unset, as in production, there is no hook.
const testHookPauseAfterSMLook = "AFM_TEST_HOOK_PAUSE_AFTER_SM_LOOK"

// pauseAfterSMLook is the test hook's function, nil when the variable is
// unset. A manager started with it says so, as a warning: it makes finish
// wait on files.
func pauseAfterSMLook(log *slog.Logger) func(ctx context.Context, revision int64) {
	dir := os.Getenv(testHookPauseAfterSMLook)
	if dir == "" {
		return nil
	}
	log.Warn("test hook set: finish pauses after its second-SM look while the directory holds a file named pause",
		"variable", testHookPauseAfterSMLook, "directory", dir)
	pause, paused := filepath.Join(dir, "pause"), filepath.Join(dir, "paused")
	return func(ctx context.Context, revision int64) {
		if _, err := os.Stat(pause); err != nil {
			return
		}
		if err := os.WriteFile(paused, []byte(strconv.FormatInt(revision, 10)), 0o600); err != nil {
			log.Error("test hook: write the paused revision", "error", err)
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
