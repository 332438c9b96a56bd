package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// storeTest is one case of the suite: it runs on a store of its own, opened
// on a new database of the engine under test.
type storeTest struct {
	name string
	fn   func(t *testing.T, s *store.Store)
}

// databaseTests need their database as well as a store on it: to open a
// second manager on it, restore it or end its sessions from outside.
var databaseTests = []struct {
	name        string
	fn          func(t *testing.T, db Database, s *store.Store)
	notOnSQLite bool
}{
	{"ConcurrentClaimsOfOneGUIDFromTwoManagers", func(t *testing.T, db Database, s *store.Store) {
		testConcurrentGUIDClaims(t, s, OpenDatabase(t, db))
	}, false},
	{"JobIDsNeverRepeatAfterARestore", testJobIDsAfterRestore, false},
	{"JobIDsNeverBelowTheHighest", testJobIDsAboveTheHighest, false},
	{"SnapshotAfterARestoreWithTheRevisionBack", func(t *testing.T, db Database, s *store.Store) {
		SnapshotAfterRestore(t, db, s, tablesBackup, AfterRestoreChanges["RevisionBackAtTheCachedOne"])
	}, false},
	{"SnapshotAfterARestoreWithTheRevisionPast", func(t *testing.T, db Database, s *store.Store) {
		SnapshotAfterRestore(t, db, s, tablesBackup, AfterRestoreChanges["RevisionPastTheCachedOne"])
	}, false},
	{"FinishApplyReadBeforeARestoreWithTheRevisionBack", func(t *testing.T, db Database, s *store.Store) {
		FinishApplyAfterRestore(t, db, s, tablesBackup, AfterRestoreChanges["RevisionBackAtTheCachedOne"])
	}, false},
	{"FinishApplyReadBeforeARestoreWithTheRevisionPast", func(t *testing.T, db Database, s *store.Store) {
		FinishApplyAfterRestore(t, db, s, tablesBackup, AfterRestoreChanges["RevisionPastTheCachedOne"])
	}, false},
	// SQLite has no session to end from outside.
	{"GroupWhoseConnectionIsKilledAppliesNone", testGroupConnectionKilled, true},
	// SQLite's writer excludes every other while a group runs.
	{"GroupWhoseChangeWriteFailsCommitsTheOthers", testGroupHeldWriteFails, true},
}

// Run is the compliance suite: every store behaviour, on one engine.
func Run(t *testing.T, engine string) {
	tests := []storeTest{
		{"NetworkJob", testNetworkJob},
		{"JobsKeepTheirRequestID", testJobsKeepRequestID},
		{"PortOnUnknownNetworkIsRejectedAndChangesNothing", testPortOnUnknownNetwork},
		{"PortMembershipInSnapshot", testPortMembership},
		{"GUIDOfAnotherPortIsRejected", testGUIDTaken},
		{"VLANOfAnotherNetworkIsRejected", testVLANTaken},
		{"RejectionsChangeNothing", testRejectionsChangeNothing},
		{"UnmanagedNetworksCompleteAtOnce", testUnmanagedNetworks},
		{"NetworkChangesMovePartitions", testNetworkChanges},
		{"PortChanges", testPortChanges},
		{"PortDeleteRemovesTheGUIDItNames", testPortDeleteByBody},
		{"RemoveUnknownIsNotFoundAndChangesNothing", testRemoveUnknown},
		{"RemovePortAndNetwork", testRemove},
		{"FencedJobCompletion", testFencing},
		{"OpenJobsAndFailOne", testOpenJobsAndFailOne},
		{"FencedApplyRecord", testApplyRecord},
		{"ApplierLockIsExclusive", testLock},
		{"ConcurrentChangesGetDistinctRevisions", testConcurrentChanges},
		{"MigrateTwice", testMigrateTwice},
		{"WakeAfterChange", testWake},
		{"JobRetention", testJobRetention},
	}
	tests = append(tests, fabricTests...)
	tests = append(tests, statusTests...)
	tests = append(tests, kubernetesTests...)
	tests = append(tests, unchangedTests...)
	tests = append(tests, neutronUnchangedTests...)
	tests = append(tests, qosTests...)
	tests = append(tests, principalTests...)
	tests = append(tests, groupTests...)
	tests = append(tests, finishTests...)
	tests = append(tests, snapshotTests...)
	tests = append(tests, textTests...)
	tests = append(tests, appliesRetentionTests...)
	tests = append(tests, adoptedTests...)
	tests = append(tests, auditTests...)
	tests = append(tests, secondSMTests...)
	tests = append(tests, setFailureTests...)
	tests = append(tests, placesTests...)
	tests = append(tests, duplicateTests...)
	tests = append(tests, guidPlaceTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, Open(t, engine))
		})
	}
	for _, tc := range twoFabricTests {
		t.Run("TwoFabrics/"+tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, OpenFabrics(t, engine).Fabric(store.DefaultFabric))
		})
	}
	for _, tc := range physnetMoveTests {
		if tc.notOnSQLite && engine == config.EngineSQLite {
			continue
		}
		t.Run("TwoFabrics/"+tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, NewMigratedDatabase(t, engine))
		})
	}
	for _, tc := range append(databaseTests[:len(databaseTests):len(databaseTests)], finishAwaitingTests...) {
		if tc.notOnSQLite && engine == config.EngineSQLite {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := NewMigratedDatabase(t, engine)
			tc.fn(t, db, OpenDatabase(t, db))
		})
	}
}

