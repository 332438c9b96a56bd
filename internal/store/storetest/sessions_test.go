package storetest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/mysql"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/postgres"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// The server ends every session of the manager's pool (as a restart or a
// failover does: PostgreSQL sends each a FATAL message, then closes it) and
// is back at once. No request may fail on one of those sessions: each would
// be a 503 to networking-mlnx, a change refused though the server is up.
// PostgreSQL: the pool's check (internal/store/postgres/liveness.go);
// MariaDB: the driver's checkConnLiveness. Each fails this without it.
func TestSessionsTheServerEndedCostNoRequest(t *testing.T) {
	onServerEngines(t, func(t *testing.T, engine string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		db := NewDatabase(t, engine)
		e := openDriver(t, ctx, engine, db.DSN)
		if err := e.Migrate(ctx); err != nil {
			t.Fatal(err)
		}

		// Four sessions at once (PostgreSQL's smallest pool), all idle after.
		const sessions = 4
		var inside sync.WaitGroup
		inside.Add(sessions)
		errs := make(chan error, sessions)
		for range sessions {
			go func() {
				errs <- e.InTx(ctx, driver.ReadOnly, func(q driver.Queries) error {
					inside.Done()
					inside.Wait()
					_, err := q.Revision(ctx, "default")
					return err
				})
			}()
		}
		for range sessions {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}

		admin := testdb.ServerURL(t, map[string]string{config.EnginePostgres: "AFM_TEST_POSTGRES_URL",
			config.EngineMySQL: "AFM_TEST_MYSQL_URL"}[engine])
		if n := EndSessions(t, engine, admin, db.Name()); n < sessions {
			t.Fatalf("the server ended %d sessions, want at least the %d used at once", n, sessions)
		}
		for i := range sessions + 1 {
			if _, err := e.Queries(ctx).Revision(ctx, "default"); err != nil {
				t.Errorf("request %d after the server ended the pool's sessions: %v", i+1, err)
			}
		}
		if err := e.InChangeTx(ctx, func(driver.ChangeTx) error { return nil }); err != nil {
			t.Errorf("a change after the server ended the pool's sessions: %v", err)
		}
	})
}

func openDriver(t *testing.T, ctx context.Context, engine, dsn string) driver.Driver {
	t.Helper()
	var e driver.Driver
	var err error
	log := slog.New(slog.DiscardHandler)
	if engine == config.EnginePostgres {
		e, err = postgres.Open(ctx, dsn, log)
	} else {
		e, err = mysql.Open(ctx, dsn, log)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
