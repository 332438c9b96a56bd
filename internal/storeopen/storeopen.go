// Package storeopen opens the store for a configured engine. It sits apart from
// package store so that store does not import the engines (nor they it: they
// import store/driver).
package storeopen

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/sqlite"
)

// Open connects to engine ("postgres", "mysql", "sqlite") with the driver-level
// dsn, and migrates the schema first when migrate is true. The store records
// by rules. opts set the server engines' sessions (driver.Options).
func Open(ctx context.Context, engine, dsn string, migrate bool, rules store.Rules, log *slog.Logger, opts ...driver.Option) (*store.Store, error) {
	e, err := openDriver(ctx, engine, dsn, migrate, log, opts)
	if err != nil {
		return nil, err
	}
	return store.New(e, rules), nil
}

// OpenFabrics is Open for a database serving several fabrics, the default
// first (store.NewDB), each fabric's state rows written
// (store.DB.EnsureFabrics) unless the schema is left as it is (migrate
// false: a read-only command, which then reads no fabric that never ran).
func OpenFabrics(ctx context.Context, engine, dsn string, migrate bool, fabrics []store.FabricRules, log *slog.Logger,
	opts ...driver.Option) (*store.DB, error) {
	if len(fabrics) == 0 || fabrics[0].Name != store.DefaultFabric {
		return nil, fmt.Errorf("the fabrics must start with the default fabric %q", store.DefaultFabric)
	}
	e, err := openDriver(ctx, engine, dsn, migrate, log, opts)
	if err != nil {
		return nil, err
	}
	s := store.NewDB(e, fabrics)
	if migrate {
		if err := s.EnsureFabrics(ctx); err != nil {
			e.Close()
			return nil, fmt.Errorf("%s: %w", engine, err)
		}
	}
	return s, nil
}

// openDriver connects to engine and migrates (or checks) its schema.
func openDriver(ctx context.Context, engine, dsn string, migrate bool, log *slog.Logger, opts []driver.Option) (driver.Driver, error) {
	var (
		e   driver.Driver
		err error
	)
	switch engine {
	case "postgres":
		e, err = postgres.Open(ctx, dsn, log, opts...)
	case "mysql":
		e, err = mysql.Open(ctx, dsn, log, opts...)
	case "sqlite":
		e, err = sqlite.Open(ctx, dsn, log)
	default:
		return nil, fmt.Errorf("unknown database engine %q", engine)
	}
	if err != nil {
		return nil, err
	}
	if migrate {
		err = e.Migrate(ctx)
	} else {
		err = checkSchema(ctx, e, log)
	}
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("%s: %w", engine, err)
	}
	return e, nil
}

// SchemaBehindError is a database whose schema lacks migrations this binary
// needs: its queries would fail one by one on missing tables and columns, so it
// is refused whole, before anything reads or writes.
type SchemaBehindError struct{ driver.SchemaVersions }

func (e *SchemaBehindError) Error() string {
	if e.Current == 0 {
		return fmt.Sprintf("no schema (this binary needs version %d): "+
			"run --migrate, or goose up with this release's migrations", e.Latest)
	}
	return fmt.Sprintf("schema at version %d, this binary needs %d: "+
		"run --migrate, or goose up with this release's migrations", e.Current, e.Latest)
}

// checkSchema refuses a schema older than the binary's migrations. A newer one
// is served, with a warning: it is an upgrade under way (a DBA ran a newer
// release's migrations while this release's managers run), and refusing it
// would keep a restarted manager of this release from serving at all.
func checkSchema(ctx context.Context, e driver.Driver, log *slog.Logger) error {
	v, err := e.Schema(ctx)
	if err != nil {
		return err
	}
	if v.Current < v.Latest {
		return &SchemaBehindError{v}
	}
	if v.Current > v.Latest {
		log.Warn("the database's schema is newer than this binary's: a rolling upgrade is under way",
			"schema_version", v.Current, "binary_schema_version", v.Latest)
	}
	return nil
}
