package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// Servers come from the same variables as the tests' (scripts/test-env.sh writes them).
const (
	postgresEnv = "AFM_TEST_POSTGRES_URL"
	mysqlEnv    = "AFM_TEST_MYSQL_URL"
)

// database is a fresh, empty database for one engine's run.
type database struct {
	engine string
	url    string // as [database] connection takes it
	dsn    string // as the engine's Go driver takes it (SQLite: the file's path)
	drop   func() error
}

// createDatabase makes a database of its own for engine: a file under dir for
// SQLite, a new database on the server named by the environment otherwise.
func createDatabase(ctx context.Context, engine, dir string) (database, error) {
	if engine == config.EngineSQLite {
		path := filepath.Join(dir, "afm.db")
		return database{engine: engine, url: "sqlite:///" + path, dsn: path, drop: func() error { return nil }}, nil
	}
	env, ok := map[string]string{config.EnginePostgres: postgresEnv, config.EngineMySQL: mysqlEnv}[engine]
	if !ok {
		return database{}, fmt.Errorf("unknown engine %q: want sqlite, postgres or mysql", engine)
	}
	admin := os.Getenv(env)
	if admin == "" {
		return database{}, fmt.Errorf("%s is not set: run `make bench`, which starts throwaway servers, or point it at a server where the user may create databases", env)
	}
	name, err := testdb.RandomName("afm_bench_")
	if err != nil {
		return database{}, err
	}
	db, err := testdb.Create(ctx, admin, name)
	if err != nil {
		return database{}, fmt.Errorf("%s: %w", env, err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return testdb.Drop(ctx, admin, name)
	}
	return database{engine: engine, url: db.URL, dsn: db.DSN, drop: drop}, nil
}

// postgresExec runs one statement on a connection of its own.
func postgresExec(ctx context.Context, connURL, statement string) error {
	conn, err := pgx.Connect(ctx, connURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, statement)
	return err
}
