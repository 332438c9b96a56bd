// Package driver is the seam between package store, which holds every rule of
// what the manager records, once, and the engines (store/postgres, store/mysql,
// store/sqlite), which hold only what differs between databases: how to open
// one, its transaction modes, its applier lock, its wake-ups and its
// migrations.
//
// Queries is the one query interface: its methods are the queries of the .sql
// files in queries/, under the same names. sqlc's overrides (sqlc.yaml) give
// the three generated packages in db/ the same argument types, so most
// generated methods already have the interface's signature; an engine writes
// a method of its own only to convert a returned row to the type below, or
// where its SQL cannot do what the others do (MariaDB's LAST_INSERT_ID).
package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TxMode is what a transaction is for; each engine maps it to its own
// isolation level and BEGIN.
type TxMode int

const (
	// ReadOnly reads one consistent state and takes no write lock (the
	// applier's snapshot: it never waits for, or holds up, a change).
	ReadOnly TxMode = iota
	// Write is a transaction that writes (secrets, switches, terms). Change
	// transactions have InChangeTx.
	Write
)

// ChangeTx is one change transaction: its queries, and the savepoint that
// lets one change of a group roll back alone.
//
// Every statement of a change runs while the group holds the revision's row
// lock, and on a server each costs a round trip: so a server engine holds
// back the statements whose outcome no one waits for (the savepoint, and the
// writes made through Later) and sends them in the same round trip as the
// next statement that returns something (a pgx batch; a MariaDB
// multi-statement query), or at Flush. A held statement's error is the error
// of the statement or Flush that sends it, and the statements after it in
// that round trip do not run. SQLite, whose statements cost no round trip,
// holds nothing back.
type ChangeTx interface {
	Queries
	// Savepoint sets the transaction's savepoint where it stands now; the
	// savepoint set before stays part of the transaction. It may be held.
	Savepoint(ctx context.Context) error
	// RollbackToSavepoint undoes what the transaction did since its last
	// Savepoint, and drops what is held (a savepoint still held means none
	// of it reached the server: nothing is sent). An error means the
	// transaction may be lost (MariaDB rolls a whole transaction back on a
	// deadlock): it must not commit.
	RollbackToSavepoint(ctx context.Context) error
	// Later is the transaction's queries, but those that return nothing but
	// an error (UpsertPort, UpsertNetwork: sqlc's :exec) are held, and
	// return nil: their error comes with the next statement sent, or Flush.
	// Only such queries may be called through it.
	Later() Queries
	// Flush sends what is held, and returns the first error of it.
	Flush(ctx context.Context) error
}

// Held is a change transaction's statements held back to be sent with the
// next one (see ChangeTx), for the engines that hold any.
type Held struct {
	stmts []HeldStatement
}

// HeldStatement is one statement held back, with its arguments.
type HeldStatement struct {
	SQL  string
	Args []any
}

const savepointSQL = "SAVEPOINT " + SavepointName

// Hold adds a statement to those held.
func (h *Held) Hold(sql string, args ...any) {
	h.stmts = append(h.stmts, HeldStatement{SQL: sql, Args: args})
}

// HoldSavepoint holds the savepoint.
func (h *Held) HoldSavepoint() { h.Hold(savepointSQL) }

// Take returns the statements held, which are no longer held: the caller
// sends them now, whatever becomes of them.
func (h *Held) Take() []HeldStatement {
	stmts := h.stmts
	h.stmts = nil
	return stmts
}

// Drop forgets what is held, for a rollback to the savepoint, and says
// whether the savepoint itself was still held: then nothing since it has
// reached the server (a send takes every statement held), and there is
// nothing to roll back.
func (h *Held) Drop() (savepointHeld bool) {
	savepointHeld = len(h.stmts) > 0 && h.stmts[0].SQL == savepointSQL
	h.stmts = nil
	return savepointHeld
}

// SavepointName is the savepoint of every change transaction: each Savepoint
// sets one of this name (PostgreSQL and SQLite nest it, MariaDB moves it),
// and a rollback goes back to the last one on every engine.
const SavepointName = "afm_change"

