package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
)

// TestJobQuotaIndexMigration: a database of schema version 22 with a job
// upgrades to the indexes the quotas and a change's newest job read through,
// and the job's principal's usage reads it; 00025 goes down (the indexes
// gone, the job kept) and up again.
func TestJobQuotaIndexMigration(t *testing.T) {
	atVersion(t, 22, func(ctx context.Context, t *testing.T, d Database, db *sql.DB, p *goose.Provider) {
		m := indexMigration{22, `'jobs_created_by', 'jobs_object'`, 2}
		s := OpenDatabase(t, d) // migrates to the latest version
		if n := m.count(ctx, t, d, db); n != m.want {
			t.Fatalf("after the upgrade: %d of the quota indexes, want 2", n)
		}
		j := addNetwork(t, s, netA, 101)
		u, err := s.PrincipalUsage(ctx, j.CreatedBy, time.Now().Add(-time.Hour), time.Now().Add(-time.Minute))
		if err != nil || u.RecentJobs != 1 || u.RequestBytes != int64(len(j.Request)) {
			t.Errorf("usage of the job's principal after the upgrade = %+v, %v; want 1 job of %d bytes", u, err, len(j.Request))
		}
		m.downAndUp(ctx, t, d, db, p, "jobs")
	})
}
