package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// The commands that read the recorded state (--status, --render, --show-*)
// and the operator's commands never create a database nor migrate one: run
// against the wrong path, or with a new binary against production, they must
// fail and leave everything as it was. Only the manager's start and --migrate
// create and migrate.

// errNotCreated wraps a SQLite database file that does not exist.
func errNotCreated(cfg *config.Config, err error) error {
	return fmt.Errorf("database %s: %w (the manager's first start, or --migrate, creates it)",
		config.RedactURL(cfg.Database.Connection), err)
}

// openExisting opens the configured database without creating or migrating it,
// waiting at most timeout for it. An error from the engine is returned as it
// is, for the caller to say how the database was unreachable.
func openExisting(ctx context.Context, cfg *config.Config, fabrics []store.FabricRules, timeout time.Duration,
	log *slog.Logger) (*store.DB, error) {
	conn, err := config.ParseConnection(cfg.Database.Connection)
	if err != nil {
		return nil, err
	}
	if conn.Engine == config.EngineSQLite {
		// The SQLite driver would create the file, and its directory.
		if _, err := os.Stat(conn.DSN); err != nil {
			return nil, notReadyError{errNotCreated(cfg, err)}
		}
	}
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := storeopen.OpenFabrics(octx, conn.Engine, conn.DSN, false, fabrics, log)
	if behind := (*storeopen.SchemaBehindError)(nil); errors.As(err, &behind) {
		return nil, notReadyError{fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), behind)}
	}
	return st, err
}

// notReadyError is a database that does not exist or lacks this binary's
// schema: reached, so not unreachable, but nothing to read from.
type notReadyError struct{ error }

func (e notReadyError) Unwrap() error { return e.error }
