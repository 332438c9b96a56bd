package driver

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/migrations"
)

// Migrations are an engine's embedded goose migrations (migrations/<Engine>)
// as they apply to its database. The version table is goose's default
// (goose_db_version), so DBAs can run the same files with the goose CLI and see
// the same history.
type Migrations struct {
	Engine  string // "postgres", "mysql" or "sqlite": the folder and the engine
	Dialect goose.Dialect
	DB      *sql.DB
	// Locker keeps two managers starting together from both migrating; nil
	// where the engine needs none (SQLite has one writer at a time).
	Locker goose.ProviderOption
}

func (m Migrations) provider() (*goose.Provider, error) {
	fsys, err := migrations.FS(m.Engine)
	if err != nil {
		return nil, err
	}
	var opts []goose.ProviderOption
	if m.Locker != nil {
		opts = append(opts, m.Locker)
	}
	p, err := goose.NewProvider(m.Dialect, m.DB, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Up applies the migrations the database lacks.
func (m Migrations) Up(ctx context.Context) error {
	p, err := m.provider()
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// SchemaVersions says how far a database's schema is migrated.
type SchemaVersions struct {
	Current int64 // the newest migration applied; 0 when goose never ran on it
	Latest  int64 // the newest migration this binary embeds
}

// versionTable is goose's default version table, which Migrate uses.
const versionTable = "goose_db_version"

// Schema reads the database's SchemaVersions without writing anything: unlike
// goose's own status commands it never creates the version table.
func (m Migrations) Schema(ctx context.Context) (SchemaVersions, error) {
	exists, err := versionTableExists(ctx, m.Dialect, m.DB)
	if err != nil {
		return SchemaVersions{}, fmt.Errorf("schema version: %w", err)
	}
	p, err := m.provider()
	if err != nil {
		return SchemaVersions{}, err
	}
	sources := p.ListSources()
	if len(sources) == 0 {
		return SchemaVersions{}, fmt.Errorf("migrations: none embedded")
	}
	v := SchemaVersions{Latest: sources[len(sources)-1].Version}
	if !exists {
		return v, nil
	}
	if v.Current, _, err = p.GetVersions(ctx); err != nil {
		return SchemaVersions{}, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

// versionTableExists asks the engine's catalogue whether goose's version table
// is there. goose answers for PostgreSQL and MySQL; its SQLite dialect has no
// such query, so the catalogue is read directly.
func versionTableExists(ctx context.Context, dialect goose.Dialect, db *sql.DB) (bool, error) {
	if dialect == goose.DialectSQLite3 {
		var n int
		err := db.QueryRowContext(ctx,
			"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", versionTable).Scan(&n)
		return n > 0, err
	}
	s, err := database.NewStore(dialect, versionTable)
	if err != nil {
		return false, err
	}
	ext, ok := s.(database.StoreExtender)
	if !ok {
		return false, fmt.Errorf("goose cannot tell whether %s exists on %s", versionTable, dialect)
	}
	return ext.TableExists(ctx, db)
}

// LegacyKeyIndexes are the unique indexes migration 00013 keeps on the keys
// of before fabrics, on PostgreSQL and SQLite, whose upserts (ON CONFLICT)
// find a key only as an index of exactly its columns: the previous release
// runs on the new schema while the database serves the default fabric only.
// A second fabric's rows may repeat those keys: a manager serving several
// fabrics drops them (LegacyKeysDropper), for good.
var LegacyKeyIndexes = []string{
	"secrets_name_legacy", "enforcement_errors_legacy", "kubernetes_pkeys_legacy",
	"kubernetes_members_legacy", "adopted_partitions_legacy", "last_audit_legacy",
}

// LegacyKeysDropper is an engine that has LegacyKeyIndexes to drop.
type LegacyKeysDropper interface {
	DropLegacyKeys(ctx context.Context) error
}
