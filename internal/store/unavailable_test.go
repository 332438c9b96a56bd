package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The errors the engines return when the server is away, as the API sees them
// (wrapped), against errors that are the request's or the data's.
func TestIsUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused"}}
	tests := []errorCase{
		{"our deadline", context.DeadlineExceeded, true},
		{"dial refused", refused, true},
		{"ECONNREFUSED", syscall.ECONNREFUSED, true},
		{"reset", syscall.ECONNRESET, true},
		{"EOF mid-query", io.ErrUnexpectedEOF, true},
		{"bad connection", driver.ErrBadConn, true},
		{"connection done", sql.ErrConnDone, true},
		{"mysql invalid connection", mysql.ErrInvalidConn, true},
		{"pgx conn closed", pgconn.ErrConnClosed, true},
		{"pg_terminate_backend", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"pg starting up", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{"pg connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"mysql server shutdown", &mysql.MySQLError{Number: 1053}, true},
		{"mysql connection killed", &mysql.MySQLError{Number: 1927}, true},
		{"mysql gone away", &mysql.MySQLError{Number: 2006}, true},
		{"galera node not synced", &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, true},
		{"mysql unknown command", &mysql.MySQLError{Number: 1047, Message: "Unknown command"}, false},
		{"mysql lock wait timeout", &mysql.MySQLError{Number: 1205}, true},
		{"nil", nil, false},
		{"no rows", sql.ErrNoRows, false},
		{"not found", store.ErrNotFound, false},
		{"rejected", &store.RejectedError{Reason: "VLAN taken"}, false},
		{"client gone", context.Canceled, false},
		{"pg unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"pg serialization failure", &pgconn.PgError{Code: "40001"}, false},
		{"mysql duplicate key", &mysql.MySQLError{Number: 1062}, false},
		{"mysql deadlock", &mysql.MySQLError{Number: 1213}, false},
		{"other", errors.New("template failed"), false},
	}
	checkErrors(t, "IsUnavailable", store.IsUnavailable, tests)
}

// The errors with which each engine ends a transaction to resolve a conflict
// (nothing of it kept: it is run again), against those after which the
// transaction may have committed or was refused for what it holds.
func TestIsConflict(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused"}}
	tests := []errorCase{
		{"mysql deadlock or Galera certification failure", &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'}}, true},
		{"pg serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"pg deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"sqlite busy", sqliteBusy(t), true},
		{"a conflict given up on", &store.ConflictError{Attempts: 8, Err: &mysql.MySQLError{Number: 1213}}, true},
		// The statement ended, not the transaction.
		{"mysql lock wait timeout", &mysql.MySQLError{Number: 1205}, false},
		{"mysql duplicate key", &mysql.MySQLError{Number: 1062}, false},
		{"mysql data too long", &mysql.MySQLError{Number: 1406}, false},
		{"pg unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"pg other transaction rollback", &pgconn.PgError{Code: "40003"}, false},
		// The COMMIT may have been applied, its answer lost: never again.
		{"connection lost mid-commit", io.ErrUnexpectedEOF, false},
		{"mysql invalid connection", mysql.ErrInvalidConn, false},
		{"bad connection", driver.ErrBadConn, false},
		{"mysql server lost", &mysql.MySQLError{Number: 2013}, false},
		{"pg terminated", &pgconn.PgError{Code: "57P01"}, false},
		{"dial refused", refused, false},
		{"our deadline", context.DeadlineExceeded, false},
		{"rejected", &store.RejectedError{Reason: "VLAN taken"}, false},
		{"nil", nil, false},
	}
	checkErrors(t, "IsConflict", store.IsConflict, tests)
}

// errorCase is an error, as an engine returns it, and what a predicate of
// the store should say of it.
type errorCase struct {
	name string
	err  error
	want bool
}

// checkErrors asserts that is, the predicate called name, gives each case's
// want for its error wrapped as the store wraps it.
func checkErrors(t *testing.T, name string, is func(error) bool, tests []errorCase) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err
			if err != nil {
				err = fmt.Errorf("record port: %w", err)
			}
			if got := is(err); got != tt.want {
				t.Errorf("%s(%v) = %v, want %v", name, err, got, tt.want)
			}
		})
	}
}

// sqliteBusy is the error SQLite gives a writer while another connection
// holds the write lock (no busy_timeout: at once), as the engine's BEGIN
// IMMEDIATE gets it once busy_timeout has passed.
func sqliteBusy(t *testing.T) error {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "busy.db") + "?_pragma=journal_mode(WAL)&_txlock=immediate"
	holder, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	other, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx2, err := other.Begin()
	if err == nil {
		tx2.Rollback() //nolint:errcheck
		t.Fatal("a second writer began while the first held the write lock")
	}
	return err
}
