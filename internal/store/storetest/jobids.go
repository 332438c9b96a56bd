package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// testJobIDsAfterRestore: the database is restored to a backup taken before
// some jobs were given out (their ids are lost with their rows, and the jobs'
// counter goes back with the backup): no later job gets the id of a job
// given out before the restore, not even through a manager whose clock runs
// an hour behind, and a lost job stays unknown. networking-mlnx polls a lost
// id until it is told it is unknown, then sends the change again: given to
// another change, the id would answer that change's job instead.
func testJobIDsAfterRestore(t *testing.T, db Database, s *store.Store) {
	ctx := t.Context()
	before := []store.Job{addNetwork(t, s, netA, 101), mustPort(t, s, boundPort("p1", netA, 0x0002c90300001001, "h1"))}
	restore := BackupPoint(t, db)
	lost := []store.Job{
		mustPort(t, s, boundPort("p2", netA, 0x0002c90300001002, "h2")),
		mustPort(t, s, boundPort("p3", netA, 0x0002c90300001003, "h3")),
		addNetwork(t, s, netB, 102),
	}
	restore()
	for _, j := range lost {
		if got, err := s.GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("job %d, lost in the restore: %+v, %v; want not found", j.ID, got, err)
		}
	}
	behind := s.WithClock(func() time.Time { return time.Now().UTC().Add(-time.Hour) })
	after := []store.Job{
		mustPort(t, s, boundPort("p4", netA, 0x0002c90300001004, "h4")),
		mustPort(t, behind, boundPort("p5", netA, 0x0002c90300001005, "h5")),
		addNetwork(t, behind, netB, 102),
		mustPort(t, s, boundPort("p2", netA, 0x0002c90300001002, "h2")), // networking-mlnx sends it again
	}
	var highest int64
	for _, j := range append(before, lost...) {
		highest = max(highest, j.ID)
	}
	for _, j := range after {
		if j.ID <= highest {
			t.Errorf("job %d (%s %s) after the restore: not above every id given out before it (up to %d)",
				j.ID, j.Operation, j.ObjectID, highest)
		}
		if j.ID >= 1<<53 {
			t.Errorf("job id %d: past 2^53, which a JSON client reads imprecisely", j.ID)
		}
	}
	for _, j := range lost {
		if got, err := s.GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("job %d, lost in the restore, answers %+v, %v after new changes; want not found", j.ID, got, err)
		}
	}
	// The jobs before the backup are as they were.
	for _, j := range before {
		if got, err := s.GetJob(ctx, j.ID); err != nil || got.ObjectID != j.ObjectID || got.Revision != j.Revision {
			t.Errorf("job %d from before the backup: %+v, %v", j.ID, got, err)
		}
	}
}

// testJobIDsAboveTheHighest: a job recorded with an id ahead of the clock (a
// database clock that ran ahead, then was set back) is followed by the next
// id, never by one the clock would give again.
func testJobIDsAboveTheHighest(t *testing.T, db Database, s *store.Store) {
	addNetwork(t, s, netA, 101)
	ahead := time.Now().Add(24*time.Hour).UnixMilli() * 1000
	withSQL(t, db, func(ctx context.Context, conn *sql.DB) error {
		_, err := conn.ExecContext(ctx, fmt.Sprintf(`INSERT INTO jobs (id, revision, object_type, object_id, network_id,
		operation, status, description, result, error, created_by, request, created_at, updated_at)
		VALUES (%d, 1, 'network', 'n1', 'n1', 'Create network', 'Completed', 'Create network n1', '', '',
		'networking-mlnx', '{}', '2026-01-02 03:04:05', '2026-01-02 03:04:05')`, ahead))
		return err
	})
	if j := addNetwork(t, s, netB, 102); j.ID != ahead+1 {
		t.Errorf("job after one recorded with id %d, a day ahead of the clock: %d; want %d", ahead, j.ID, ahead+1)
	}
}
