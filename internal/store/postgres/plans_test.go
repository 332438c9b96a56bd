package postgres

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// A change transaction's statements are planned once, generically, from
// their first execution on a connection; the session's other statements
// keep the server's choice (plans.go). Without the transaction's setting,
// each of a connection's first five executions of a statement is planned
// anew (custom_plans).
func TestChangeTransactionsPlanOnce(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_plans_")
	// One connection: every statement below runs on the session read last.
	e, err := Open(ctx, db.DSN+"&pool_max_conns=1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	generic := plansGenerically(conn)
	conn.Release()
	if !generic {
		t.Fatal("the test server is PostgreSQL 12 or later, yet the engine would not set plan_cache_mode")
	}
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := store.New(e, store.Rules{PhysicalNetworks: []string{"ib"}})
	net, vlan := "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", int64(101)
	if _, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: net, Name: "n", Type: "vlan",
		PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	var c store.SnapshotCache
	for i := range 4 {
		g := fabric.GUID(0x0002c90300000001 + uint64(i))
		if _, err := s.RecordPort(ctx, store.PortChange{Port: store.Port{ID: fmt.Sprintf("p%d", i), NetworkID: net, GUID: &g, Host: "h1"},
			DeviceOwner: "compute:nova", Operation: store.OpAddPort, CreatedBy: "test", Request: "{}"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReadSnapshot(ctx, &c); err != nil { // outside any change transaction
			t.Fatal(err)
		}
	}
	plans := map[string][2]int64{} // by query name: custom, generic
	rows, err := e.pool.Query(ctx, "SELECT statement, custom_plans, generic_plans FROM pg_prepared_statements")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var stmt string
		var custom, generic int64
		if err := rows.Scan(&stmt, &custom, &generic); err != nil {
			t.Fatal(err)
		}
		if name, ok := queryName(stmt); ok {
			plans[name] = [2]int64{custom, generic}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query   string
		generic bool // planned once, generically; otherwise at each execution
	}{
		{"BumpRevisionLater", true},
		{"GetPortChangeRows", true},
		{"UpsertPort", true},
		{"InsertJobWithPlaces", true},
		{"ListPortsSince", false}, // the applier's read: a revision's rows, an index or the table
	} {
		p, ok := plans[tc.query]
		switch {
		case !ok:
			t.Errorf("%s: not prepared on the connection (prepared: %v)", tc.query, plans)
		case tc.generic && (p[0] != 0 || p[1] == 0):
			t.Errorf("%s: %d custom plans, %d generic ones; want none custom", tc.query, p[0], p[1])
		case !tc.generic && p[0] == 0:
			t.Errorf("%s: %d custom plans, %d generic ones; want the server's choice, custom at first", tc.query, p[0], p[1])
		}
	}
}

// A group of changes, each in a savepoint, runs with the server's plan
// choice: its statements repeat on one connection, so the setting gains it
// nothing (plans.go; storetest's BenchmarkRecordPortsConcurrently). A change
// alone, without a savepoint, keeps it (TestChangeTransactionsPlanOnce).
func TestGroupsOfChangesKeepTheServersPlans(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_plans_")
	e, err := Open(ctx, db.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	held := func(tx driver.ChangeTx) bool {
		p := tx.(driver.HeldChangeTx).Pipeline.(*pipeline)
		return slices.ContainsFunc(p.held.Peek(), func(s driver.HeldStatement) bool { return s.SQL == genericPlans })
	}
	var alone, grouped bool
	if err := e.inChangeTx(ctx, func(tx driver.ChangeTx) error {
		alone = held(tx)
		if err := tx.Savepoint(ctx); err != nil {
			return err
		}
		grouped = held(tx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !alone || grouped {
		t.Errorf("the generic plans' setting held: %v in a change transaction, %v once it holds a savepoint; want true, false",
			alone, grouped)
	}
}

// queryName is the sqlc name of a statement ("-- name: X :kind" first).
func queryName(stmt string) (string, bool) {
	rest, ok := strings.CutPrefix(stmt, "-- name: ")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, " ")
	return name, true
}

func TestMajorVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    int
	}{
		{"15.10 (Debian 15.10-0+deb12u1)", 15},
		{"12.0", 12},
		{"16beta2", 16},
		{"9.6.24", 9},
		{"11.22", 11},
		{"", 0},
		{"PostgreSQL", 0},
	} {
		if got := majorVersion(tc.version); got != tc.want {
			t.Errorf("majorVersion(%q) = %d, want %d", tc.version, got, tc.want)
		}
	}
}
