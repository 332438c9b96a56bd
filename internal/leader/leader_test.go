package leader

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Two managers on one database: one leads at a time, and when it stops the
// other takes over with a newer term.
func TestOneLeaderAtATimeAndTakeover(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			db := storetest.NewDatabase(t, engine)
			stA, stB := storetest.OpenDatabase(t, db), storetest.OpenDatabase(t, db)
			var leading atomic.Int32
			terms := make(chan int64, 4)
			lead := func(ctx context.Context, term int64) error {
				if n := leading.Add(1); n != 1 {
					t.Errorf("%d leaders at once", n)
				}
				defer leading.Add(-1)
				terms <- term
				<-ctx.Done()
				return nil
			}
			elector := func(s Store, name string) *Elector {
				return &Elector{Store: s, Holder: name, Log: slog.New(slog.DiscardHandler),
					RetryInterval: 50 * time.Millisecond, CheckInterval: 50 * time.Millisecond}
			}
			ctxA, stopA := context.WithCancel(context.Background())
			ctxB, stopB := context.WithCancel(context.Background())
			defer stopB()
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); elector(stA, "A").Run(ctxA, lead) }()
			first := waitTerm(t, terms)
			go func() { defer wg.Done(); elector(stB, "B").Run(ctxB, lead) }()
			// B campaigns for a while and must not win while A holds the lock.
			select {
			case term := <-terms:
				t.Fatalf("a second term %d started while the first leader still runs", term)
			case <-time.After(500 * time.Millisecond):
			}
			stopA()
			second := waitTerm(t, terms)
			if second <= first {
				t.Errorf("takeover term %d is not newer than %d", second, first)
			}
			stopB()
			wg.Wait()
		})
	}
}

func waitTerm(t *testing.T, terms <-chan int64) int64 {
	t.Helper()
	select {
	case term := <-terms:
		return term
	case <-time.After(30 * time.Second):
		t.Fatal("no leader within 30 s")
	}
	return 0
}
