package storetest

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/migrations"
)

// TestOpenWithoutMigrating: a manager with auto_migrate off, and every
// read-only command, opens without migrating. On a database that lacks this
// binary's migrations it must say so at once, naming both versions, instead of
// failing later on a missing table ("no such table: leadership"), and must not
// create goose's version table while looking; a database migrated by this
// binary opens.
func TestOpenWithoutMigrating(t *testing.T) {
	for _, e := range migrationEngines {
		t.Run(e.engine, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			empty := NewDatabase(t, e.engine)
			latest := newestMigration(t, sqlOpen(t, empty, e.driver), e.engine, e.dialect)
			wantBehind(ctx, t, empty, 0, latest)
			if n := versionTables(ctx, t, empty, e.driver, e.dialect); n != 0 {
				t.Errorf("opening without migrating created goose's version table")
			}

			older := NewDatabase(t, e.engine)
			migrateTo(ctx, t, older, e.driver, e.dialect, 6)
			wantBehind(ctx, t, older, 6, latest)

			newest := NewDatabase(t, e.engine)
			OpenDatabase(t, newest) // migrates
			s, err := storeopen.Open(ctx, newest.Engine, newest.DSN, false, store.Rules{}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatalf("open a migrated database without migrating: %v", err)
			}
			s.DB().Close()
		})
	}
}

func wantBehind(ctx context.Context, t *testing.T, d Database, current, latest int64) {
	t.Helper()
	s, err := storeopen.Open(ctx, d.Engine, d.DSN, false, store.Rules{}, slog.New(slog.DiscardHandler))
	if err == nil {
		s.DB().Close()
		t.Fatalf("schema version %d opened without migrating; want it refused", current)
	}
	var behind *storeopen.SchemaBehindError
	if !errors.As(err, &behind) {
		t.Fatalf("schema version %d: got %v, want a SchemaBehindError", current, err)
	}
	if behind.Current != current || behind.Latest != latest {
		t.Errorf("schema version %d: error says %d of %d, want %d of %d (%v)",
			current, behind.Current, behind.Latest, current, latest, err)
	}
}

func newestMigration(t *testing.T, db *sql.DB, engine string, dialect goose.Dialect) int64 {
	t.Helper()
	fsys, err := migrations.FS(engine)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(dialect, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	sources := p.ListSources()
	return sources[len(sources)-1].Version
}

func migrateTo(ctx context.Context, t *testing.T, d Database, driverName string, dialect goose.Dialect, version int64) {
	t.Helper()
	db := sqlOpen(t, d, driverName)
	fsys, err := migrations.FS(d.Engine)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(dialect, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatalf("migrate to version %d: %v", version, err)
	}
}

// versionTables counts goose's version table in d's catalogue.
func versionTables(ctx context.Context, t *testing.T, d Database, driverName string, dialect goose.Dialect) int {
	t.Helper()
	q := "SELECT count(*) FROM information_schema.tables WHERE table_name = 'goose_db_version' AND table_schema = current_schema()"
	switch dialect {
	case goose.DialectSQLite3:
		q = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'"
	case goose.DialectMySQL:
		q = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'goose_db_version' AND table_schema = DATABASE()"
	}
	var n int
	if err := sqlOpen(t, d, driverName).QueryRowContext(ctx, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func sqlOpen(t *testing.T, d Database, driverName string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driverName, d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
