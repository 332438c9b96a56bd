package store

import (
	"context"
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
