package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// RunLease is the HA lease's suite on one database, opened once per manager
// by open (on Galera, each manager on its own node: galera says so).
// db is the database as the first manager's store opens it, for the tests that
// restore it beside the managers.
func RunLease(t *testing.T, galera bool, open func(t *testing.T) ([]*store.Store, Database)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, managers []*store.Store)
	}{
		{"TakenWhenFreeRenewedAndReleased", testLeaseTakeRenewRelease},
		{"ExpiredLeaseIsTakenAndItsHolderSuspected", testLeaseExpiry},
		{"FreezeIsFencedAndLiftedOnlyAfterUnfreeze", testFreeze},
		{"ConcurrentTakesHaveOneWinner", func(t *testing.T, m []*store.Store) { testConcurrentTakes(t, m, galera) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, _ := open(t)
			tc.fn(t, m)
		})
	}
	t.Run("RestoredRowNeverRepeatsATerm", func(t *testing.T) {
		t.Parallel()
		m, db := open(t)
		testLeaseRestore(t, m, db)
	})
}

// OpenManagers opens n stores on one fresh database of engine.
func OpenManagers(t *testing.T, engine string, n int) []*store.Store {
	stores, _ := OpenManagersOf(t, engine, n)
	return stores
}

// OpenManagersOf is OpenManagers, and returns the database too.
func OpenManagersOf(t *testing.T, engine string, n int) ([]*store.Store, Database) {
	db := NewMigratedDatabase(t, engine)
	stores := make([]*store.Store, n)
	for i := range stores {
		stores[i] = OpenDatabase(t, db)
	}
	return stores, db
}

// GaleraURLsEnv names the Galera cluster's nodes for the tests: their
// [database] connection URLs, separated by blanks (scripts/test-env.sh).
const GaleraURLsEnv = "AFM_TEST_GALERA_URLS"

// NewGaleraDatabase creates an empty database on the Galera cluster, dropped
// when the test ends, and returns it as each node serves it.
func NewGaleraDatabase(t testing.TB) []Database {
	t.Helper()
	urls := strings.Fields(testdb.ServerURL(t, GaleraURLsEnv))
	if len(urls) < 2 {
		t.Fatalf("%s names %d nodes; want at least 2", GaleraURLsEnv, len(urls))
	}
	// Made through the first node, the database is replicated to the others.
	name := randomName(t)
	dbs := []Database{newServerDatabase(t, urls[0], name)}
	for _, node := range urls[1:] {
		db, err := testdb.On(node, name)
		if err != nil {
			t.Fatalf("%s: %v", GaleraURLsEnv, err)
		}
		dbs = append(dbs, db)
	}
	return dbs
}

// OpenGaleraManagers opens one store per Galera node on one fresh database.
// The schema is migrated through the first node before the others open it.
func OpenGaleraManagers(t *testing.T) []*store.Store {
	stores, _ := OpenGaleraManagersOf(t)
	return stores
}

// OpenGaleraManagersOf is OpenGaleraManagers, and returns the database as
// the first node serves it too.
func OpenGaleraManagersOf(t *testing.T) ([]*store.Store, Database) {
	dbs := NewGaleraDatabase(t)
	stores := make([]*store.Store, len(dbs))
	for i, db := range dbs {
		stores[i] = OpenDatabase(t, db)
	}
	return stores, dbs[0]
}

