package postgres_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The server ends every session of the manager's pool (as a restart or a
// failover does: a FATAL message to each, then the close), and comes back at
// once. No request may fail on one of those sessions: each would be a 503
// to networking-mlnx, and a POST refused, though the server is up.
func TestSessionsTheServerEndedCostNoRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := storetest.NewDatabase(t, config.EnginePostgres)
	e, err := postgres.Open(ctx, db.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	// Four sessions at once (the pool's smallest size), all idle after.
	const sessions = 4
	var inside sync.WaitGroup
	inside.Add(sessions)
	errs := make(chan error, sessions)
	for range sessions {
		go func() {
			errs <- e.InTx(ctx, driver.ReadOnly, func(q driver.Queries) error {
				inside.Done()
				inside.Wait()
				_, err := q.CountNetworks(ctx)
				return err
			})
		}()
	}
	for range sessions {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	if n := terminateSessions(t, ctx, db.DSN); n != sessions {
		t.Fatalf("the server ended %d sessions, want the pool's %d", n, sessions)
	}
	for i := range sessions + 1 {
		if _, err := e.Queries(ctx).CountNetworks(ctx); err != nil {
			t.Errorf("request %d after the server ended the pool's sessions: %v", i+1, err)
		}
	}
	err = e.InChangeTx(ctx, func(tx driver.ChangeTx) error { return nil })
	if err != nil {
		t.Errorf("a change after the server ended the pool's sessions: %v", err)
	}
}

// terminateSessions ends every other session of dsn's database and waits
// until each has exited (its FATAL message sent), as a restart would.
func terminateSessions(t *testing.T, ctx context.Context, dsn string) int {
	t.Helper()
	admin, err := pgx.Connect(ctx, os.Getenv("AFM_TEST_POSTGRES_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := dsn[strings.LastIndexByte(dsn, '/')+1:]
	if i := strings.IndexByte(name, '?'); i >= 0 {
		name = name[:i]
	}
	// The pids first: in one WHERE, PostgreSQL may call pg_terminate_backend
	// before the other conditions, on a session of another user.
	rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = $1 AND usename = current_user AND pid <> pg_backend_pid()`, name)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, pid := range pids {
		var ended bool
		if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", pid).Scan(&ended); err != nil {
			t.Fatal(err)
		}
		if ended {
			n++
		}
	}
	return n
}
