package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
)

// TestRetentionIndexMigration: a database of schema version 7 with finished
// jobs upgrades to the index the retention reads, which prunes them; 00009
// goes down (the index gone, the rows kept) and up again.
func TestRetentionIndexMigration(t *testing.T) {
	atVersion(t, 7, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		m := indexMigration{7, `'jobs_status_finished_at'`, 1}
		s := OpenDatabase(t, d) // migrates to the latest version
		if n := m.count(ctx, t, d, db); n != m.want {
			t.Fatalf("after the upgrade: %d retention indexes, want 1", n)
		}
		j := addNetwork(t, s, netA, 101)
		term, err := s.NewTerm(ctx, "manager-1")
		if err != nil {
			t.Fatal(err)
		}
		old := time.Now().UTC().Add(-30 * 24 * time.Hour)
		recordApply(t, s, term, j.Revision, "timeout", old)
		recordApply(t, s, term, j.Revision, "applied", old)
		if _, err := clockAt(s, old).CompleteJobs(ctx, term, j.Revision); err != nil {
			t.Fatal(err)
		}
		if n, err := s.DeleteExpiredJobs(ctx, term, 7*24*time.Hour); err != nil || n != 1 {
			t.Errorf("DeleteExpiredJobs after the upgrade = %d, %v; want 1", n, err)
		}
		if n, err := s.DeleteExpiredApplies(ctx, term, 7*24*time.Hour); err != nil || n != 1 {
			t.Errorf("DeleteExpiredApplies after the upgrade = %d, %v; want 1", n, err)
		}
		m.downAndUp(ctx, t, d, db, p, "applies")
	})
}
