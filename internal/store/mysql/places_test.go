package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// A job's places go in its own row: one INSERT, whose insert id is the
// job's, in the round trip InsertJob alone would take on a pipelined change
// transaction (no SELECT, whose result set a change would read while it
// holds job_ids' lock, and no second insert of places under that lock),
// whatever their count, pipelined or sent each on its own (a DSN without
// multiStatements, or Galera). Either way the id is the job's, and its
// places are the ones given.
func TestJobIDComesBackWithItsPlaces(t *testing.T) {
	for _, dsnParams := range []string{"", "multiStatements=false"} {
		e := openMigrated(t, dsnParams)
		for _, n := range []int{1, 3, 200} {
			t.Run(fmt.Sprintf("pipelined=%v/places=%d", e.pipelined, n), func(t *testing.T) {
				checkJobWithPlaces(t, e, n)
			})
		}
	}
}

// checkJobWithPlaces inserts a job with n places in a change transaction of
// e, and checks its id, its places, and that no SELECT was run for them.
func checkJobWithPlaces(t *testing.T, e *Engine, n int) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	job := driver.Job{Fabric: driver.DefaultFabric, Revision: 1, ObjectType: "port", ObjectID: fmt.Sprintf("p%d", n),
		NetworkID: "n1", Operation: "create", Status: "Pending", CreatedAt: now, UpdatedAt: now}
	var places []driver.Place
	for i := range n {
		places = append(places, driver.Place{GUID: fabric.GUID(0x0002c90300000000 + uint64(i)), PKey: 0x8001,
			Want: []string{"full", "limited", "absent"}[i%3]})
	}
	var id int64
	var before, after map[string]int64
	var got []driver.Place
	err := e.InChangeTx(ctx, func(c driver.ChangeTx) error {
		tx := changeSQLTx(c)
		var err error
		if before, err = sessionStatus(ctx, tx); err != nil {
			return err
		}
		if err := c.Later().LockJobIDs(ctx); err != nil {
			return err
		}
		if id, err = c.InsertJobWithPlaces(ctx, job, places); err != nil {
			return err
		}
		if after, err = sessionStatus(ctx, tx); err != nil {
			return err
		}
		got, err = placesOfJob(ctx, tx, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if selects := after["Com_select"] - before["Com_select"]; e.pipelined && selects != 0 {
		t.Errorf("the job's insert with its places ran %d SELECT statements, want none", selects)
	}
	if inserts := after["Com_insert"] - before["Com_insert"]; inserts != 1 {
		t.Errorf("the job's insert with %d places ran %d INSERT statements, want one (the job's row)", n, inserts)
	}
	if !slices.Equal(got, places) {
		t.Errorf("job %d's places:\n got %v\nwant %v", id, got, places)
	}
	if j, err := e.Queries(ctx).GetJob(ctx, id); err != nil || j.ObjectID != job.ObjectID {
		t.Errorf("job %d: %+v, %v; want the job inserted", id, j, err)
	}
}

// openMigrated opens a fresh, migrated database, its DSN given dsnParams.
func openMigrated(t *testing.T, dsnParams string) *Engine {
	t.Helper()
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_MYSQL_URL", "afm_places_")
	dsn := db.DSN
	if dsnParams != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + dsnParams
	}
	e, err := Open(ctx, dsn, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// inTx reads inside a transaction: a database/sql one, or the connection a
// pipelined change transaction began its own on.
type inTx interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// changeSQLTx is the transaction under a change transaction of this engine.
func changeSQLTx(c driver.ChangeTx) inTx {
	if h, ok := c.(driver.HeldChangeTx); ok {
		return h.Pipeline.(*pipeline).tx
	}
	return c.(driver.PlainChangeTx).Tx
}

// placesOfJob are job id's places, as its row holds them.
func placesOfJob(ctx context.Context, tx inTx, id int64) ([]driver.Place, error) {
	var places string
	if err := tx.QueryRowContext(ctx, "SELECT places FROM jobs WHERE id = ?", id).Scan(&places); err != nil {
		return nil, err
	}
	return driver.ParsePlacesJSON(places)
}

// sessionStatus is the session's count of SELECT and INSERT statements so
// far.
func sessionStatus(ctx context.Context, tx inTx) (map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, "SHOW SESSION STATUS WHERE Variable_name IN ('Com_select', 'Com_insert')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	status := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		status[name] = n
	}
	return status, rows.Err()
}
