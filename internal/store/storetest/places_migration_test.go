package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
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

// TestJobPlacesGoWithTheirJobs: job retention deletes a finished job's
// places with it, in its row or, for a job of the previous release, as rows
// of job_places (the foreign key's cascade, on every engine as the store
// opens it), and keeps an open job's.
func TestJobPlacesGoWithTheirJobs(t *testing.T) {
	atVersion(t, 19, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, _ *goose.Provider) {
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
		// A job the previous release recorded, finished as long ago, its
		// places as rows.
		previous := old.ID + 1000
		insertPreviousJob(ctx, t, d, db, previous, "Completed", month, place(guidB, pkeyA, store.WantFull))
		kept := mustPort(t, s, boundPort("p2", netA, guidB, "h2"))
		if n := countRows(ctx, t, d, db, `SELECT count(*) FROM job_places WHERE job_id = ?`, previous); n != 1 {
			t.Fatalf("the previous release's finished job's places before the retention: %d, want 1", n)
		}
		if n, err := s.DeleteExpiredJobs(ctx, term, 7*24*time.Hour); err != nil || n != 3 {
			t.Fatalf("DeleteExpiredJobs = %d, %v; want the network's job, the port's and the previous release's", n, err)
		}
		if n := countRows(ctx, t, d, db, `SELECT count(*) FROM jobs WHERE id IN (?, ?)`, old.ID, previous); n != 0 {
			t.Errorf("the finished jobs: %d rows kept, want none", n)
		}
		if n := countRows(ctx, t, d, db, `SELECT count(*) FROM job_places WHERE job_id = ?`, previous); n != 0 {
			t.Errorf("the deleted job's places: %d rows, want none", n)
		}
		want := []store.Place{place(guidB, pkeyA, store.WantFull)}
		if places, open := jobPlaces(t, s, kept.ID); !open || !reflect.DeepEqual(places, want) {
			t.Errorf("the open job's places: %v (open %t), want %v", places, open, want)
		}
	})
}

// TestJobPlacesInRowMigration: a database of schema version 18 with an open
// job whose places are rows of job_places, as that schema wrote them,
// upgrades to places in the job's row: that job reads the same places, a new
// change's job writes its places in its row only; 00019 goes down (the
// row's places moved to job_places, the column gone) and up again, both
// jobs still reading their places.
func TestJobPlacesInRowMigration(t *testing.T) {
	atVersion(t, 18, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		const previous = 1
		// Stated out of order, as no key orders them: OpenJobs lists them by
		// GUID and pkey.
		old := []store.Place{place(guidB, pkeyA, store.WantAbsent), place(guidA, pkeyA, store.WantLimited)}
		insertPreviousJob(ctx, t, d, db, previous, "Pending", time.Now().UTC(), old...)
		s := OpenDatabase(t, d) // migrates to the latest version
		wantOld := []store.Place{old[1], old[0]}
		if places, open := jobPlaces(t, s, previous); !open || !reflect.DeepEqual(places, wantOld) {
			t.Errorf("the job of version 18 after the upgrade: places %v (open %t), want %v", places, open, wantOld)
		}
		addNetwork(t, s, netA, 101)
		j := mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
		want := []store.Place{place(guidA, pkeyA, store.WantFull)}
		if places, _ := jobPlaces(t, s, j.ID); !reflect.DeepEqual(places, want) {
			t.Errorf("the port's job after the upgrade: places %v, want %v", places, want)
		}
		if n := countRows(ctx, t, d, db, `SELECT count(*) FROM job_places WHERE job_id = ?`, j.ID); n != 0 {
			t.Errorf("the port's job wrote %d rows of job_places, want none (its places go in its row)", n)
		}
		downAndUp(ctx, t, p, 18, func() {
			if n := countRows(ctx, t, d, db, `SELECT count(*) FROM job_places WHERE job_id = ?`, j.ID); n != 1 {
				t.Errorf("after 00019's down the port's job has %d rows of job_places, want its 1 place", n)
			}
			if _, err := db.ExecContext(ctx, `SELECT places FROM jobs`); err == nil {
				t.Error("after 00019's down jobs.places is still there")
			}
		})
		if places, open := jobPlaces(t, s, previous); !open || !reflect.DeepEqual(places, wantOld) {
			t.Errorf("the job of version 18 after 00019 up again: places %v (open %t), want %v", places, open, wantOld)
		}
		if places, _ := jobPlaces(t, s, j.ID); !reflect.DeepEqual(places, want) {
			t.Errorf("the port's job after 00019 up again: places %v, want %v", places, want)
		}
	})
}

