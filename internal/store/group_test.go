package store

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The retries of a group the database aborted for a conflict are bounded:
// conflictAttempts attempts, conflictBudget since the first, never past the
// group's deadline; the waits between them grow, with jitter.
func TestConflictRetryIsBounded(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		attempt int
		started time.Time
		want    bool
	}{
		{"first conflict", func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }, 1, time.Now(), true},
		{"last attempt made", func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }, conflictAttempts, time.Now(), false},
		{"budget spent", func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }, 2, time.Now().Add(-conflictBudget), false},
		{"deadline before the wait ends", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, time.Millisecond)
		}, 3, time.Now(), false},
		{"group cancelled", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c, cancel
		}, 1, time.Now(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cancel := tt.ctx()
			defer cancel()
			if got := conflictRetry(c, tt.attempt, tt.started); got != tt.want {
				t.Errorf("conflictRetry(attempt %d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

// Each wait is between half and all of the doubled back-off, capped.
func TestConflictRetryWaits(t *testing.T) {
	for attempt := 1; attempt < conflictAttempts; attempt++ {
		limit := min(conflictBackoff<<(attempt-1), conflictBackoffMax)
		start := time.Now()
		if !conflictRetry(context.Background(), attempt, start) {
			t.Fatalf("attempt %d: no retry", attempt)
		}
		if waited := time.Since(start); waited < limit/2 {
			t.Errorf("attempt %d waited %s; want at least %s", attempt, waited, limit/2)
		}
	}
}

// A group's transaction that failed once its deadline (its last caller's)
// had passed answers every change with that deadline, whatever its
// statement failed with: the driver's "bad connection" for the one the
// deadline cut short, or the refusal of one after it. Before it passed,
// each outcome is its own.
func TestAnswerGivenUp(t *testing.T) {
	refused := errors.New("record port l1: port in use")
	tests := []struct {
		name    string
		expired bool
		in      []error
		want    []error // each outcome wraps it
		given   []bool  // each outcome wraps the deadline
	}{
		{"deadline passed", true,
			[]error{fmt.Errorf("record port l63: %w", sqldriver.ErrBadConn), refused},
			[]error{sqldriver.ErrBadConn, refused}, []bool{true, true}},
		{"already the deadline's", true,
			[]error{fmt.Errorf("wait: %w", context.DeadlineExceeded)},
			[]error{context.DeadlineExceeded}, []bool{true}},
		{"deadline not passed", false,
			[]error{fmt.Errorf("record port l63: %w", sqldriver.ErrBadConn), refused},
			[]error{sqldriver.ErrBadConn, refused}, []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
			if tt.expired {
				ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			}
			defer cancel()
			out := slices.Clone(tt.in)
			answerGivenUp(ctx, out)
			for i, o := range out {
				if !errors.Is(o, tt.want[i]) {
					t.Errorf("outcome %d = %v; want it to wrap %v", i, o, tt.want[i])
				}
				if got := errors.Is(o, context.DeadlineExceeded); got != tt.given[i] {
					t.Errorf("outcome %d = %v; wraps the deadline: %v, want %v", i, o, got, tt.given[i])
				}
			}
		})
	}
}
