package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
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
	name, err := randomName()
	if err != nil {
		return database{}, err
	}
	switch engine {
	case config.EngineSQLite:
		path := filepath.Join(dir, "afm.db")
		return database{engine: engine, url: "sqlite:///" + path, dsn: path, drop: func() error { return nil }}, nil
	case config.EnginePostgres:
		return createPostgres(ctx, name)
	case config.EngineMySQL:
		return createMySQL(ctx, name)
	}
	return database{}, fmt.Errorf("unknown engine %q: want sqlite, postgres or mysql", engine)
}

func serverURL(env string) (string, error) {
	v := os.Getenv(env)
	if v == "" {
		return "", fmt.Errorf("%s is not set: run `make bench`, which starts throwaway servers, or point it at a server where the user may create databases", env)
	}
	return v, nil
}

func createPostgres(ctx context.Context, name string) (database, error) {
	admin, err := serverURL(postgresEnv)
	if err != nil {
		return database{}, err
	}
	if err := postgresExec(ctx, admin, "CREATE DATABASE "+name); err != nil {
		return database{}, fmt.Errorf("create PostgreSQL database: %w", err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return database{}, fmt.Errorf("%s: %w", postgresEnv, err)
	}
	u.Path = "/" + name
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return postgresExec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return database{engine: config.EnginePostgres, url: u.String(), dsn: u.String(), drop: drop}, nil
}

func postgresExec(ctx context.Context, connURL, statement string) error {
	conn, err := pgx.Connect(ctx, connURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, statement)
	return err
}

func createMySQL(ctx context.Context, name string) (database, error) {
	admin, err := serverURL(mysqlEnv)
	if err != nil {
		return database{}, err
	}
	conn, err := config.ParseConnection(admin)
	if err != nil {
		return database{}, fmt.Errorf("%s: %w", mysqlEnv, err)
	}
	if err := mysqlExec(ctx, conn.DSN, "CREATE DATABASE "+name); err != nil {
		return database{}, fmt.Errorf("create MariaDB database: %w", err)
	}
	cfg, err := mysql.ParseDSN(conn.DSN)
	if err != nil {
		return database{}, fmt.Errorf("%s: %w", mysqlEnv, err)
	}
	cfg.DBName = name
	u, err := url.Parse(admin)
	if err != nil {
		return database{}, fmt.Errorf("%s: %w", mysqlEnv, err)
	}
	u.Path = "/" + name
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return mysqlExec(ctx, conn.DSN, "DROP DATABASE IF EXISTS "+name)
	}
	return database{engine: config.EngineMySQL, url: u.String(), dsn: cfg.FormatDSN(), drop: drop}, nil
}

func mysqlExec(ctx context.Context, dsn, statement string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, statement)
	return err
}

func randomName() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random database name: %w", err)
	}
	return "afm_bench_" + hex.EncodeToString(b), nil
}
