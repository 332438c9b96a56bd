package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The errors the engines return when the server is away, as the API sees them
// (wrapped), against errors that are the request's or the data's.
func TestIsUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused"}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err
			if err != nil {
				err = fmt.Errorf("record port: %w", err)
			}
			if got := store.IsUnavailable(err); got != tt.want {
				t.Errorf("IsUnavailable(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}
