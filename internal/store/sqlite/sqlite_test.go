package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// The applier's snapshot is a read-only transaction that takes no write lock:
// a change commits while it is open, and the snapshot goes on reading the
// state it began with. A snapshot that began IMMEDIATE would hold the write
// lock, and the change would fail with SQLITE_BUSY after busy_timeout.
func TestSnapshotTakesNoWriteLock(t *testing.T) {
	ctx := context.Background()
	e := openMigrated(ctx, t)
	var before, during, after int64
	err := e.InTx(ctx, driver.ReadOnly, func(q driver.Queries) error {
		var err error
		if before, err = q.Revision(ctx, "default"); err != nil {
			return err
		}
		changed := make(chan error, 1)
		go func() {
			changed <- e.InChangeTx(ctx, func(q driver.ChangeTx) error {
				_, err := q.BumpRevision(ctx, "default")
				return err
			})
		}()
		if err := <-changed; err != nil {
			t.Errorf("a change while the snapshot is open: %v", err)
		}
		during, err = q.Revision(ctx, "default")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if after, err = e.Queries(ctx).Revision(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if during != before || after != before+1 {
		t.Errorf("revision before %d, in the snapshot after the change %d, after it %d; want %d, %d, %d",
			before, during, after, before, before, before+1)
	}
}

// A group of changes nests a savepoint per change (driver.SQLSavepoints), and
// SQLite copies every page a change first writes under a savepoint into the
// sub-journal: past 64 KiB, a temporary file, one write(2) a page, all while
// the group holds the write lock. The sub-journal only serves a rollback to a
// savepoint (a crash is recovered from the WAL), so every connection of the
// pool keeps it, and temporary tables, in memory (temp_store = MEMORY, 2).
func TestTemporaryStoreInMemory(t *testing.T) {
	ctx := context.Background()
	e, err := Open(ctx, filepath.Join(t.TempDir(), "afm.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// Every connection the pool may open: each runs the DSN's pragmas.
	conns := make([]*sql.Conn, 4)
	for i := range conns {
		c, err := e.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		var store int
		if err := c.QueryRowContext(ctx, "PRAGMA temp_store").Scan(&store); err != nil {
			t.Fatal(err)
		}
		if store != 2 {
			t.Errorf("connection %d: temp_store = %d, want 2 (MEMORY)", i, store)
		}
	}
}

// The applier reads the open jobs after every sweep (OpenJobsWithGUIDs). It
// must find them through jobs_status_revision, not walk jobs_fabric_id for
// its order: that walks every job the retention keeps, a cost growing with
// the jobs table on the path of every change's completion.
func TestOpenJobsReadThroughStatusIndex(t *testing.T) {
	ctx := context.Background()
	e := openMigrated(ctx, t)
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "queries", "shared", "queries.sql"))
	if err != nil {
		t.Fatal(err)
	}
	_, query, ok := strings.Cut(string(src), "-- name: OpenJobsWithGUIDs :many\n")
	if query, _, _ = strings.Cut(query, ";"); !ok {
		t.Fatal("no OpenJobsWithGUIDs in queries/shared/queries.sql")
	}
	query = strings.NewReplacer("@fabric", "'default'", "@revision", "1000").Replace(query)
	rows, err := e.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan[0], "jobs_status_revision") {
		t.Errorf("the open jobs' read: plan %q; want jobs read through jobs_status_revision", plan)
	}
}

// openMigrated opens a new database in t's temporary directory, migrated;
// it is closed when t ends.
func openMigrated(ctx context.Context, t *testing.T) *Engine {
	t.Helper()
	e, err := Open(ctx, filepath.Join(t.TempDir(), "afm.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}
