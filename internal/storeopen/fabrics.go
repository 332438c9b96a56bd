package storeopen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/sqlite"
)

// OpenFabrics is Open for a database serving several fabrics, the default
// first: it returns the default fabric's view (store.NewFabrics).
func OpenFabrics(ctx context.Context, engine, dsn string, migrate bool, fabrics []store.FabricRules, log *slog.Logger) (*store.Store, error) {
	if len(fabrics) == 0 {
		return nil, errors.New("no fabric to open the database for")
	}
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
		err = e.Migrate(ctx)
	} else {
		err = checkSchema(ctx, e, log)
	}
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("%s: %w", engine, err)
	}
	return store.NewFabrics(e, fabrics), nil
}
