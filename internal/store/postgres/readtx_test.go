package postgres

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	pgdb "github.com/alternative-fabric-manager/alternative-fabric-manager/db/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// countingConn counts what its client sends: each write is what pgx
// flushed at once, a round trip when it waits for the answer.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// A read-only transaction sends its BEGIN with its first query: two queries
// cost three round trips (the first with the BEGIN, the second, the COMMIT),
// not four. A transaction that ran no query sends nothing.
func TestReadTxBeginsWithItsFirstQuery(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_readtx_")
	e := countingEngine(t, db.DSN)
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
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
	if err := read(2); err != nil { // connects and prepares the query
		t.Fatal(err)
	}
	for _, tc := range []struct{ queries, want int64 }{{2, 3}, {1, 2}, {0, 0}} {
		e.writes.Store(0)
		if err := read(int(tc.queries)); err != nil {
			t.Fatal(err)
		}
		if n := e.writes.Load(); n != tc.want {
			t.Errorf("a read-only transaction of %d queries sent %d times, want %d", tc.queries, n, tc.want)
		}
	}
}

// countedEngine is an Engine whose one connection counts its writes.
type countedEngine struct {
	*Engine
	writes *atomic.Int64
}

func countingEngine(t *testing.T, dsn string) countedEngine {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	writes := &atomic.Int64{}
	cfg.MaxConns = 1
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: writes}, nil
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return countedEngine{Engine: &Engine{dsn: dsn, pool: pool, q: pgdb.New(pool), log: slog.New(slog.DiscardHandler)},
		writes: writes}
}