// Driver is one database engine.
type Driver interface {
	// Name is "postgres", "mysql" or "sqlite".
	Name() string
	// Queries runs queries outside any transaction, each on its own.
	Queries(ctx context.Context) Queries
	// InTx runs fn in one transaction of the mode: committed when fn returns
	// nil, rolled back otherwise.
	InTx(ctx context.Context, mode TxMode, fn func(q Queries) error) error
	// InChangeTx runs fn in one change transaction (isolated as a Write; its
	// first statement bumps the revision): committed when fn returns nil,
	// with what fn left held sent first (an error of it fails the commit),
	// rolled back otherwise. After it commits, the engine wakes this
	// process's waiters (Wake) if it has no notification of its own.
	InChangeTx(ctx context.Context, fn func(tx ChangeTx) error) error
	// TryLock takes the applier lock if it is free; nil Lock if another holds it.
	TryLock(ctx context.Context) (Lock, error)
	// Wake returns a channel that receives after the revision may have changed.
	// It is only a hint: callers also poll.
	Wake(ctx context.Context) <-chan struct{}
	// Migrate applies the embedded goose migrations (migrations/<engine>).
	Migrate(ctx context.Context) error
	Close() error
}

// Lock is the applier lock, held on a connection of its own.
//
// The lock's session ends on the server once idle for LockSessionIdle: its
// holder checks it far more often, so an idle session is one whose client is
// gone (a cut link), and another term must be able to take the lock.
type Lock interface {
	// Check returns an error once the lock may have been lost.
	Check(ctx context.Context) error
	Release(ctx context.Context) error
}

// StillHeld turns a lock session's answer to "does this session still hold
// the lock" (1 or 0, from the engine's own query) into Lock.Check's error.
// Any error (connection gone, server restarted) means the lock may be lost.
func StillHeld(held int64, err error) error {
	if err != nil {
		return fmt.Errorf("check applier lock: %w", err)
	}
	if held != 1 {
		return errors.New("applier lock is no longer held by this session")
	}
	return nil
}

// LockSessionIdle is how long the server keeps an idle lock session.
const LockSessionIdle = 30 * time.Second

// ErrNoRows is what every engine's queries return when a :one query finds no
// row (pgx's ErrNoRows is this error too).
var ErrNoRows = sql.ErrNoRows

// IsNoRows says whether err is a :one query that found no row.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// Convert maps rows with conv (an engine's conversion of its generated row
// type to the driver's). No rows give an empty slice, never nil: a listing
// prints as [] in JSON.
func Convert[R, T any](rows []R, conv func(R) T) []T {
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		out = append(out, conv(r))
	}
	return out
}

// InSQLTx runs fn in one database/sql transaction begun with opts: committed
// when fn returns nil, rolled back otherwise.
func InSQLTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// ErrLockNotClusterWide is TryLock's error where the advisory lock is not
// exclusive across the database (a Galera node's GET_LOCK): the HA lease alone
// elects there.
var ErrLockNotClusterWide = errors.New("the applier lock is not cluster-wide")

// HeldSavepoints are ChangeTx's savepoints for an engine that holds
// statements back (Held): the savepoint is held, to go with the change's
// next statement, and a rollback that finds it still held drops what is held
// (nothing of the change reached the server); otherwise Exec sends the
// rollback on the transaction's connection.
type HeldSavepoints struct {
	Held *Held
	Exec func(ctx context.Context, sql string) error
}

func (s HeldSavepoints) Savepoint(context.Context) error {
	s.Held.HoldSavepoint()
	return nil
}

func (s HeldSavepoints) RollbackToSavepoint(ctx context.Context) error {
	if s.Held.Drop() {
		return nil
	}
	return s.Exec(ctx, "ROLLBACK TO SAVEPOINT "+SavepointName)
}

// SQLSavepoints are ChangeTx's savepoints on a database/sql transaction.
type SQLSavepoints struct{ Tx *sql.Tx }

func (s SQLSavepoints) Savepoint(ctx context.Context) error {
	_, err := s.Tx.ExecContext(ctx, savepointSQL)
	return err
}

func (s SQLSavepoints) RollbackToSavepoint(ctx context.Context) error {
	_, err := s.Tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+SavepointName)
	return err
}

// Flush has nothing to send: SQLSavepoints holds nothing back.
func (SQLSavepoints) Flush(context.Context) error { return nil }