// insertPreviousJob inserts job id with status, finished at (unless
// open), and its places as rows of job_places, as a manager of schema
// version 18 writes them: statements a DBA could run, with no store.
func insertPreviousJob(ctx context.Context, t *testing.T, d Database, db *sql.DB, id int64, status string, at time.Time, places ...store.Place) {
	t.Helper()
	var finished any
	if status == "Completed" {
		finished = at
	}
	execSQL(ctx, t, d, db, `INSERT INTO jobs (id, revision, object_type, object_id, network_id, operation, status,
		description, result, error, created_by, request, created_at, updated_at, finished_at)
		VALUES (?, 1, 'port', 'previous', '`+netA+`', 'Update port', ?, 'Update port previous', '', '',
		'networking-mlnx', '{}', ?, ?, ?)`, id, status, at, at, finished)
	for _, p := range places {
		execSQL(ctx, t, d, db, `INSERT INTO job_places (fabric, job_id, guid, pkey, want) VALUES ('default', ?, ?, ?, ?)`,
			id, p.GUID.String(), int64(p.PKey), string(p.Want))
	}
}

// execSQL runs query, its placeholders "?" numbered for PostgreSQL.
func execSQL(ctx context.Context, t *testing.T, d Database, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(ctx, placeholders(d, query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// countRows is the count query reads.
func countRows(ctx context.Context, t *testing.T, d Database, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctx, placeholders(d, query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// placeholders numbers query's "?" as $1, $2... on PostgreSQL.
func placeholders(d Database, query string) string {
	if d.Engine != config.EnginePostgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestJobPlacesRowsOnlyForJobsWithout: OpenJobs reads the rows of
// job_places only while an open job has no places in its row (one of the
// previous release's): this release writes none, so a job with places in its
// row has none there, and reading them cost every change's completion a
// round trip. A row a DBA put there beside a job's own places is not read.
func TestJobPlacesRowsOnlyForJobsWithout(t *testing.T) {
	atVersion(t, 19, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, _ *goose.Provider) {
		s := OpenDatabase(t, d)
		addNetwork(t, s, netA, 101)
		// The network's job, without places, is done: only jobs with
		// places in their rows are open.
		term, err := s.NewTerm(ctx, "manager-1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CompleteJobs(ctx, term, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		j := mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
		execSQL(ctx, t, d, db, `INSERT INTO job_places (fabric, job_id, guid, pkey, want) VALUES ('default', ?, ?, ?, ?)`,
			j.ID, fabric.GUID(guidB).String(), int64(pkeyA), string(store.WantFull))
		want := []store.Place{place(guidA, pkeyA, store.WantFull)}
		if places, _ := jobPlaces(t, s, j.ID); !reflect.DeepEqual(places, want) {
			t.Errorf("a job with places in its row: places %v, want %v (its row's alone)", places, want)
		}
		// A job of the previous release open beside it: its rows are read.
		const previous = 1000
		old := []store.Place{place(guidB, pkeyA, store.WantAbsent)}
		insertPreviousJob(ctx, t, d, db, j.ID+previous, "Pending", time.Now().UTC(), old...)
		if places, open := jobPlaces(t, s, j.ID+previous); !open || !reflect.DeepEqual(places, old) {
			t.Errorf("the previous release's job beside it: places %v (open %t), want %v", places, open, old)
		}
	})
}
