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
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}
