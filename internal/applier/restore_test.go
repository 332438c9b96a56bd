package applier

import (
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The database is restored from a backup taken before the last applied
// change, and a new change takes the revision back to the applied one: the
// revision alone says there is nothing to apply, but the new change's job
// completes, by an apply of the restored state. The check interval is an
// hour, so that no drift repair applies it instead, and so is the poll: only
// the changes' own wake-ups make the loop read the revision, never between
// the restore (which wakes no one) and the new change.
func TestLeadAppliesARestoredStateAtTheAppliedRevision(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	r := newLeadRigOn(t, db)
	r.app.Cfg.CheckInterval, r.app.Cfg.PollInterval = time.Hour, time.Hour
	_, end := r.lead()
	defer end()
	r.wait(r.network(netA, 101), store.StatusCompleted)
	restore := storetest.TablesBackupPoint(t, db)
	applied := r.wait(r.port("p1", netA, guidA), store.StatusCompleted)
	restore()
	j := r.port("p2", netA, guidA+1)
	if j.Revision != applied.Revision {
		t.Fatalf("the change after the restore has revision %d, want %d, the applied one's", j.Revision, applied.Revision)
	}
	r.wait(j, store.StatusCompleted)
	waitLog(t, r.logs, "no longer holds the state last applied")
}
