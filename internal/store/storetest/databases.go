// Package storetest gives tests a fresh, migrated database on each engine, and
// holds the compliance suite every engine must pass.
//
// PostgreSQL and MariaDB come from AFM_TEST_POSTGRES_URL and AFM_TEST_MYSQL_URL
// (URLs as [database] connection takes them, for a user allowed to create
// databases; `make test` starts throwaway servers and sets both). Each test gets
// a database of its own, dropped afterwards. Without a URL the engine's tests
// skip, unless AFM_TEST_REQUIRE_ALL=1 (as in CI), where they fail.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// Engines lists the engines every suite runs on.
var Engines = []string{config.EngineSQLite, config.EnginePostgres, config.EngineMySQL}

// Database is a fresh database for one test.
type Database struct {
	Engine string
	URL    string // as [database] connection takes it
	DSN    string // as the engine's driver takes it
}

// NewDatabase creates an empty database on engine, dropped when the test ends.
func NewDatabase(t testing.TB, engine string) Database {
	t.Helper()
	name := "afm_test_" + randomSuffix(t)
	switch engine {
	case config.EngineSQLite:
		path := filepath.Join(t.TempDir(), "afm.db")
		return Database{Engine: engine, URL: "sqlite:///" + path, DSN: path}
	case config.EnginePostgres:
		admin := serverURL(t, "AFM_TEST_POSTGRES_URL")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatalf("postgres test server: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatalf("create test database: %v", err)
		}
		t.Cleanup(func() { dropPostgres(t, admin, name) })
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatalf("AFM_TEST_POSTGRES_URL: %v", err)
		}
		u.Path = "/" + name
		return Database{Engine: engine, URL: u.String(), DSN: u.String()}
	case config.EngineMySQL:
		admin := serverURL(t, "AFM_TEST_MYSQL_URL")
		conn, err := config.ParseConnection(admin)
		if err != nil {
			t.Fatalf("AFM_TEST_MYSQL_URL: %v", err)
		}
		db, err := sql.Open("mysql", conn.DSN)
		if err != nil {
			t.Fatalf("mysql test server: %v", err)
		}
		defer db.Close()
		if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
			t.Fatalf("create test database: %v", err)
		}
		t.Cleanup(func() { dropMySQL(t, conn.DSN, name) })
		cfg, err := mysql.ParseDSN(conn.DSN)
		if err != nil {
			t.Fatalf("AFM_TEST_MYSQL_URL: %v", err)
		}
		cfg.DBName = name
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatalf("AFM_TEST_MYSQL_URL: %v", err)
		}
		u.Path = "/" + name
		return Database{Engine: engine, URL: u.String(), DSN: cfg.FormatDSN()}
	}
	t.Fatalf("unknown engine %q", engine)
	return Database{}
}

// Open returns a migrated store on a fresh database, closed when the test ends.
func Open(t testing.TB, engine string) *store.Store {
	t.Helper()
	return OpenDatabase(t, NewDatabase(t, engine))
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
	t.Cleanup(func() { s.Close() })
	return s
}

func serverURL(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("AFM_TEST_REQUIRE_ALL") == "1" {
			t.Fatalf("%s is not set, and AFM_TEST_REQUIRE_ALL=1: run the tests with `make test`, which starts the servers", env)
		}
		t.Skipf("%s is not set (make test starts a throwaway server and sets it)", env)
	}
	return v
}

func dropPostgres(t testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Logf("drop test database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Logf("drop test database %s: %v", name, err)
	}
}

func dropMySQL(t testing.TB, dsn, name string) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Logf("drop test database %s: %v", name, err)
		return
	}
	defer db.Close()
	if _, err := db.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
		t.Logf("drop test database %s: %v", name, err)
	}
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
