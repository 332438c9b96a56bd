package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// A restore takes the revision back with the rows, and new changes then take
// the revisions the lost changes had: a revision no longer names one state.
// These cases restore the database under a reader that read after the
// backup, then make new changes, then read again.

// tablesBackup is TablesBackupPoint as a Backup.
func tablesBackup(t *testing.T, db Database) func() { return TablesBackupPoint(t, db) }

// AfterRestoreChanges says how many new changes follow the restore in each
// case: two bring the revision back to the one read before the restore; a
// third takes it past it.
var AfterRestoreChanges = map[string]int{"RevisionBackAtTheCachedOne": 2, "RevisionPastTheCachedOne": 3}

// Backup notes db's state now, and returns the restore to it: the suite's
// TablesBackupPoint, or an engine's own tools (e2e).
type Backup func(t *testing.T, db Database) (restore func())

// SnapshotAfterRestore: a cache that read the state after the backup
// reads the database's state after the restore and the changes that follow
// it, whatever revision they bring the database to. Before the restore a
// port moved to another network and a GUID joined a Kubernetes pkey; after
// it, another port moves and another GUID joins at the same revisions, and
// the database counts as many ports in each network as the cache holds.
func SnapshotAfterRestore(t *testing.T, db Database, s *store.Store, backup Backup, changes int) {
	s = kubeStore(s)
	ctx := t.Context()
	mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(101)))
	mustNetwork(t, s, netSpec(netB, "vlan", "ibnet", vlanID(102)))
	mustPort(t, s, boundPort("p1", netA, 0x0002c90300002001, "h1"))
	mustPort(t, s, boundPort("p2", netA, 0x0002c90300002002, "h2"))
	restore := backup(t, db)
	mustPort(t, s, boundPort("p1", netB, 0x0002c90300002001, "h1"))
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, full(0x0002c90300004009))))
	var cache store.SnapshotCache
	before, err := s.ReadSnapshot(ctx, &cache)
	if err != nil {
		t.Fatal(err)
	}
	restore()
	mustPort(t, s, boundPort("p2", netB, 0x0002c90300002002, "h2"))
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, full(0x0002c90300004008))))
	if changes > 2 {
		mustPort(t, s, boundPort("p3", netA, 0x0002c90300002003, "h3"))
	}
	got, err := s.ReadSnapshot(ctx, &cache)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want.Revision < before.Revision {
		t.Fatalf("revision %d after the restore and %d changes, below %d read before it", want.Revision, changes, before.Revision)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read through the cache after the restore and %d changes (revision %d, read before at %d)\n%+v\nthe database holds\n%+v",
			changes, want.Revision, before.Revision, got, want)
	}
	if !cache.Last().Full {
		t.Errorf("the read after the restore: %+v, want a full one", cache.Last())
	}
	// The next read, with nothing restored, reads what changed only.
	mustPort(t, s, boundPort("p4", netA, 0x0002c90300002004, "h4"))
	if _, err := s.ReadSnapshot(ctx, &cache); err != nil {
		t.Fatal(err)
	}
	if cache.Last().Full {
		t.Errorf("a read after a change, without a restore since the last: %+v, want an incremental one", cache.Last())
	}
}

// FinishApplyAfterRestore: an apply that read the state before the
// database was restored completes none of the jobs recorded after the
// restore, though they carry the revision it read: its file holds the lost
// changes, not theirs. The apply that reads the restored state completes
// them.
func FinishApplyAfterRestore(t *testing.T, db Database, s *store.Store, backup Backup, changes int) {
	ctx := t.Context()
	addNetwork(t, s, netA, 101)
	addNetwork(t, s, netB, 102)
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	mustPort(t, s, boundPort("p1", netA, 0x0002c90300002001, "h1"))
	mustPort(t, s, boundPort("p2", netA, 0x0002c90300002002, "h2"))
	open := func(store.GateState) bool { return true }
	if _, err := s.FinishApply(ctx, appliedRow(term, revision(t, s), time.Now().UTC()), open); err != nil {
		t.Fatal(err)
	}
	restore := backup(t, db)
	mustPort(t, s, boundPort("p1", netB, 0x0002c90300002001, "h1"))
	mustPort(t, s, boundPort("p2", netB, 0x0002c90300002002, "h2"))
	read, err := s.ReadSnapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	restore()
	var after []store.Job
	for i := range changes {
		after = append(after, mustPort(t, s, boundPort("p1", []string{netB, netA}[i%2], 0x0002c90300002001, "h1")))
	}
	f, err := s.FinishApply(ctx, appliedOf(term, read, time.Now().UTC()), open)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range after {
		if got, err := s.GetJob(ctx, j.ID); err != nil || got.Status != store.StatusPending {
			t.Errorf("job %d (revision %d), recorded after the restore, is %s after the apply of revision %d read before it; want %s",
				j.ID, j.Revision, got.Status, read.Revision, store.StatusPending)
		}
	}
	if f.Completed != 0 || !f.Restored || f.Recorded {
		t.Errorf("the apply read before the restore: %+v; want it found restored, nothing recorded or completed", f)
	}
	// An apply of the restored state completes them.
	now, err := s.ReadSnapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := s.FinishApply(ctx, appliedOf(term, now, time.Now().UTC()), open); err != nil || f.Completed != int64(changes) {
		t.Errorf("the apply of the restored state: %+v, %v; want %d jobs completed", f, err, changes)
	}
}

// appliedOf is the row of an apply of snap that OpenSM applied, as the
// applier passes it.
func appliedOf(term int64, snap store.Snapshot, finished time.Time) store.Apply {
	a := appliedRow(term, snap.Revision, finished)
	a.NewestJob = snap.NewestJob
	return a
}
