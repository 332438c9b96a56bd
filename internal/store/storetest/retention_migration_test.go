package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// TestRetentionIndexMigration: a database of schema version 7 with finished
// jobs upgrades to the index the retention reads, which prunes them; 00009
// goes down (the index gone, the rows kept) and up again.
func TestRetentionIndexMigration(t *testing.T) {
	atVersion(t, 7, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		indexes := func() int {
			t.Helper()
			q := map[string]string{
				config.EngineSQLite:   `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'jobs_status_finished_at'`,
				config.EnginePostgres: `SELECT count(*) FROM pg_indexes WHERE indexname = 'jobs_status_finished_at'`,
				config.EngineMySQL: `SELECT count(DISTINCT index_name) FROM information_schema.statistics
				WHERE table_schema = DATABASE() AND index_name = 'jobs_status_finished_at'`,
			}[d.Engine]
			var n int
			if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
				t.Fatalf("count the retention index: %v", err)
			}
			return n
		}
		s := OpenDatabase(t, d) // migrates to the latest version
		if n := indexes(); n != 1 {
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
		if _, err := p.DownTo(ctx, 7); err != nil {
			t.Fatalf("migrate down to version 7: %v", err)
		}
		if n := indexes(); n != 0 {
			t.Errorf("after 00009's down: %d retention indexes, want none", n)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM applies`).Scan(&n); err != nil || n != 1 {
			t.Errorf("after 00009's down: %d applies, %v; want the one kept", n, err)
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("migrate up again: %v", err)
		}
		if n := indexes(); n != 1 {
			t.Errorf("after 00009 up again: %d retention indexes, want 1", n)
		}
	})
}
