package leader

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Two managers with the lease on one database: one leads at a time; the
// leader that stops stops its OpenSM before it releases the lease, and the
// other takes over at once (well before the lease would have expired), with
// a newer term and the first named as the previous, released, holder.
func TestLeaseOneLeaderAndReleaseAfterStop(t *testing.T) {
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		t.Run(engine, func(t *testing.T) {
			stores := storetest.OpenManagers(t, engine, 2)
			var leading atomic.Int32
			var mu sync.Mutex
			var events []string
			note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
			terms := make(chan Term, 4)
			elector := func(s *store.Store, name string) *LeaseElector {
				leases, err := s.Leases()
				if err != nil {
					t.Fatal(err)
				}
				return &LeaseElector{Leases: leases, TryLock: s.TryLock, Holder: name, Log: slog.New(slog.DiscardHandler),
					LeaseTimeout: 5 * time.Second, Stop: func(context.Context) error { note(name + " stopped OpenSM"); return nil }}
			}
			lead := func(name string) func(ctx context.Context, term Term) error {
				return func(ctx context.Context, term Term) error {
					if n := leading.Add(1); n != 1 {
						t.Errorf("%d leaders at once", n)
					}
					note(name + " leads")
					terms <- term
					<-ctx.Done()
					leading.Add(-1)
					return nil
				}
			}
			ctxA, stopA := context.WithCancel(context.Background())
			ctxB, stopB := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); elector(stores[0], "A").Run(ctxA, lead("A")) }()
			first := waitLeaseTerm(t, terms)
			wg.Add(1)
			go func() { defer wg.Done(); elector(stores[1], "B").Run(ctxB, lead("B")) }()
			select {
			case term := <-terms:
				t.Fatalf("a second term %d started while the first leader holds the lease", term.ID)
			case <-time.After(time.Second):
			}
			stopA()
			second := waitLeaseTerm(t, terms)
			if second.ID <= first.ID || second.Taken.PreviousHolder != "A" || second.Taken.PreviousExpired {
				t.Errorf("takeover = %+v; want a newer term than %d, after A released it", second, first.ID)
			}
			stopB()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			want := []string{"A leads", "A stopped OpenSM", "B leads", "B stopped OpenSM"}
			if len(events) != len(want) {
				t.Fatalf("events %q; want %q", events, want)
			}
			for i := range want {
				if events[i] != want[i] {
					t.Fatalf("events %q; want %q", events, want)
				}
			}
		})
	}
}

func waitLeaseTerm(t *testing.T, terms <-chan Term) Term {
	t.Helper()
	select {
	case term := <-terms:
		return term
	case <-time.After(30 * time.Second):
		t.Fatal("no leader within 30 s")
	}
	return Term{}
}
