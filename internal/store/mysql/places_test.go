package mysql

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// A job's places go with its insert, and its id comes back with them, in the
// round trip InsertJob alone would take on a pipelined change transaction:
// no SELECT, whose result set a change would read while it holds job_ids'
// lock. The id is the job's: its places name it.
func TestJobIDComesBackWithItsPlaces(t *testing.T) {
	ctx := context.Background()
	server := testdb.ServerURL(t, "AFM_TEST_MYSQL_URL")
	name, err := testdb.RandomName("afm_places_")
	if err != nil {
		t.Fatal(err)
	}
	db, err := testdb.Create(ctx, server, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testdb.Drop(context.Background(), server, name) })
	e, err := Open(ctx, db.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.pipelined {
		t.Fatal("the test server's change transactions are not pipelined")
	}
	now := time.Now().UTC().Truncate(time.Second)
	job := driver.Job{Fabric: driver.DefaultFabric, Revision: 1, ObjectType: "port", ObjectID: "p1", NetworkID: "n1",
		Operation: "create", Status: "Pending", CreatedAt: now, UpdatedAt: now}
	places := `[{"guid":"0x0002c90300000001","pkey":32769,"want":"full"},{"guid":"0x0002c90300000002","pkey":32769,"want":"absent"}]`
	var id, selects int64
	var named []int64
	err = e.InChangeTx(ctx, func(c driver.ChangeTx) error {
		tx := c.(driver.HeldChangeTx).Pipeline.(*pipeline).tx
		before, err := comSelect(ctx, tx)
		if err != nil {
			return err
		}
		if err := c.Later().LockJobIDs(ctx); err != nil {
			return err
		}
		if id, err = c.InsertJobWithPlaces(ctx, job, places); err != nil {
			return err
		}
		after, err := comSelect(ctx, tx)
		if err != nil {
			return err
		}
		selects = after - before
		rows, err := tx.QueryContext(ctx, "SELECT job_id FROM job_places ORDER BY guid")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var jobID int64
			if err := rows.Scan(&jobID); err != nil {
				return err
			}
			named = append(named, jobID)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if selects != 0 {
		t.Errorf("the job's insert with its places ran %d SELECT statements, want none", selects)
	}
	if len(named) != 2 || named[0] != id || named[1] != id {
		t.Errorf("InsertJobWithPlaces gave id %d; the places name jobs %v", id, named)
	}
	got, err := e.Queries(ctx).GetJob(ctx, id)
	if err != nil || got.ObjectID != "p1" {
		t.Errorf("job %d: %+v, %v; want the job inserted", id, got, err)
	}
}

// comSelect is the session's count of SELECT statements so far.
func comSelect(ctx context.Context, tx *sql.Tx) (int64, error) {
	var name string
	var n int64
	err := tx.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_select'").Scan(&name, &n)
	return n, err
}