func leases(t *testing.T, s *store.Store) store.LeaseTables {
	t.Helper()
	l, err := s.Leases()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func take(t *testing.T, s *store.Store, holder string, ttl time.Duration) (store.Lease, bool) {
	t.Helper()
	l, won, err := leases(t, s).TakeLease(t.Context(), holder, ttl)
	if err != nil {
		t.Fatalf("TakeLease(%s): %v", holder, err)
	}
	return l, won
}

// takeEventually takes a lease that is free or expired: on Galera a node
// may not have applied another node's release or renewal yet (its reads lag
// the cluster's commits), and its take then matches nothing until it has.
func takeEventually(t *testing.T, s *store.Store, holder string, ttl time.Duration) store.Lease {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, won, err := leases(t, s).TakeLease(t.Context(), holder, ttl)
		if err == nil && won {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s could not take a free lease within 10 s: %+v, %v", holder, l, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// certified runs a write until Galera certifies it: a write on one node to the
// lease row that another node's commit reached meanwhile is aborted with a
// deadlock error (nothing written; the manager's next tick writes again), so
// the tests send it again, for up to 10 s, and judge the write that ran. Other
// engines never return that error.
func certified[T any](t *testing.T, write func() (T, error)) (T, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := write()
		var myErr *mysql.MySQLError
		if !errors.As(err, &myErr) || myErr.Number != 1213 || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testLeaseTakeRenewRelease(t *testing.T, m []*store.Store) {
	ctx := t.Context()
	a, b := m[0], m[1]
	la, won := take(t, a, "A", time.Minute)
	if !won || la.Holder != "A" || !la.Held() || la.Term < 1 {
		t.Fatalf("A's first take = %+v, %v; want A holding a term", la, won)
	}
	if la.ExpiresAt.Sub(la.Now) < 50*time.Second || la.ExpiresAt.Sub(la.Now) > time.Minute+time.Second {
		t.Errorf("lease expires %s after the database's now; want about a minute", la.ExpiresAt.Sub(la.Now))
	}
	// On Galera, B's node may not have applied A's take yet: B's take then
	// fails certification (an error), which is losing too.
	if lb, won, err := leases(t, b).TakeLease(ctx, "B", time.Minute); err == nil && (won || lb.Holder != "A" || lb.Term != la.Term) {
		t.Fatalf("B took a held lease: %+v, %v", lb, won)
	}
	if ok, err := leases(t, a).RenewLease(ctx, la.Term, time.Minute); err != nil || !ok {
		t.Fatalf("A's renewal = %v, %v; want true", ok, err)
	}
	if ok, err := leases(t, b).RenewLease(ctx, la.Term-1, time.Minute); err != nil || ok {
		t.Errorf("a renewal with an old term = %v, %v; want false", ok, err)
	}
	if ok, err := leases(t, a).ReleaseLease(ctx, la.Term); err != nil || !ok {
		t.Fatalf("A's release = %v, %v; want true", ok, err)
	}
	if ok, err := leases(t, a).RenewLease(ctx, la.Term, time.Minute); err != nil || ok {
		t.Errorf("a renewal after the release = %v, %v; want false", ok, err)
	}
	lb := takeEventually(t, b, "B", time.Minute)
	if lb.Term <= la.Term || lb.Holder != "B" {
		t.Fatalf("B's take after the release = %+v; want B with a term after %d", lb, la.Term)
	}
	if lb.PreviousHolder != "A" || lb.PreviousExpired || lb.Suspect != "" {
		t.Errorf("after a release: previous %q expired %v suspect %q; want A, false, none",
			lb.PreviousHolder, lb.PreviousExpired, lb.Suspect)
	}
	// The term fences the applier's writes: A's are refused now.
	if n, err := certified(t, func() (int64, error) { return a.CompleteJobs(ctx, la.Term, 1<<40) }); err != nil || n != 0 {
		t.Errorf("CompleteJobs with the released term = %d, %v; want 0", n, err)
	}
}

func testLeaseExpiry(t *testing.T, m []*store.Store) {
	ctx := t.Context()
	a, b := m[0], m[1]
	la, won := take(t, a, "A", time.Second)
	if !won {
		t.Fatal("A did not take a free lease")
	}
	time.Sleep(1200 * time.Millisecond)
	if l, err := leases(t, b).ReadLease(ctx); err != nil || l.Held() || l.Holder != "A" {
		t.Fatalf("ReadLease after expiry = %+v, %v; want A's, not held", l, err)
	}
	if ok, err := leases(t, a).RenewLease(ctx, la.Term, time.Minute); err != nil || ok {
		t.Errorf("renewal of an expired lease = %v, %v; want false", ok, err)
	}
	lb := takeEventually(t, b, "B", time.Minute)
	if lb.Term <= la.Term {
		t.Fatalf("B's take of an expired lease = %+v; want a term after %d", lb, la.Term)
	}
	if lb.PreviousHolder != "A" || !lb.PreviousExpired || lb.Suspect != "A" {
		t.Errorf("after an expiry: previous %q expired %v suspect %q; want A, true, A",
			lb.PreviousHolder, lb.PreviousExpired, lb.Suspect)
	}
}

func testFreeze(t *testing.T, m []*store.Store) {
	ctx := t.Context()
	a, b := m[0], m[1]
	la, _ := take(t, a, "A", 500*time.Millisecond)
	time.Sleep(700 * time.Millisecond)
	lb := takeEventually(t, b, "B", 700*time.Millisecond)
	if ok, err := certified(t, func() (bool, error) { return leases(t, a).SetFreeze(ctx, la.Term, "late") }); err != nil || ok {
		t.Errorf("SetFreeze with an old term = %v, %v; want false", ok, err)
	}
	if ok, err := certified(t, func() (bool, error) { return leases(t, b).SetFreeze(ctx, lb.Term, "another master\nseen") }); err != nil || !ok {
		t.Fatalf("SetFreeze = %v, %v", ok, err)
	}
	if ok, err := certified(t, func() (bool, error) { return leases(t, b).LiftFreeze(ctx, lb.Term) }); err != nil || ok {
		t.Errorf("LiftFreeze before any --unfreeze = %v, %v; want false", ok, err)
	}
	l, err := b.Unfreeze(ctx)
	if err != nil || l.Freeze != "another master seen" || !l.UnfreezeRequested || l.Suspect != "A" {
		t.Fatalf("Unfreeze = %+v, %v; want the freeze, one line, with the unfreeze pending, naming A", l, err)
	}
	// B dies frozen: C's take keeps A suspected, and clears the freeze, which
	// C must find again for itself.
	time.Sleep(900 * time.Millisecond)
	lc := takeEventually(t, a, "C", time.Minute)
	if lc.Suspect != "A" || lc.PreviousHolder != "B" || lc.Freeze != "" || lc.UnfreezeRequested {
		t.Fatalf("take after a frozen leader expired = %+v; want suspect A, previous B, no freeze", lc)
	}
	if ok, err := certified(t, func() (bool, error) { return leases(t, a).SetFreeze(ctx, lc.Term, "again") }); err != nil || !ok {
		t.Fatalf("SetFreeze = %v, %v", ok, err)
	}
	if _, err := a.Unfreeze(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := certified(t, func() (bool, error) { return leases(t, b).LiftFreeze(ctx, lb.Term) }); err != nil || ok {
		t.Errorf("LiftFreeze with an old term = %v, %v; want false", ok, err)
	}
	if ok, err := certified(t, func() (bool, error) { return leases(t, a).LiftFreeze(ctx, lc.Term) }); err != nil || !ok {
		t.Errorf("LiftFreeze = %v, %v; want true", ok, err)
	}
	if l, err := leases(t, a).ReadLease(ctx); err != nil || l.Freeze != "" || l.UnfreezeRequested || l.Suspect != "" {
		t.Errorf("after the lift = %+v, %v; want no freeze, nothing pending, no suspect", l, err)
	}
	if l, err := a.Unfreeze(ctx); err != nil || l.UnfreezeRequested {
		t.Errorf("Unfreeze without a freeze = %+v, %v; want nothing pending", l, err)
	}
}

// Every manager takes the free lease at the same moment, several rounds:
// exactly one wins each round, and every take answers (won or lost) without
// an error. On Galera the managers are on different nodes: a loser's commit
// may fail certification (a deadlock error, and no lease), the only error
// allowed there; and since a node's reads may lag the last release, every
// take of a round may lose (the manager's next tick takes it then): at most
// one winner.
func testConcurrentTakes(t *testing.T, m []*store.Store, galera bool) {
	for round := range 5 {
		if round > 0 {
			time.Sleep(200 * time.Millisecond) // let every node apply the release
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		won := make([]bool, len(m))
		errs := make([]error, len(m))
		for i, s := range m {
			wg.Go(func() {
				<-start
				_, won[i], errs[i] = leases(t, s).TakeLease(context.Background(), fmt.Sprintf("M%d", i), time.Minute)
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		var term int64
		for i, w := range won {
			switch err := errs[i]; {
			case err != nil && (!galera || !store.IsConflict(err)):
				t.Fatalf("round %d: M%d's take: %v; want won or lost%s", round, i, err,
					map[bool]string{true: " (or a certification failure)"}[galera])
			case err != nil:
				continue // lost certification: nothing taken
			case !w:
				continue
			}
			winners++
			l, err := leases(t, m[i]).ReadLease(t.Context())
			if err != nil || l.Holder != fmt.Sprintf("M%d", i) {
				t.Fatalf("round %d: M%d won but the row says %+v, %v", round, i, l, err)
			}
			term = l.Term
		}
		switch {
		case winners > 1:
			t.Fatalf("round %d: %d managers took the lease; want 1", round, winners)
		case winners == 0 && !galera:
			t.Fatalf("round %d: no manager took the free lease; want 1", round)
		case winners == 0:
			term = takeEventually(t, m[0], "M0", time.Minute).Term
		}
		if ok, err := leases(t, m[0]).ReleaseLease(t.Context(), term); err != nil || !ok {
			t.Fatalf("release = %v, %v", ok, err)
		}
	}
}

// A restore from a backup (or a failover to an asynchronous replica) puts an
// older lease row back: an older term, an older holder, an expiry that has
// passed. The next take must still start a term never given before: were it
// the restored term + 1, it could be the live leader's, whose renewals would
// then succeed on the new holder's row, both leading with one term and every
// write fenced by it accepting both.
func testLeaseRestore(t *testing.T, m []*store.Store, db Database) {
	ctx := t.Context()
	a, b := m[0], m[1]
	la, won := take(t, a, "A", 500*time.Millisecond)
	if !won {
		t.Fatal("A did not take a free lease")
	}
	restore := LeaseBackupPoint(t, db)
	time.Sleep(700 * time.Millisecond)
	lb := takeEventually(t, b, "B", time.Minute)
	if lb.Term <= la.Term {
		t.Fatalf("B's take = %+v; want a term after A's %d", lb, la.Term)
	}
	restore()
	if l, err := leases(t, a).ReadLease(ctx); err != nil || l.Term != la.Term || l.Holder != "A" || l.Held() {
		t.Fatalf("the restored row = %+v, %v; want A's term %d, expired", l, err, la.Term)
	}
	lc := takeEventually(t, a, "C", time.Minute)
	if lc.Term <= lb.Term {
		t.Fatalf("C's take after the restore = term %d; want a term after every one given (%d, %d)", lc.Term, la.Term, lb.Term)
	}
	// B, the live leader, learns at its next renewal that it no longer leads.
	if ok, err := certified(t, func() (bool, error) { return leases(t, b).RenewLease(ctx, lb.Term, time.Minute) }); err != nil || ok {
		t.Errorf("B's renewal after C's take = %v, %v; want false", ok, err)
	}
	if n, err := certified(t, func() (int64, error) { return b.CompleteJobs(ctx, lb.Term, 1<<40) }); err != nil || n != 0 {
		t.Errorf("CompleteJobs with B's term after C's take = %d, %v; want 0", n, err)
	}
}
