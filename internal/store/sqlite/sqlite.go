// Package sqlite is the embedded single-node engine of the store, on
// modernc.org/sqlite (no cgo).
//
// One manager process owns the database: the applier lock is an OS file lock
// beside it, and wake-ups are signalled in process after each committed change.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/pressly/goose/v3"

	sqlitedb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/sqlite"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"

	// The driver registers itself as "sqlite".
	_ "modernc.org/sqlite"
)

// Engine is the SQLite driver.Driver, on one database file.
type Engine struct {
	path string
	db   *sql.DB
	q    *sqlitedb.Queries
	log  *slog.Logger

	driver.LocalWake // Wake fires after every change this process commits

	// prepared are the queries prepared once (the driver would parse each
	// statement at every use): nil until the first change or job read after
	// the schema exists. See queries.
	prepareMu sync.Mutex
	tried     bool
	prepared  atomic.Pointer[sqlitedb.Queries]
}

// Open opens (creating if needed) the database file at path.
func Open(ctx context.Context, path string, log *slog.Logger) (*Engine, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("sqlite: database path %q is not absolute", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// WAL lets job polls read while a change commits; BEGIN IMMEDIATE makes
	// writers queue on busy_timeout instead of failing on a lock upgrade.
	// temp_store = MEMORY keeps the sub-journal in memory: a group of changes
	// nests a savepoint per change, and each page a change first writes is
	// copied there, otherwise into a temporary file past 64 KiB (a write(2)
	// a page, under the write lock). It only serves a rollback to a
	// savepoint; a crash is recovered from the WAL.
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(FULL)", "temp_store(MEMORY)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// Every connection is kept: the database/sql default of two idle ones would
	// close and reopen connections (re-running the pragmas and re-reading the
	// schema) whenever more than two requests overlap.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return &Engine{path: path, db: db, q: sqlitedb.New(db), log: log}, nil
}

func (e *Engine) Name() string { return "sqlite" }

func (e *Engine) Close() error {
	if q := e.prepared.Load(); q != nil {
		q.Close()
	}
	return e.db.Close()
}

// queries returns the prepared queries, preparing them at the first call, or
// the first after a migration: a statement can be prepared only once the
// tables it names exist. Until that succeeds it returns the unprepared ones,
// which do the same work, parsing each statement at every use. Call it
// outside a transaction: preparing takes a connection of the pool.
func (e *Engine) queries(ctx context.Context) *sqlitedb.Queries {
	if q := e.prepared.Load(); q != nil {
		return q
	}
	e.prepareMu.Lock()
	defer e.prepareMu.Unlock()
	if q := e.prepared.Load(); q != nil {
		return q
	}
	if e.tried {
		return e.q
	}
	e.tried = true
	q, err := sqlitedb.Prepare(ctx, e.db)
	if err != nil {
		e.log.Debug("sqlite: statements left unprepared", "error", err)
		return e.q
	}
	e.prepared.Store(q)
	return q
}

func (e *Engine) migrations() driver.Migrations {
	return driver.Migrations{Engine: "sqlite", Dialect: goose.DialectSQLite3, DB: e.db}
}

func (e *Engine) Migrate(ctx context.Context) error {
	if err := e.migrations().Up(ctx); err != nil {
		return err
	}
	// The schema may only now hold every table: let queries prepare again.
	e.prepareMu.Lock()
	e.tried = false
	e.prepareMu.Unlock()
	return nil
}

func (e *Engine) Schema(ctx context.Context) (driver.SchemaVersions, error) {
	return e.migrations().Schema(ctx)
}

// InTx runs fn in one transaction. A write begins IMMEDIATE (the DSN's
// _txlock): writers queue on busy_timeout instead of failing on a lock
// upgrade. The snapshot is a plain (deferred) BEGIN: in WAL mode it reads one
// consistent state without taking the write lock, so a change commits while
// the applier reads.
func (e *Engine) InTx(ctx context.Context, mode driver.TxMode, fn func(q driver.Queries) error) error {
	q := e.queries(ctx)
	opts := &sql.TxOptions{ReadOnly: mode == driver.ReadOnly}
	return driver.InSQLTx(ctx, e.db, opts, func(tx *sql.Tx) error { return fn(queries{q.WithTx(tx)}) })
}

// InChangeTx runs fn in one IMMEDIATE transaction, as a Write, and wakes this
// process's waiters after it commits (with the revision fn set, if any:
// driver.WithCommitted).
func (e *Engine) InChangeTx(ctx context.Context, fn func(tx driver.ChangeTx) error) error {
	q := e.queries(ctx)
	err := driver.InSQLTx(ctx, e.db, &sql.TxOptions{}, func(tx *sql.Tx) error {
		// A SQLite statement costs no round trip, so none is held back.
		return fn(driver.PlainChangeTx{Queries: queries{q.WithTx(tx)}, SQLSavepoints: driver.SQLSavepoints{Tx: tx}})
	})
	if err == nil {
		e.NotifyCommitted(driver.CommittedOf(ctx))
	}
	return err
}

// Queries are the prepared queries (see Engine.queries); outside a
// transaction, each runs on its own.
func (e *Engine) Queries(ctx context.Context) driver.Queries { return queries{e.queries(ctx)} }

//go:generate go run ../driver/adaptergen -interfaces driver.Queries

// queries are the generated ones, with their rows converted to the driver's
// types by adaptergen (adapters_gen.go). SQLite's queries need nothing else:
// it has no lease (driver.LeaseQueries), one manager owns the database.
type queries struct{ *sqlitedb.Queries }

// InsertJobWithPlaces is InsertJob with the places in its row
// (queries/sqlite), whose job adaptergen does not spread into its
// arguments beside them.
func (q queries) InsertJobWithPlaces(ctx context.Context, j driver.Job, places []driver.Place) (int64, error) {
	return q.Queries.InsertJobWithPlaces(ctx, j.Fabric, j.Revision, j.ObjectType, j.ObjectID, j.NetworkID, j.Operation, j.Status,
		j.Description, j.Result, j.Error, j.CreatedBy, j.Request, j.RequestID, j.CreatedAt, j.UpdatedAt, j.StartedAt, j.FinishedAt,
		driver.PlacesJSON(places))
}

// TryLock takes an exclusive flock on "<database>.lock" (the default
// fabric's) or "<database>.<fabric>.lock". The kernel drops it when the
// process dies, so a crashed manager never leaves it behind.
func (e *Engine) TryLock(ctx context.Context, fabric string) (driver.Lock, error) {
	name := e.path + ".lock"
	if fabric != driver.DefaultFabric {
		name = e.path + "." + fabric + ".lock"
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("applier lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("applier lock %s: %w", f.Name(), err)
	}
	return &fileLock{f: f}, nil
}

type fileLock struct{ f *os.File }

// Check: a flock held through an open descriptor cannot be taken away.
func (l *fileLock) Check(context.Context) error { return nil }

func (l *fileLock) Release(context.Context) error { return l.f.Close() }

var _ driver.Driver = (*Engine)(nil)

// DropLegacyKeys drops migration 00013's unique indexes on the keys of before
// fabrics (driver.LegacyKeyIndexes), once the database serves several.
func (e *Engine) DropLegacyKeys(ctx context.Context) error {
	for _, name := range driver.LegacyKeyIndexes {
		if _, err := e.db.ExecContext(ctx, "DROP INDEX IF EXISTS "+name); err != nil {
			return fmt.Errorf("drop index %s: %w", name, err)
		}
	}
	return nil
}
