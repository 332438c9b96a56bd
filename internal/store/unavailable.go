package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// IsUnavailable says whether err means the database could not be reached or
// answer in time (refused, reset or black-holed connection, a session the
// server killed, a server shutting down or starting up), as opposed to a
// request the database refused. The first is worth retrying later, unchanged;
// the API answers it 503 and the applier waits for the database to come back.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: the server is shutting
		// down, crashed or starting (pg_terminate_backend sends 57P01).
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.Timeout(err) {
		return true
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1053, // ER_SERVER_SHUTDOWN
			1077, // ER_NORMAL_SHUTDOWN
			1079, // ER_SHUTDOWN_COMPLETE
			1152, // ER_ABORTING_CONNECTION
			1317, // ER_QUERY_INTERRUPTED (KILL)
			1927, // ER_CONNECTION_KILLED
			2006, // CR_SERVER_GONE_ERROR
			2013: // CR_SERVER_LOST
			return true
		case 1205: // ER_LOCK_WAIT_TIMEOUT
			// The database did not answer in time: another transaction
			// held the rows past innodb_lock_wait_timeout (on Galera, a
			// large change through another node). The change's writes are
			// rolled back (its savepoint, or its transaction); sent again
			// later, it runs.
			return true
		case 1047: // ER_UNKNOWN_COM_ERROR
			// Galera answers it while a node is not (yet) a synced member
			// of the cluster: "WSREP has not yet prepared node for
			// application use". The node takes requests again once it has
			// rejoined, as a server that restarted does.
			return strings.Contains(myErr.Message, "WSREP")
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// IsConflict says whether err means the database ended the transaction to
// resolve a conflict with another one, and kept nothing of it: it is sure to
// be rolled back, so running the whole transaction again from its start
// applies it once. Those are
//   - MariaDB's 1213 (ER_LOCK_DEADLOCK): an InnoDB deadlock's victim, and on
//     Galera a transaction that lost certification to another node's
//     conflicting commit (same rows: every change writes the revision's), at
//     its COMMIT or, aborted by a replicated write, at any statement;
//   - PostgreSQL's 40001 (serialization_failure) and 40P01
//     (deadlock_detected);
//   - SQLite's SQLITE_BUSY (and its extended codes): another process held
//     the write lock past busy_timeout, so the transaction could not begin
//     (BEGIN IMMEDIATE) and wrote nothing.
//
// A lost connection is never a conflict, even mid-COMMIT: the COMMIT may
// have been applied with only its answer lost, so the change is not run
// again (IsUnavailable: the client is answered 503 and sends it again, and
// POST/PUT are upserts and a repeated DELETE answers 404). MariaDB's 1205
// (lock wait timeout) is no conflict either: it ends a statement, not the
// transaction, and comes after innodb_lock_wait_timeout, past every
// request's deadline.
func IsConflict(err error) bool {
	if err == nil {
		return false
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == 1213
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		return liteErr.Code()&0xff == sqlite3.SQLITE_BUSY
	}
	return false
}
