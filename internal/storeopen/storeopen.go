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
// by rules.
func Open(ctx context.Context, engine, dsn string, migrate bool, rules store.Rules, log *slog.Logger) (*store.Store, error) {
	var (
		e   driver.Driver
		err error
	)
	switch engine {
	case "postgres":
		e, err = postgres.Open(ctx, dsn, log)
	case "mysql":
		e, err = mysql.Open(ctx, dsn, log)
	case "sqlite":
		e, err = sqlite.Open(ctx, dsn, log)
	default:
		return nil, fmt.Errorf("unknown database engine %q", engine)
	}
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := e.Migrate(ctx); err != nil {
			e.Close()
			return nil, fmt.Errorf("%s: %w", engine, err)
		}
	}
	return store.New(e, rules), nil
}
