package mysql_test

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The server ends every session of the manager's pool (as a restart or a
// failover does), and is back at once. No request may fail on one of those
// sessions: each would be a 503 to networking-mlnx, though the server is up.
// The driver looks at a pooled connection before writing on it
// (checkConnLiveness, on unless the DSN turns it off) and database/sql
// takes another; this holds that through the engine's own settings.
func TestSessionsTheServerEndedCostNoRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := storetest.NewDatabase(t, config.EngineMySQL)
	e, err := mysql.Open(ctx, db.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

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

	if n := killSessions(t, ctx, db.DSN); n < sessions {
		t.Fatalf("the server ended %d sessions, want at least the %d used at once", n, sessions)
	}
	for i := range sessions + 1 {
		if _, err := e.Queries(ctx).CountNetworks(ctx); err != nil {
			t.Errorf("request %d after the server ended the pool's sessions: %v", i+1, err)
		}
	}
	if err := e.InChangeTx(ctx, func(tx driver.ChangeTx) error { return nil }); err != nil {
		t.Errorf("a change after the server ended the pool's sessions: %v", err)
	}
}

// killSessions ends every other session of dsn's database (KILL CONNECTION,
// which the manager's own user may do to its own sessions) and waits until
// the server no longer lists them.
func killSessions(t *testing.T, ctx context.Context, dsn string) int {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.DBName
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	listed := func() []int64 {
		rows, err := conn.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST
			WHERE DB = ? AND ID <> CONNECTION_ID()`, name)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	ids := listed()
	for _, id := range ids {
		if _, err := conn.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
			t.Fatal(err)
		}
	}
	for len(listed()) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	return len(ids)
}
