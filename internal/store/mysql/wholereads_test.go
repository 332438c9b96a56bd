package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	mysqldb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// A query of a transaction that Galera aborts for another node's write while
// the row is being sent answers with the server's error 1213, which the store
// takes for a conflict and runs the change again. Read row by row, the NULL
// of the cut-off subquery failed sqlc's Scan first: the change was answered
// 500 (TestGaleraConcurrentChangesThroughTwoManagers, about one run in 300
// under load on the test cluster).
func TestCutOffQueriesAnswerWithTheServersError(t *testing.T) {
	guid, err := fabric.ParseGUID("0x0002c90300000001")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// row is what the fake node sends before the 1213: the cut-off
		// subqueries' columns NULL.
		row   []sqldriver.Value
		query func(ctx context.Context, q queries) error
	}{{
		name: "a port change's reads, cut off in its count of adopted partitions",
		row: []sqldriver.Value{[]byte("net-1"), []byte("n"), []byte("vlan"), []byte("ib"), []byte("101"), []byte("1"), []byte("7"),
			nil, nil, nil, nil, []byte("default"), nil, nil, nil, nil, nil},
		query: func(ctx context.Context, q queries) error {
			_, err := q.GetPortChangeRows(ctx, "default", "port-1", &guid, "net-1")
			return err
		},
	}, {
		name: "the gates' switches, cut off in the count of enforcement errors",
		row:  []sqldriver.Value{[]byte("0x0002c90300000100"), []byte("sw"), confirmed, nil},
		query: func(ctx context.Context, q queries) error {
			_, err := q.GateSwitches(ctx, "default")
			return err
		},
	}, {
		name: "a row read alone, cut off in its one column",
		row:  []sqldriver.Value{nil},
		query: func(ctx context.Context, q queries) error {
			_, err := q.Revision(ctx, "default")
			return err
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := sql.OpenDB(cutOffConnector{row: tt.row})
			t.Cleanup(func() { db.Close() })
			err := tt.query(t.Context(), newQueries(wholeReads{db}))
			if !store.IsConflict(err) {
				t.Fatalf("got %v; want the server's 1213, a conflict", err)
			}
			// Row by row, as sqlc reads: what the fix is for.
			if err := tt.query(t.Context(), newQueries(db)); store.IsConflict(err) ||
				!strings.Contains(fmt.Sprint(err), "converting NULL") {
				t.Fatalf("read row by row: got %v; the fake no longer sends what a cut-off query does", err)
			}
		})
	}
}

// A query the server answers in full is answered as sqlc reads it itself:
// every row, then the end of the set.
func TestWholeReadsAnswerEveryRow(t *testing.T) {
	db := sql.OpenDB(cutOffConnector{row: []sqldriver.Value{[]byte("0x0002c90300000100"), []byte("sw"),
		confirmed, []byte("3")}, rows: 2, complete: true})
	t.Cleanup(func() { db.Close() })
	got, err := newQueries(wholeReads{db}).GateSwitches(t.Context(), "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Guid.String() != "0x0002c90300000100" || got[1].EnforcementErrors != 3 {
		t.Fatalf("got %+v; want the two rows sent", got)
	}
}

// confirmed is a switch's confirmation time as go-sql-driver gives a
// DATETIME with parseTime.
var confirmed = time.Date(2026, 12, 7, 20, 24, 15, 828000000, time.UTC)

// cutOffConnector is a fake of a Galera node answering a query whose
// transaction another node's write aborted while the row was being sent, as
// the test cluster answered GetPortChangeRows (go-sql-driver gave the row,
// then the error from the next read): rows times row, then error 1213 where
// the end of the result set was due, or the end when complete. Any query is
// answered so; it has no transactions and runs no statement.
type cutOffConnector struct {
	row      []sqldriver.Value
	rows     int // the rows sent; 0: one
	complete bool
}

func (c cutOffConnector) Connect(context.Context) (sqldriver.Conn, error) { return cutOffConn(c), nil }
func (c cutOffConnector) Driver() sqldriver.Driver                        { return cutOffDriver(c) }

type cutOffDriver cutOffConnector

func (d cutOffDriver) Open(string) (sqldriver.Conn, error) { return cutOffConn(d), nil }

type cutOffConn cutOffConnector

func (cutOffConn) Prepare(string) (sqldriver.Stmt, error) {
	return nil, errors.New("the fake prepares nothing")
}
func (cutOffConn) Close() error { return nil }
func (cutOffConn) Begin() (sqldriver.Tx, error) {
	return nil, errors.New("the fake has no transactions")
}

func (c cutOffConn) QueryContext(context.Context, string, []sqldriver.NamedValue) (sqldriver.Rows, error) {
	return &cutOffRows{c: cutOffConnector(c), left: max(c.rows, 1)}, nil
}

type cutOffRows struct {
	c    cutOffConnector
	left int
}

func (r *cutOffRows) Columns() []string {
	cols := make([]string, len(r.c.row))
	for i := range cols {
		cols[i] = "c" + string(rune('a'+i))
	}
	return cols
}

func (r *cutOffRows) Close() error { return nil }

func (r *cutOffRows) Next(dest []sqldriver.Value) error {
	if r.left == 0 {
		if r.c.complete {
			return io.EOF
		}
		return &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'},
			Message: "Deadlock found when trying to get lock; try restarting transaction"}
	}
	r.left--
	copy(dest, r.c.row)
	return nil
}

var _ mysqldb.DBTX = wholeReads{}
