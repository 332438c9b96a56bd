package soak

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestBackupRestore: restore-db puts back every row a backup held, drops
// what came after, and sets the id counters back to the backup's, on every
// engine (the server engines when their test servers are set).
func TestBackupRestore(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			db := storetest.NewDatabase(t, engine)
			s := storetest.OpenDatabase(t, db)
			record := func(id string) store.Job {
				t.Helper()
				job, err := s.RecordNetwork(ctx, store.NetworkChange{Operation: store.OpCreateNetwork, CreatedBy: "soak test",
					Request: "{}", Network: store.NetworkSpec{ID: id, Type: "vxlan"}})
				if err != nil {
					t.Fatalf("record network %s: %v", id, err)
				}
				return job
			}
			kept := record("net-kept")
			b, err := takeBackup(ctx, db.URL)
			if err != nil {
				t.Fatalf("backup: %v", err)
			}
			lost := record("net-lost")
			if err := b.restore(ctx, db.URL); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if _, err := s.GetJob(ctx, kept.ID); err != nil {
				t.Errorf("job %d of the backup is gone after the restore: %v", kept.ID, err)
			}
			if j, err := s.GetJob(ctx, lost.ID); err == nil {
				t.Errorf("job %d, recorded after the backup, is still there after the restore: %+v", lost.ID, j)
			}
			again, err := takeBackup(ctx, db.URL)
			if err != nil {
				t.Fatalf("backup after the restore: %v", err)
			}
			if got, want := summary(again), summary(b); got != want {
				t.Errorf("after the restore the database holds\n%s\nthe backup held\n%s", got, want)
			}
		})
	}
}

// summary is a backup's tables' row counts and its counters.
func summary(b *backup) string {
	s := ""
	for _, t := range b.tables {
		s += fmt.Sprintf("%s: %d rows\n", t.name, len(t.rows))
	}
	s += fmt.Sprintf("counters %v", b.counters)
	return s
}