const (
	netA = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	netB = "0c4e2a1d-1111-4a7b-8c9d-0e1f2a3b4c5d"
)

func guid(v uint64) *fabric.GUID { g := fabric.GUID(v); return &g }
func vlanNetwork(id string, vlan int64) store.NetworkSpec {
	return store.NetworkSpec{ID: id, Name: "net " + id[:8], Type: "vlan", PhysicalNetwork: "ibnet", SegmentationID: &vlan}
}

func addNetwork(t *testing.T, s neutron, id string, vlan int64) store.Job {
	t.Helper()
	j, err := s.RecordNetwork(t.Context(), store.NetworkChange{Network: vlanNetwork(id, vlan),
		Operation: store.OpCreateNetwork, CreatedBy: "test", Request: `{}`})
	if err != nil {
		t.Fatalf("RecordNetwork: %v", err)
	}
	return j
}

func addPort(t *testing.T, s *store.Store, id, network string, g uint64) (store.Job, error) {
	t.Helper()
	return s.RecordPort(t.Context(), store.PortChange{
		Port:      store.Port{ID: id, NetworkID: network, GUID: guid(g), Host: "h1"},
		Operation: store.OpAddPort, CreatedBy: "test", Request: `{"id":"` + id + `"}`})
}

// wantRefused fails the test unless err is a RejectedError and the revision
// is still rev, as it was before the refused request.
func wantRefused(t *testing.T, s *store.Store, err error, rev int64) {
	t.Helper()
	var rej *store.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("error = %v, want RejectedError", err)
	}
	if r := revision(t, s); r != rev {
		t.Errorf("revision = %d after a rejected request, want %d", r, rev)
	}
}

func revision(t *testing.T, s *store.Store) int64 {
	t.Helper()
	r, err := s.Revision(t.Context())
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	return r
}

func testNetworkJob(t *testing.T, s *store.Store) {
	before := time.Now().UTC().Add(-time.Second)
	j := addNetwork(t, s, netA, 101)
	if j.Revision != 1 || j.Status != store.StatusPending || j.Operation != store.OpCreateNetwork ||
		j.ObjectType != store.ObjectNetwork || j.ObjectID != netA || j.NetworkID != netA || j.Request != `{}` {
		t.Fatalf("job = %+v", j)
	}
	if j.CreatedAt.Before(before) || j.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("CreatedAt %v is not now", j.CreatedAt)
	}
	if j.StartedAt != nil || j.FinishedAt != nil {
		t.Errorf("a new job has start/finish times: %+v", j)
	}
	got, err := s.GetJob(t.Context(), j.ID)
	if err != nil || got.ID != j.ID || got.Description != j.Description {
		t.Fatalf("GetJob = %+v, %v", got, err)
	}
	j2 := addNetwork(t, s, netB, 102)
	if j2.ID <= j.ID || j2.Revision != 2 {
		t.Errorf("second job id %d revision %d after id %d", j2.ID, j2.Revision, j.ID)
	}
	if _, err := s.GetJob(t.Context(), j2.ID+1000); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetJob(unknown) error = %v, want ErrNotFound", err)
	}
}

