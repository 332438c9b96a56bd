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
	// Write is a transaction that writes (secrets, switches, terms).
	Write
	// Change is a change transaction (its first statement bumps the
	// revision); after it commits, the engine wakes this process's waiters
	// (Wake) if it has no notification of its own.
	Change
)

// Driver is one database engine.
type Driver interface {
	// Name is "postgres", "mysql" or "sqlite".
	Name() string
	// Queries runs queries outside any transaction, each on its own.
	Queries(ctx context.Context) Queries
	// InTx runs fn in one transaction of the mode: committed when fn returns
	// nil, rolled back otherwise.
	InTx(ctx context.Context, mode TxMode, fn func(q Queries) error) error
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
