package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// A template is a database built once (migrated) and kept on the server for
// every later run, so that a test gets a copy of it (CreateFrom, or a reused
// copy from the pool: Claim) instead of running every migration on a
// database of its own: the copy is the test's alone, as isolated from every
// other test's as a freshly migrated database.
//
// Its name carries key, a digest of what build makes (the migrations): a
// changed migration names a new template and never serves a stale one. The
// build runs under a server-wide lock, so that two test binaries started
// together build it once, and a build cut short (a killed run) is never
// served: PostgreSQL builds under another name and renames the template into
// place; MariaDB, which renames no database, marks the template's database
// as under construction with a table the finished build drops.
const (
	templatePrefix = "afm_tmpl_"
	buildingPrefix = "afm_tmpb_"
	buildingMark   = "afm_template_building"
)

// Template answers the template named after key on the server at serverURL,
// building it with build (which migrates the database it is given) when the
// server has no finished one.
func Template(ctx context.Context, serverURL, key string, build func(context.Context, Database) error) (Database, error) {
	c, err := config.ParseConnection(serverURL)
	if err != nil {
		return Database{}, err
	}
	switch c.Engine {
	case config.EnginePostgres:
		return postgresTemplate(ctx, serverURL, c.DSN, key, build)
	case config.EngineMySQL:
		return mysqlTemplate(ctx, serverURL, c.DSN, key, build)
	}
	return Database{}, fmt.Errorf("server URL %s: want a PostgreSQL or MariaDB server", config.RedactURL(serverURL))
}

// CreateFrom makes database name on the server at serverURL as a copy of
// template (Template's answer): its tables, rows and counters.
func CreateFrom(ctx context.Context, serverURL, name string, template Database) (Database, error) {
	db, err := On(serverURL, name)
	if err != nil {
		return Database{}, err
	}
	if db.Engine == config.EnginePostgres {
		err = exec(ctx, serverURL, "CREATE DATABASE "+name+" TEMPLATE "+template.Name())
	} else {
		err = copyMySQL(ctx, serverURL, db, template.Name())
	}
	if err != nil {
		return Database{}, fmt.Errorf("create %s database %s from %s: %w", engineName(db.Engine), name, template.Name(), err)
	}
	return db, nil
}

// lockKey is the advisory lock of key's template on a PostgreSQL server.
func lockKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(templatePrefix + key))
	return int64(h.Sum64())
}

func postgresTemplate(ctx context.Context, serverURL, dsn, key string, build func(context.Context, Database) error) (Database, error) {
	name, building := templatePrefix+key, buildingPrefix+key
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return Database{}, fmt.Errorf("template %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Advisory locks are the connected database's: every caller connects to
	// the server URL's.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey(key)); err != nil {
		return Database{}, fmt.Errorf("template %s: lock: %w", name, err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey(key))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return Database{}, fmt.Errorf("template %s: %w", name, err)
	}
	if exists {
		return On(serverURL, name)
	}
	if err := Drop(ctx, serverURL, building); err != nil {
		return Database{}, err
	}
	db, err := Create(ctx, serverURL, building)
	if err != nil {
		return Database{}, err
	}
	if err := build(ctx, db); err != nil {
		return Database{}, fmt.Errorf("build template %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return Database{}, fmt.Errorf("template %s: %w", name, err)
	}
	return On(serverURL, name)
}

func mysqlTemplate(ctx context.Context, serverURL, dsn, key string, build func(context.Context, Database) error) (Database, error) {
	name := templatePrefix + key
	pool, err := sql.Open("mysql", dsn)
	if err != nil {
		return Database{}, err
	}
	defer pool.Close()
	conn, err := pool.Conn(ctx) // GET_LOCK is held by a session
	if err != nil {
		return Database{}, fmt.Errorf("template %s: %w", name, err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 600)", name).Scan(&got); err != nil || got.Int64 != 1 {
		return Database{}, fmt.Errorf("template %s: lock not taken (%v, %v)", name, got, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", name)
	var schemas, marks int
	err = conn.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?),
		(SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?)`,
		name, name, buildingMark).Scan(&schemas, &marks)
	if err != nil {
		return Database{}, fmt.Errorf("template %s: %w", name, err)
	}
	if schemas == 1 && marks == 0 {
		return On(serverURL, name)
	}
	if err := Drop(ctx, serverURL, name); err != nil {
		return Database{}, err
	}
	db, err := Create(ctx, serverURL, name)
	if err != nil {
		return Database{}, err
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE "+name+"."+buildingMark+" (id INT)"); err != nil {
		return Database{}, fmt.Errorf("template %s: %w", name, err)
	}
	if err := build(ctx, db); err != nil {
		return Database{}, fmt.Errorf("build template %s: %w", name, err)
	}
	if _, err := conn.ExecContext(ctx, "DROP TABLE "+name+"."+buildingMark); err != nil {
		return Database{}, fmt.Errorf("template %s: %w", name, err)
	}
	return db, nil
}

// copyMySQL creates db and copies the template's tables into it, each as
// SHOW CREATE TABLE writes it (keys, foreign keys, AUTO_INCREMENT counter)
// with its rows. A template with what such a copy would lose (views,
// triggers, routines, events) is refused, never copied in part.
func copyMySQL(ctx context.Context, serverURL string, db Database, template string) error {
	if err := exec(ctx, serverURL, "CREATE DATABASE "+db.Name()); err != nil {
		return err
	}
	pool, err := sql.Open("mysql", db.DSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	conn, err := pool.Conn(ctx) // foreign_key_checks is the session's
	if err != nil {
		return err
	}
	defer conn.Close()
	tables, err := mysqlTables(ctx, conn, template)
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION foreign_key_checks = 0"); err != nil {
		return err
	}
	for _, table := range tables {
		var name, create string
		if err := conn.QueryRowContext(ctx, "SHOW CREATE TABLE "+template+".`"+table+"`").Scan(&name, &create); err != nil {
			return fmt.Errorf("table %s: %w", table, err)
		}
		if _, err := conn.ExecContext(ctx, create); err != nil {
			return fmt.Errorf("table %s: %w", table, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO `"+table+"` SELECT * FROM "+template+".`"+table+"`"); err != nil {
			return fmt.Errorf("rows of %s: %w", table, err)
		}
	}
	return nil
}

// mysqlTables lists template's base tables, after making sure that they are
// all it holds.
func mysqlTables(ctx context.Context, conn *sql.Conn, template string) ([]string, error) {
	var others int
	err := conn.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_type <> 'BASE TABLE') +
		(SELECT COUNT(*) FROM information_schema.triggers WHERE trigger_schema = ?) +
		(SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = ?) +
		(SELECT COUNT(*) FROM information_schema.events WHERE event_schema = ?)`,
		template, template, template, template).Scan(&others)
	if err != nil {
		return nil, err
	}
	if others > 0 {
		return nil, errors.New("the template holds views, triggers, routines or events, which a table copy loses")
	}
	rows, err := conn.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name", template)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var table string
		if err := rows.Scan(&table); err != nil {
			return nil, err
		}
		if strings.ContainsRune(table, '`') {
			return nil, fmt.Errorf("table name %q", table)
		}
		tables = append(tables, table)
	}
	return tables, rows.Err()
}