func testPortOnUnknownNetwork(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	_, err := addPort(t, s, "p1", netB, 0x0002c90300000101)
	wantRefused(t, s, err, 1)
	snap, err := s.Snapshot(t.Context())
	if err != nil || len(snap.Members) != 0 {
		t.Errorf("snapshot members = %v, %v", snap.Members, err)
	}
	counts, err := s.CountJobsByStatus(t.Context())
	if err != nil || counts[store.StatusPending] != 1 || len(counts) != 1 {
		t.Errorf("jobs by status = %v, %v; want only the network's job", counts, err)
	}
}

func testPortMembership(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	j, err := addPort(t, s, "p1", netA, 0x248a070300b1c2d4)
	if err != nil {
		t.Fatal(err)
	}
	if j.Revision != 2 || j.ObjectType != store.ObjectPort || j.NetworkID != netA {
		t.Errorf("port job = %+v", j)
	}
	// The same request again changes nothing: answered with the port's job,
	// the same state, no revision (unchanged.go).
	if again, err := addPort(t, s, "p1", netA, 0x248a070300b1c2d4); err != nil || again.ID != j.ID {
		t.Fatalf("the same port again = job %d, %v; want %d", again.ID, err, j.ID)
	}
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != 2 || len(snap.Networks) != 1 || *snap.Networks[0].PKey != 101 {
		t.Errorf("snapshot = %+v", snap)
	}
	want := []store.Member{{NetworkID: netA, GUID: 0x248a070300b1c2d4, PortID: "p1"}}
	if fmt.Sprint(snap.Members) != fmt.Sprint(want) {
		t.Errorf("members = %v, want %v", snap.Members, want)
	}
}

func testGUIDTaken(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	addNetwork(t, s, netB, 102)
	if _, err := addPort(t, s, "p1", netA, 0x0002c90300000101); err != nil {
		t.Fatal(err)
	}
	_, err := addPort(t, s, "p2", netB, 0x0002c90300000101)
	wantRefused(t, s, err, 3)
}

