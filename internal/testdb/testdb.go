// Package testdb creates and drops throwaway databases on a PostgreSQL or
// MariaDB server, for everything that runs the manager against a database of
// its own: the store's compliance suite, the end-to-end tests, the soak and the
// benchmark suite.
//
// A server is named by a [database] connection URL for a user allowed to
// create databases (scripts/test-env.sh writes them); the database it makes is
// answered as the same URL with the new database's name, and as the DSN the
// engine's Go driver takes. SQLite needs no server: its callers make a file.
//
// A migrated database costs less as a copy: Template builds one per content
// once and keeps it on the server, Claim hands out a reused copy of it reset
// to its content (template.go, pool.go).
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// Database is one database on a server.
type Database struct {
	Engine string // a config.Engine* name
	URL    string // as [database] connection takes it
	DSN    string // as the engine's Go driver takes it
}

// Name is db's name on its server.
func (db Database) Name() string {
	u, err := url.Parse(db.URL)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// RandomName is prefix followed by 12 random hex digits: a name no other run
// on the same server picks.
func RandomName(prefix string) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random database name: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}

// Create makes the empty database name on the server at serverURL and
// returns it as that server serves it. name is written into the statement
// as it is: callers pass names they made, never input.
func Create(ctx context.Context, serverURL, name string) (Database, error) {
	db, err := On(serverURL, name)
	if err != nil {
		return Database{}, err
	}
	if err := exec(ctx, serverURL, "CREATE DATABASE "+name); err != nil {
		return Database{}, fmt.Errorf("create %s database %s: %w", engineName(db.Engine), name, err)
	}
	return db, nil
}

// On is database name as the server at serverURL serves it, without creating
// it: on a Galera cluster, a database made through one node is served by the
// others too.
func On(serverURL, name string) (Database, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		// url.Parse's error quotes the URL, password included.
		return Database{}, fmt.Errorf("server URL %s: not a valid URL", config.RedactURL(serverURL))
	}
	u.Path = "/" + name
	c, err := config.ParseConnection(u.String())
	if err != nil {
		return Database{}, err
	}
	if c.Engine != config.EnginePostgres && c.Engine != config.EngineMySQL {
		return Database{}, fmt.Errorf("server URL %s: want a PostgreSQL or MariaDB server", config.RedactURL(serverURL))
	}
	return Database{Engine: c.Engine, URL: u.String(), DSN: c.DSN}, nil
}

// Drop removes database name from the server at serverURL, ending the
// sessions still on it (PostgreSQL refuses to drop a database in use); a
// database that is not there is no error.
func Drop(ctx context.Context, serverURL, name string) error {
	c, err := config.ParseConnection(serverURL)
	if err != nil {
		return err
	}
	statement := "DROP DATABASE IF EXISTS " + name
	if c.Engine == config.EnginePostgres {
		statement += " WITH (FORCE)"
	}
	if err := exec(ctx, serverURL, statement); err != nil {
		return fmt.Errorf("drop %s database %s: %w", engineName(c.Engine), name, err)
	}
	return nil
}

// exec runs one statement on the server at serverURL, on a connection of its
// own.
func exec(ctx context.Context, serverURL, statement string) error {
	c, err := config.ParseConnection(serverURL)
	if err != nil {
		return err
	}
	switch c.Engine {
	case config.EnginePostgres:
		conn, err := pgx.Connect(ctx, c.DSN)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, statement)
		return err
	case config.EngineMySQL:
		db, err := sql.Open("mysql", c.DSN)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, statement)
		return err
	}
	return fmt.Errorf("server URL %s: want a PostgreSQL or MariaDB server", config.RedactURL(serverURL))
}

func engineName(engine string) string {
	if engine == config.EnginePostgres {
		return "PostgreSQL"
	}
	return "MariaDB"
}
