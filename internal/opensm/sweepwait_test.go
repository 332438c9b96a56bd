package opensm

import (
	"context"
	"testing"
	"time"
)

// The tests wait for a sweep from a position of their own choosing (a
// fixture's offset, the log's start), with a tail of their own: the
// manager's Tail.WatchSweep takes the position now, with its term's tail.

// watchSweep returns a watch of the log at path from the position, with a
// tail of its own, closed when the test ends.
func watchSweep(t testing.TB, path string, from Position) *SweepWatch {
	tail := newTail(path, from)
	t.Cleanup(func() { tail.Close() })
	tail.mu.Lock()
	defer tail.mu.Unlock()
	return tail.watch(from)
}

// waitSweep waits for the first heavy sweep that started after from in the
// log at path, as a SweepWatch does (its rules are described there).
func waitSweep(ctx context.Context, path string, from Position, timeout time.Duration) (SweepResult, error) {
	tail := newTail(path, from)
	defer tail.Close()
	tail.mu.Lock()
	w := tail.watch(from)
	tail.mu.Unlock()
	defer w.Close()
	return w.Wait(ctx, timeout)
}
