package tick

import (
	"context"
	"testing"
	"time"
)

func TestEveryStopsWhenFSaysSo(t *testing.T) {
	calls := 0
	Every(t.Context(), time.Millisecond, func() bool {
		calls++
		return calls < 3
	})
	if calls != 3 {
		t.Errorf("f called %d times, want 3: Every must stop at the first false", calls)
	}
}

func TestEveryStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() bool {
			calls++
			if calls == 2 {
				cancel()
			}
			return true
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every still runs 10 s after its context ended")
	}
	// A tick that is ready together with the end of ctx may still be
	// taken (select picks at random), as the loops Every replaced did.
	if calls < 2 {
		t.Errorf("f called %d times before the context ended, want 2", calls)
	}
}

func TestEveryWaitsOneIntervalFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	Every(ctx, time.Hour, func() bool { called = true; return true })
	if called {
		t.Error("f called before the first interval had passed")
	}
}
