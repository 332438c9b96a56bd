package storetest

import (
	"context"
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestJobPlacesMigration: a database of schema version 13 with an open job of
// the previous release (no places) upgrades to job_places: that job reads
// with none, a new change's job with its places; 00014 goes down (the table
// gone, every job kept) and up again, the jobs then with no places.
func TestJobPlacesMigration(t *testing.T) {
	atVersion(t, 13, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		if _, err := db.ExecContext(ctx, `INSERT INTO jobs (id, revision, object_type, object_id, network_id,
		operation, status, description, result, error, created_by, request, created_at, updated_at)
		VALUES (1, 1, 'network', 'n1', 'n1', 'Delete network', 'Pending', 'Delete network n1', '', '',
		'networking-mlnx', '{}', '2026-01-02 03:04:05', '2026-01-02 03:04:05')`); err != nil {
			t.Fatalf("insert a job at version 13: %v", err)
		}
		s := OpenDatabase(t, d) // migrates to the latest version
		if places, open := jobPlaces(t, s, 1); !open || places != nil {
			t.Errorf("the previous release's job: places %v (open %t), want none", places, open)
		}
		addNetwork(t, s, netA, 101)
		j := mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
		want := []store.Place{place(guidA, pkeyA, store.WantFull)}
		if places, _ := jobPlaces(t, s, j.ID); !reflect.DeepEqual(places, want) {
			t.Errorf("the port's job after the upgrade: places %v, want %v", places, want)
		}
		downAndUp(ctx, t, p, 13, func() {
			wantRows(ctx, t, db, "jobs", 3)
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM job_places`).Scan(&n); err == nil {
				t.Error("after 00014's down job_places is still there")
			}
		})
		if places, open := jobPlaces(t, s, j.ID); !open || places != nil {
			t.Errorf("the port's job after 00014 up again: places %v (open %t), want none", places, open)
		}
	})
}

// TestJobPlacesGoWithTheirJobs: job retention deletes a finished job's places
// with it (the foreign key's cascade, on every engine as the store opens
// it), and keeps an open job's.
func TestJobPlacesGoWithTheirJobs(t *testing.T) {
	atVersion(t, 14, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, _ *goose.Provider) {
		s := OpenDatabase(t, d)
		addNetwork(t, s, netA, 101)
		old := mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
		term, err := s.NewTerm(ctx, "manager-1")
		if err != nil {
			t.Fatal(err)
		}
		month := time.Now().UTC().Add(-30 * 24 * time.Hour)
		if _, err := clockAt(s, month).CompleteJobs(ctx, term, old.Revision); err != nil {
			t.Fatal(err)
		}
		kept := mustPort(t, s, boundPort("p2", netA, guidB, "h2"))
		countPlaces := func(id int64) int {
			t.Helper()
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM job_places WHERE job_id = ?`, id).Scan(&n); err != nil {
				// PostgreSQL's placeholders are numbered.
				if err := db.QueryRowContext(ctx, `SELECT count(*) FROM job_places WHERE job_id = $1`, id).Scan(&n); err != nil {
					t.Fatalf("count the places of job %d: %v", id, err)
				}
			}
			return n
		}
		if n := countPlaces(old.ID); n != 1 {
			t.Fatalf("the finished job's places before the retention: %d, want 1", n)
		}
		if n, err := s.DeleteExpiredJobs(ctx, term, 7*24*time.Hour); err != nil || n != 2 {
			t.Fatalf("DeleteExpiredJobs = %d, %v; want the network's job and the port's", n, err)
		}
		if n := countPlaces(old.ID); n != 0 {
			t.Errorf("the deleted job's places: %d rows, want none", n)
		}
		if n := countPlaces(kept.ID); n != 1 {
			t.Errorf("the open job's places: %d rows, want 1", n)
		}
	})
}