func testRemoveUnknown(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	if _, err := s.RemovePort(t.Context(), store.PortRemoval{PortID: "nope", CreatedBy: "test", Request: "{}"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RemovePort(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.RemoveNetwork(t.Context(), store.NetworkRemoval{NetworkID: netB, CreatedBy: "test", Request: "{}"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RemoveNetwork(unknown) = %v, want ErrNotFound", err)
	}
	if r := revision(t, s); r != 1 {
		t.Errorf("revision = %d, want 1", r)
	}
}

func testRemove(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	addNetwork(t, s, netB, 102)
	for i, id := range []string{"p1", "p2"} {
		if _, err := addPort(t, s, id, netA, 0x0002c90300000101+uint64(i)*0x100); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := addPort(t, s, "p3", netB, 0x0002c90300000301); err != nil {
		t.Fatal(err)
	}
	j, err := s.RemovePort(t.Context(), store.PortRemoval{PortID: "p1", CreatedBy: "test", Request: "{}"})
	if err != nil || j.Operation != store.OpRemovePort || j.NetworkID != netA {
		t.Fatalf("RemovePort = %+v, %v", j, err)
	}
	j, err = s.RemoveNetwork(t.Context(), store.NetworkRemoval{NetworkID: netA, CreatedBy: "test", Request: "{}"})
	if err != nil || j.Operation != store.OpDeleteNetwork {
		t.Fatalf("RemoveNetwork = %+v, %v", j, err)
	}
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Member{{NetworkID: netB, GUID: 0x0002c90300000301, PortID: "p3"}}
	if len(snap.Networks) != 1 || snap.Networks[0].ID != netB || fmt.Sprint(snap.Members) != fmt.Sprint(want) {
		t.Errorf("after removals: networks %+v members %v", snap.Networks, snap.Members)
	}
	// The removed network's port went with it: its GUID is free again.
	addNetwork(t, s, netA, 103)
	if _, err := addPort(t, s, "p9", netA, 0x0002c90300000201); err != nil {
		t.Errorf("GUID of a port removed with its network is still taken: %v", err)
	}
}

func testFencing(t *testing.T, s *store.Store) {
	ctx := t.Context()
	now := time.Now().UTC()
	first := addNetwork(t, s, netA, 101)
	second := addNetwork(t, s, netB, 102)
	t1, err := clockAt(s, now).NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := clockAt(s, now).MarkJobsRunning(ctx, t1, 1); err != nil || n != 1 {
		t.Fatalf("MarkJobsRunning = %d, %v; want 1", n, err)
	}
	t2, err := clockAt(s, now).NewTerm(ctx, "manager-2")
	if err != nil || t2 != t1+1 {
		t.Fatalf("NewTerm = %d, %v; want %d", t2, err, t1+1)
	}
	// The deposed leader's late writes change nothing.
	if n, err := clockAt(s, now).CompleteJobs(ctx, t1, 2); err != nil || n != 0 {
		t.Errorf("CompleteJobs with an old term = %d, %v; want 0", n, err)
	}
	if n, err := clockAt(s, now).FailJobs(ctx, t1, 2, "late"); err != nil || n != 0 {
		t.Errorf("FailJobs with an old term = %d, %v; want 0", n, err)
	}
	// The current leader completes exactly the jobs up to its revision.
	if n, err := clockAt(s, now).CompleteJobs(ctx, t2, 1); err != nil || n != 1 {
		t.Errorf("CompleteJobs(rev 1) = %d, %v; want 1", n, err)
	}
	j1, _ := s.GetJob(ctx, first.ID)
	if j1.Status != store.StatusCompleted || j1.FinishedAt == nil || j1.StartedAt == nil {
		t.Errorf("job of revision 1 = %+v", j1)
	}
	if n, err := clockAt(s, now).FailJobs(ctx, t2, 2, "OpenSM rejected it"); err != nil || n != 1 {
		t.Errorf("FailJobs = %d, %v; want 1", n, err)
	}
	j2, _ := s.GetJob(ctx, second.ID)
	if j2.Status != store.StatusFailed || j2.Error != "OpenSM rejected it" {
		t.Errorf("job of revision 2 = %+v", j2)
	}
	// Finished jobs stay finished.
	if n, err := clockAt(s, now).CompleteJobs(ctx, t2, 2); err != nil || n != 0 {
		t.Errorf("CompleteJobs over finished jobs = %d, %v; want 0", n, err)
	}
}

func testApplyRecord(t *testing.T, s *store.Store) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := s.LastApply(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LastApply on a new database = %v, want ErrNotFound", err)
	}
	term, err := clockAt(s, now).NewTerm(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	a := store.Apply{Revision: 7, SHA256: "ab", Term: term, Outcome: "applied", Detail: "SUBNET UP",
		StartedAt: now, FinishedAt: now.Add(time.Second)}
	if ok, err := s.RecordApply(ctx, a); err != nil || !ok {
		t.Fatalf("RecordApply = %v, %v", ok, err)
	}
	stale := a
	stale.Term, stale.Revision = term-1, 8
	if ok, err := s.RecordApply(ctx, stale); err != nil || ok {
		t.Errorf("RecordApply with an old term = %v, %v; want false", ok, err)
	}
	got, err := s.LastApply(ctx)
	if err != nil || got.Revision != 7 || got.Outcome != "applied" || !got.FinishedAt.Equal(a.FinishedAt) {
		t.Errorf("LastApply = %+v, %v", got, err)
	}
}

func testLock(t *testing.T, s *store.Store) {
	ctx := t.Context()
	l1, err := s.TryLock(ctx)
	if err != nil || l1 == nil {
		t.Fatalf("TryLock = %v, %v", l1, err)
	}
	if err := l1.Check(ctx); err != nil {
		t.Errorf("Check of a held lock: %v", err)
	}
	l2, err := s.TryLock(ctx)
	if err != nil || l2 != nil {
		t.Fatalf("second TryLock = %v, %v; want nil, nil", l2, err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l3, err := s.TryLock(ctx)
	if err != nil || l3 == nil {
		t.Fatalf("TryLock after release = %v, %v", l3, err)
	}
	l3.Release(ctx)
}

func testConcurrentChanges(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	const n = 16
	var wg sync.WaitGroup
	revs := make(chan int64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, err := addPort(t, s, fmt.Sprintf("p%d", i), netA, 0x0002c90300000101+uint64(i)*0x100)
			if err != nil {
				t.Errorf("port %d: %v", i, err)
				return
			}
			revs <- j.Revision
		}()
	}
	wg.Wait()
	close(revs)
	seen := map[int64]bool{}
	for r := range revs {
		if seen[r] || r < 2 || r > n+1 {
			t.Errorf("revision %d duplicated or out of 2..%d", r, n+1)
		}
		seen[r] = true
	}
	snap, err := s.Snapshot(t.Context())
	if err != nil || snap.Revision != n+1 || len(snap.Members) != n {
		t.Errorf("snapshot revision %d with %d members (%v); want %d, %d", snap.Revision, len(snap.Members), err, n+1, n)
	}
}

// testConcurrentGUIDClaims: ports of two networks claim one GUID at once,
// through two managers sharing the database (each one queues its own changes,
// so only the revision's row lock orders the two). A change reads the ports it
// judges by (the port, the GUID's holder) under that lock, so each sees every
// change committed before it: the first network to get the GUID keeps it,
// every claim from the other network is refused (400, not a constraint
// violation), every accepted change has a revision of its own, and within the
// winning network the GUID moves to the port recorded last (as a migration's
// re-add does). A few rounds, each on a GUID of its own, give the claims many
// chances to overlap.
func testConcurrentGUIDClaims(t *testing.T, managers ...*store.Store) {
	addNetwork(t, managers[0], netA, 101)
	addNetwork(t, managers[0], netB, 102)
	for round := range uint64(3) {
		claimGUID(t, managers, 0x0002c90300000700+round, fmt.Sprintf("r%d-", round))
	}
}

// claimGUID has 16 ports, prefixed, half on netA and half on netB, claim g at
// once, spread over the managers.
func claimGUID(t *testing.T, managers []*store.Store, g uint64, prefix string) {
	t.Helper()
	const n = 16
	type outcome struct {
		port, network string
		revision      int64
		err           error
	}
	outcomes := make(chan outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		network := []string{netA, netB}[i%2]
		s := managers[(i/2)%len(managers)]
		wg.Go(func() {
			id := fmt.Sprintf("%sp%d", prefix, i)
			<-start
			j, err := s.RecordPort(t.Context(), boundPort(id, network, g, "h1"))
			outcomes <- outcome{port: id, network: network, revision: j.Revision, err: err}
		})
	}
	close(start)
	wg.Wait()
	close(outcomes)

	accepted := map[string]int{}
	revisions := map[int64]string{}
	var last outcome
	var ids []string
	for o := range outcomes {
		ids = append(ids, o.port)
		var rej *store.RejectedError
		switch {
		case o.err == nil && revisions[o.revision] != "":
			t.Errorf("ports %s and %s were both recorded at revision %d", revisions[o.revision], o.port, o.revision)
		case o.err == nil:
			revisions[o.revision] = o.port
			accepted[o.network]++
			if o.revision > last.revision {
				last = o
			}
		case !errors.As(o.err, &rej):
			t.Errorf("port %s on %s: %v, want accepted or RejectedError", o.port, o.network, o.err)
		}
	}
	if len(accepted) != 1 || accepted[last.network] != n/2 {
		t.Fatalf("GUID %s: accepted per network = %v, want all %d ports of one network and none of the other",
			fabric.GUID(g), accepted, n/2)
	}
	s := managers[0]
	if got := members(t, s)[fabric.GUID(g)]; got != last.network {
		t.Errorf("GUID %s is a member of %q, want %s", fabric.GUID(g), got, last.network)
	}
	holders := 0
	for _, p := range readPorts(t, s, ids...) {
		if strings.Contains(p, fabric.GUID(g).String()) {
			holders++
			if want := last.port + ":" + last.network + ":"; !strings.HasPrefix(p, want) {
				t.Errorf("GUID %s held by %s, want the port recorded last, %s", fabric.GUID(g), p, last.port)
			}
		}
	}
	if holders != 1 {
		t.Errorf("%d ports hold GUID %s, want 1", holders, fabric.GUID(g))
	}
}

func testMigrateTwice(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	if err := s.DB().Migrate(t.Context()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if r := revision(t, s); r != 1 {
		t.Errorf("revision after re-migrating = %d, want 1", r)
	}
}

// testWake: a change this process commits wakes its applier on every engine
// (PostgreSQL's NOTIFY reaches other processes too; SQLite and MariaDB wake
// only this one, and other replicas poll).
func testWake(t *testing.T, s *store.Store) {
	ctx := t.Context()
	wake := s.Wake(ctx)
	// Drain the wake-up a listener gives when it (re)connects.
	time.Sleep(200 * time.Millisecond)
	select {
	case <-wake:
	default:
	}
	addNetwork(t, s, netA, 101)
	select {
	case <-wake:
	case <-time.After(20 * time.Second):
		t.Fatal("no wake-up after a committed change")
	}
}

func testVLANTaken(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	_, err := s.RecordNetwork(t.Context(), store.NetworkChange{Network: vlanNetwork(netB, 101),
		Operation: store.OpCreateNetwork, CreatedBy: "test", Request: `{}`})
	wantRefused(t, s, err, 1)
	// The network itself may be sent again with its own VLAN ID.
	if _, err := s.RecordNetwork(t.Context(), store.NetworkChange{Network: vlanNetwork(netA, 101),
		Operation: store.OpUpdateNetwork, CreatedBy: "test", Request: `{}`}); err != nil {
		t.Errorf("updating a network with its own VLAN ID: %v", err)
	}
}

// clockAt is s with its clock stopped at now: the store records every time
// with its own clock.
func clockAt(s *store.Store, now time.Time) *store.Store {
	return s.WithClock(func() time.Time { return now })
}

// OpenJobs lists the open jobs up to a revision with the GUID of a port job's
// port; FailJob fails one of them, fenced by the term.
func testOpenJobsAndFailOne(t *testing.T, s *store.Store) {
	ctx := t.Context()
	addNetwork(t, s, netA, 101)                              // job 1, revision 1
	pj, err := addPort(t, s, "p1", netA, 0x0002c90300000101) // job 2, revision 2
	if err != nil {
		t.Fatal(err)
	}
	if _, err := addPort(t, s, "p2", netA, 0x0002c90300000201); err != nil { // job 3, revision 3
		t.Fatal(err)
	}
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.OpenJobs(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ObjectType != store.ObjectNetwork || jobs[0].GUID != nil ||
		jobs[1].ID != pj.ID || jobs[1].ObjectID != "p1" || jobs[1].GUID == nil || *jobs[1].GUID != 0x0002c90300000101 {
		t.Fatalf("OpenJobs(2) = %+v; want the network's job, then p1's with its GUID", jobs)
	}
	if n, err := s.FailJob(ctx, term-1, pj.ID, "late"); err != nil || n != 0 {
		t.Errorf("FailJob with an old term = %d, %v; want 0", n, err)
	}
	if n, err := s.FailJob(ctx, term, pj.ID, "H1's table is full"); err != nil || n != 1 {
		t.Errorf("FailJob = %d, %v; want 1", n, err)
	}
	if j, _ := s.GetJob(ctx, pj.ID); j.Status != store.StatusFailed || j.Error != "H1's table is full" {
		t.Errorf("job %d = %+v", pj.ID, j)
	}
	if n, err := s.FailJob(ctx, term, pj.ID, "again"); err != nil || n != 0 {
		t.Errorf("FailJob of a finished job = %d, %v; want 0", n, err)
	}
	if jobs, err := s.OpenJobs(ctx, 3); err != nil || len(jobs) != 2 || jobs[1].ObjectID != "p2" {
		t.Errorf("OpenJobs(3) = %+v, %v; want the network's job and p2's", jobs, err)
	}
}
