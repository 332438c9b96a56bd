package mysql

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// counted counts what the connections dialled through "afm-counted" send:
// each write is one command, a round trip.
var counted atomic.Int64

type countingConn struct{ net.Conn }

func (c countingConn) Write(b []byte) (int, error) {
	counted.Add(1)
	return c.Conn.Write(b)
}

func init() {
	mysql.RegisterDialContext("afm-counted", func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c}, nil
	})
}

// A read-only transaction on a pipelined connection sends its beginning (the
// isolation level, START TRANSACTION READ ONLY) with its first query: two
// queries cost three round trips (the first with the beginning, the second,
// the COMMIT), not five. A transaction that ran no query sends nothing.
func TestReadTxBeginsWithItsFirstQuery(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_MYSQL_URL", "afm_readtx_")
	e, err := Open(ctx, strings.Replace(db.DSN, "@tcp(", "@afm-counted(", 1), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.pipelined {
		t.Fatal("the engine is not pipelined on the test server")
	}
	e.db.SetMaxOpenConns(1)
	read := func(queries int) error {
		return e.InTx(ctx, driver.ReadOnly, func(q driver.Queries) error {
			for range queries {
				if _, err := q.NewestJobID(ctx, driver.DefaultFabric); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := read(2); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ queries, want int64 }{{2, 3}, {1, 2}, {0, 0}} {
		counted.Store(0)
		if err := read(int(tc.queries)); err != nil {
			t.Fatal(err)
		}
		if n := counted.Load(); n != tc.want {
			t.Errorf("a read-only transaction of %d queries sent %d commands, want %d", tc.queries, n, tc.want)
		}
	}
}
