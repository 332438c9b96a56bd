// Package storetest gives tests a fresh, migrated database on each engine, and
// holds the compliance suite every engine must pass.
//
// PostgreSQL and MariaDB come from AFM_TEST_POSTGRES_URL and AFM_TEST_MYSQL_URL
// (URLs as [database] connection takes them, for a user allowed to create
// databases; `make test` starts throwaway servers and sets both). Each test gets
// a database of its own, dropped afterwards: an empty one (NewDatabase), or a
// copy of the engine's migrated template (NewMigratedDatabase), which costs a
// fraction of running every migration. Without a URL the engine's tests skip,
// unless AFM_TEST_REQUIRE_ALL=1 (as in CI), where they fail.
package storetest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// Engines lists the engines every suite runs on.
var Engines = []string{config.EngineSQLite, config.EnginePostgres, config.EngineMySQL}

// serverEngines are the engines served by a server of their own, with
// sessions to end from outside and leases to hold.
var serverEngines = []string{config.EnginePostgres, config.EngineMySQL}

// onServerEngines runs fn as a subtest on each of serverEngines.
func onServerEngines(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, engine := range serverEngines {
		t.Run(engine, func(t *testing.T) { fn(t, engine) })
	}
}

// Database is a fresh database for one test.
type Database = testdb.Database

// serverEnvs name each server engine's test server.
var serverEnvs = map[string]string{
	config.EnginePostgres: "AFM_TEST_POSTGRES_URL",
	config.EngineMySQL:    "AFM_TEST_MYSQL_URL",
}

// NewDatabase creates an empty database on engine, dropped when the test ends.
func NewDatabase(t testing.TB, engine string) Database {
	t.Helper()
	if engine == config.EngineSQLite {
		path := filepath.Join(t.TempDir(), "afm.db")
		return Database{Engine: engine, URL: "sqlite:///" + path, DSN: path}
	}
	env, ok := serverEnvs[engine]
	if !ok {
		t.Fatalf("unknown engine %q", engine)
	}
	return newServerDatabase(t, testdb.ServerURL(t, env), randomName(t))
}

func randomName(t testing.TB) string {
	name, err := testdb.RandomName("afm_test_")
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// newServerDatabase creates the empty database name on the server at admin,
// dropped when the test ends.
func newServerDatabase(t testing.TB, admin, name string) Database {
	t.Helper()
	return serverDatabase(t, admin, func(ctx context.Context) (Database, error) {
		return testdb.Create(ctx, admin, name)
	})
}

// serverDatabase creates a database on the server at admin with create,
// dropped when the test ends.
func serverDatabase(t testing.TB, admin string, create func(context.Context) (Database, error)) Database {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := create(ctx)
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := testdb.Drop(ctx, admin, db.Name()); err != nil {
			t.Logf("drop test database: %v", err)
		}
	})
	return db
}

// Open returns a migrated store on a fresh database, closed when the test ends.
func Open(t testing.TB, engine string) *store.Store {
	t.Helper()
	return OpenDatabase(t, NewMigratedDatabase(t, engine))
}

// OpenDatabase opens (and migrates) an existing test database.
func OpenDatabase(t testing.TB, db Database) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := storeopen.Open(ctx, db.Engine, db.DSN, true, store.Rules{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("open %s store: %v", db.Engine, err)
	}
	t.Cleanup(func() { s.DB().Close() })
	return s
}
