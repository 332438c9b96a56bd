package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// A pool holds copies of a template, kept on the server across runs and
// reused test after test, as River's riverdbtest reuses its test schemas:
// creating a database costs a PostgreSQL server about 400 ms (it copies
// template1 through its WAL), emptying a copy a few. A test claims a copy no
// other session holds (a lock held by a session of its own until release),
// and finds it as the template is: every table emptied, the template's rows
// put back, its sequences or AUTO_INCREMENT counters set back to the
// template's. A copy whose schema is no longer the template's (a test altered
// it) is dropped and made anew, never served.
const (
	poolPrefix = "afm_pool_"
	poolSize   = 64 // copies per template: more than tests run at once
	// maxUnprepared is how many copies a claim passes over that it could
	// not make as the template is, before it fails.
	maxUnprepared = 3
)

// errStale is a pool copy whose schema differs from its template's.
var errStale = errors.New("its schema is not the template's")

// Claim answers a copy of template (Template's answer for key) on the server
// at serverURL, as the template is, for the caller alone until release.
func Claim(ctx context.Context, serverURL, key string, template Database) (db Database, release func(), err error) {
	c, err := config.ParseConnection(serverURL)
	if err != nil {
		return Database{}, nil, err
	}
	var unprepared []error
	for n := 0; n < poolSize; n++ {
		name := fmt.Sprintf("%s%s_%d", poolPrefix, key, n)
		release, err := tryLock(ctx, c, name)
		if err != nil {
			return Database{}, nil, fmt.Errorf("claim %s: %w", name, err)
		}
		if release == nil {
			continue // another test's
		}
		db, err := prepare(ctx, serverURL, name, template)
		if err != nil {
			// A copy another process still has a session on, as another
			// role, cannot be dropped by this one (PostgreSQL refuses to
			// end a session of a role the caller is not a member of): the
			// next copy serves, and a few such copies in a row are an error.
			release()
			if unprepared = append(unprepared, fmt.Errorf("claim %s: %w", name, err)); len(unprepared) == maxUnprepared {
				return Database{}, nil, errors.Join(unprepared...)
			}
			continue
		}
		return db, release, nil
	}
	return Database{}, nil, fmt.Errorf("claim a copy of %s: all %d copies are held", template.Name(), poolSize)
}

// prepare makes the pool's database name as the template is: reset if it is
// there, made (again) if not or if its schema went astray.
func prepare(ctx context.Context, serverURL, name string, template Database) (Database, error) {
	db, err := On(serverURL, name)
	if err != nil {
		return Database{}, err
	}
	exists, err := exists(ctx, serverURL, name)
	if err != nil {
		return Database{}, err
	}
	if exists {
		if db.Engine == config.EnginePostgres {
			err = resetPostgres(ctx, serverURL, db, template)
		} else {
			err = resetMySQL(ctx, db, template)
		}
		if err == nil {
			return db, nil
		}
		if !errors.Is(err, errStale) {
			return Database{}, fmt.Errorf("reset: %w", err)
		}
		if err := Drop(ctx, serverURL, name); err != nil {
			return Database{}, err
		}
	}
	if db.Engine == config.EnginePostgres {
		// A session on the template makes the copy fail: the seed's reader
		// is one, and it reads under the same lock.
		unlock, err := lockTemplate(ctx, serverURL, template)
		if err != nil {
			return Database{}, err
		}
		defer unlock()
	}
	return CreateFrom(ctx, serverURL, name, template)
}

// tryLock takes the server-wide lock name on a session of its own, or
// answers a nil release if another session holds it.
func tryLock(ctx context.Context, c config.Connection, name string) (release func(), err error) {
	if c.Engine == config.EnginePostgres {
		conn, err := pgx.Connect(ctx, c.DSN)
		if err != nil {
			return nil, err
		}
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", lockKey(name)).Scan(&got); err != nil || !got {
			conn.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		return func() { conn.Close(context.Background()) }, nil
	}
	pool, err := sql.Open("mysql", c.DSN)
	if err != nil {
		return nil, err
	}
	conn, err := pool.Conn(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil || got.Int64 != 1 {
		conn.Close()
		pool.Close()
		return nil, err
	}
	return func() { conn.Close(); pool.Close() }, nil
}

// lockTemplate takes the lock its build ran under: while it is held, no
// copy of the template is being made.
func lockTemplate(ctx context.Context, serverURL string, template Database) (unlock func(), err error) {
	c, err := config.ParseConnection(serverURL)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		return nil, err
	}
	key := template.Name()[len(templatePrefix):]
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey(key)); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("lock template %s: %w", template.Name(), err)
	}
	return func() { conn.Close(context.Background()) }, nil
}

func exists(ctx context.Context, serverURL, name string) (bool, error) {
	c, err := config.ParseConnection(serverURL)
	if err != nil {
		return false, err
	}
	var n int
	if c.Engine == config.EnginePostgres {
		conn, err := pgx.Connect(ctx, c.DSN)
		if err != nil {
			return false, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n)
		return n == 1, err
	}
	pool, err := sql.Open("mysql", c.DSN)
	if err != nil {
		return false, err
	}
	defer pool.Close()
	err = pool.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n)
	return n == 1, err
}

// seeds are the PostgreSQL templates' contents, read once per process.
var seeds struct {
	sync.Mutex
	byTemplate map[string]*postgresSeed
}

// postgresSeed is what a PostgreSQL template holds: the rows of its tables,
// its sequences' positions and a digest of its schema.
type postgresSeed struct {
	schema    string
	tables    []string
	columns   map[string][]string
	rows      map[string][][]any
	sequences map[string][2]any // last_value, is_called
}
