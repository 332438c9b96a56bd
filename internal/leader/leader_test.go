package leader

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Two managers on one database: one leads at a time, and when it stops the
// other takes over with a newer term.
func TestOneLeaderAtATimeAndTakeover(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // each engine on a database of its own
			db := storetest.NewMigratedDatabase(t, engine)
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

// waitTerm returns the next term a test's leaders report: the term number
// (Elector) or the whole Term (LeaseElector).
func waitTerm[T any](t *testing.T, terms <-chan T) T {
	t.Helper()
	select {
	case term := <-terms:
		return term
	case <-time.After(30 * time.Second):
		t.Fatal("no leader within 30 s")
	}
	var none T
	return none
}

// hangingStore is a fake Store whose lock check never answers until its
// context ends, as on a black-holed connection; everything else succeeds.
type hangingStore struct {
	terms  atomic.Int64
	checks atomic.Int32
}

func (s *hangingStore) TryLock(ctx context.Context) (store.Lock, error) { return hangingLock{s}, nil }
func (s *hangingStore) NewTerm(ctx context.Context, holder string) (int64, error) {
	return s.terms.Add(1), nil
}
func (s *hangingStore) Heartbeat(ctx context.Context, term int64) error { return nil }

type hangingLock struct{ s *hangingStore }

func (l hangingLock) Check(ctx context.Context) error {
	l.s.checks.Add(1)
	<-ctx.Done() // no answer: only the deadline ends the call
	return ctx.Err()
}
func (l hangingLock) Release(ctx context.Context) error { return nil }

// runElector runs e with a leader that reports each term it starts and leads
// until the term ends; stop ends the run and waits for it.
func runElector(e *Elector) (terms <-chan int64, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan int64, 8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx, func(ctx context.Context, term int64) error {
			started <- term
			<-ctx.Done()
			return nil
		})
	}()
	return started, func() { cancel(); <-done }
}

// A lock check that hangs ends the term at its deadline, and the elector
// campaigns again: the next term starts.
func TestLockCheckDeadline(t *testing.T) {
	st := &hangingStore{}
	e := &Elector{Store: st, Holder: "A", Log: slog.New(slog.DiscardHandler),
		RetryInterval: 10 * time.Millisecond, CheckInterval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond}
	terms, stop := runElector(e)
	defer stop()
	first := waitTerm(t, terms)
	if second := waitTerm(t, terms); second <= first {
		t.Errorf("term %d after %d", second, first)
	}
	if st.checks.Load() == 0 {
		t.Error("the lock was never checked")
	}
}

// restoredStore is a fake Store whose database was restored from a backup
// taken before its first term: the heartbeat row no longer records that term
// (store.Heartbeat answers ErrFenced, as the compliance suite checks on every
// engine), while the lock is still held.
type restoredStore struct {
	hangingStore
}

func (s *restoredStore) TryLock(ctx context.Context) (store.Lock, error) { return freeLock{}, nil }
func (s *restoredStore) Heartbeat(ctx context.Context, term int64) error {
	if term == 1 {
		return fmt.Errorf("heartbeat of term %d: %w", term, store.ErrFenced)
	}
	return nil
}

type freeLock struct{}

func (freeLock) Check(ctx context.Context) error   { return nil }
func (freeLock) Release(ctx context.Context) error { return nil }

// A term the database no longer records ends, though the lock is held, and
// the next starts: otherwise every fenced write of the old term changes
// nothing, and no job completes again.
func TestTermEndsWhenTheDatabaseNoLongerRecordsIt(t *testing.T) {
	e := &Elector{Store: &restoredStore{}, Holder: "A", Log: slog.New(slog.DiscardHandler),
		RetryInterval: 10 * time.Millisecond, CheckInterval: 10 * time.Millisecond}
	terms, stop := runElector(e)
	defer stop()
	if first := waitTerm(t, terms); first != 1 {
		t.Fatalf("first term %d", first)
	}
	if second := waitTerm(t, terms); second != 2 {
		t.Errorf("term %d after 1", second)
	}
}
