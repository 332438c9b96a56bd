package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// unchangedTests: a change that changes nothing takes no revision and no
// job row of its own, and a principal's usage is read from the jobs.
var unchangedTests = []storeTest{
	{"RemovalThatRemovesNothingTakesNoRevision", testUnchangedRemoval},
	{"RemovalThatRemovesNothingAfterAFailureIsRecorded", testUnchangedAfterFailure},
	{"UnchangedRemovalMovesLastUpdatedOnlyWhenAllIsApplied", testUnchangedLastUpdated},
	{"PrincipalUsageCountsTheJobsOfItsCreator", testPrincipalUsage},
	{"AdditionOfMembersAsRecordedTakesNoRevision", testUnchangedAddition},
	{"CreationOfAPKeyAsRecordedTakesNoRevision", testUnchangedCreation},
}

// removeNothing removes from pkey a GUID that is no member of it, as client.
func removeNothing(t *testing.T, s *store.Store, pkey fabric.PKey, client string) store.Job {
	t.Helper()
	return mustKube(t)(s.RemoveKubernetesGUIDs(t.Context(), store.KubernetesRemoval{PKey: pkey,
		GUIDs: []fabric.GUID{0x0002c90300009999}, CreatedBy: client, Request: "{}"}))
}

// jobCount is how many jobs the database holds, of every status.
func jobCount(t *testing.T, s *store.Store) int64 {
	t.Helper()
	counts, err := s.CountJobsByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// testUnchangedRemoval: removals that remove nothing are answered with the
// pkey's newest job of their client, open or completed, and take neither a
// revision nor a job row; the first removal from a pkey without any job of
// its client is recorded, once.
func testUnchangedRemoval(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	added := mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
	rev, jobs := revision(t, s), jobCount(t, s)
	for i := range 20 {
		if j := removeNothing(t, s, 0x1005, "ib-kubernetes"); j.ID != added.ID || j.Status != store.StatusPending {
			t.Fatalf("removal %d answered job %d (%s), want the pending addition's %d", i, j.ID, j.Status, added.ID)
		}
	}
	if got := revision(t, s); got != rev {
		t.Errorf("20 removals of nothing took the revision from %d to %d", rev, got)
	}
	if got := jobCount(t, s); got != jobs {
		t.Errorf("20 removals of nothing took the jobs from %d to %d", jobs, got)
	}
	// Another client's removal is not answered with this client's job.
	other := removeNothing(t, s, 0x1005, "ufm_pkeys:nico")
	if other.ID == added.ID || other.Revision != rev+1 {
		t.Errorf("another client's removal = job %d at revision %d, want a job of its own at %d", other.ID, other.Revision, rev+1)
	}
	// A pkey never recorded: the first removal is recorded, the next not.
	first := removeNothing(t, s, 0x1abc, "ib-kubernetes")
	if again := removeNothing(t, s, 0x1abc, "ib-kubernetes"); again.ID != first.ID {
		t.Errorf("the second removal from an unknown pkey = job %d, want the first's %d", again.ID, first.ID)
	}
	// A removal that removes a member is a change.
	removed := mustKube(t)(s.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x1005,
		GUIDs: []fabric.GUID{fabric.GUID(guidB)}, CreatedBy: "ib-kubernetes"}))
	if removed.ID == added.ID || removed.Revision != revision(t, s) {
		t.Errorf("a removal of a member = job %d at revision %d (now %d): want a new job and revision",
			removed.ID, removed.Revision, revision(t, s))
	}
}

// testUnchangedAfterFailure: when the pkey's newest job failed, a removal
// that removes nothing is recorded and applied again.
func testUnchangedAfterFailure(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	added := mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.FailJob(ctx, term, added.ID, "the sweep failed"); err != nil || n != 1 {
		t.Fatalf("FailJob = %d, %v", n, err)
	}
	rev := revision(t, s)
	if j := removeNothing(t, s, 0x1005, "ib-kubernetes"); j.ID == added.ID || j.Revision != rev+1 || j.Status != store.StatusPending {
		t.Errorf("removal after a failure = job %d at revision %d (%s), want a new pending job at %d", j.ID, j.Revision, j.Status, rev+1)
	}
}

// testUnchangedLastUpdated: a removal answered with a completed job moves
// last_updated past its time while nothing Kubernetes waits, never back; and
// not while a Kubernetes change waits (its apply moves it).
func testUnchangedLastUpdated(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	at := time.Date(2026, 3, 4, 5, 6, 7, 250e6, time.UTC)
	added := mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clockAt(s, at).CompleteJobs(ctx, term, added.Revision); err != nil {
		t.Fatal(err)
	}
	later := at.Add(3 * time.Second)
	if j := removeNothing(t, clockAt(s, later), 0x1005, "ib-kubernetes"); j.ID != added.ID || j.Status != store.StatusCompleted {
		t.Fatalf("removal = job %d (%s), want the completed %d", j.ID, j.Status, added.ID)
	}
	want := time.Date(2026, 3, 4, 5, 6, 11, 0, time.UTC) // the whole second after later
	if got, err := s.KubernetesLastUpdated(ctx); err != nil || got == nil || !got.Equal(want) {
		t.Fatalf("last_updated = %v, %v after a removal at %v; want %v", got, err, later, want)
	}
	removeNothing(t, clockAt(s, at), 0x1005, "ib-kubernetes") // an earlier clock: never back
	if got, _ := s.KubernetesLastUpdated(ctx); got == nil || !got.Equal(want) {
		t.Errorf("last_updated = %v after a removal with an earlier clock; want %v", got, want)
	}
	// Another pkey's change waits: last_updated stays until it is applied.
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1006, full(0x1111))))
	removeNothing(t, clockAt(s, later.Add(time.Hour)), 0x1005, "ib-kubernetes")
	if got, _ := s.KubernetesLastUpdated(ctx); got == nil || !got.Equal(want) {
		t.Errorf("last_updated = %v while a Kubernetes change waits; want %v", got, want)
	}
}

// testPrincipalUsage: a principal's jobs are counted by their creator, on
// the view's fabric, since the times asked, with their requests' bytes.
func testPrincipalUsage(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	body := `{"pkey":"0x1005","guids":["é"]}` // bytes, not characters
	add := func(now time.Time, pkey fabric.PKey, client string) {
		a := kubeAdd(pkey, full(uint64(pkey)))
		a.CreatedBy, a.Request = client, body
		mustKube(t)(clockAt(s, now).AddKubernetesGUIDs(ctx, a))
	}
	add(at.Add(-2*time.Hour), 0x1001, "ib-kubernetes")
	add(at.Add(-30*time.Minute), 0x1002, "ib-kubernetes")
	add(at.Add(-10*time.Second), 0x1003, "ib-kubernetes")
	add(at.Add(-5*time.Second), 0x1004, "ufm_pkeys:nico")
	u, err := s.PrincipalUsage(ctx, "ib-kubernetes", at.Add(-time.Hour), at.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Usage{RecentJobs: 1, RequestBytes: 2 * int64(len(body))}); u != want {
		t.Errorf("usage = %+v, want %+v (the request is %d bytes)", u, want, len(body))
	}
	if u, err := s.PrincipalUsage(ctx, "networking-mlnx", at.Add(-time.Hour), at.Add(-time.Minute)); err != nil || u != (store.Usage{}) {
		t.Errorf("usage of a principal without jobs = %+v, %v", u, err)
	}
}

// neutronUnchangedTests: a Neutron change that changes nothing takes no
// revision and no job row of its own.
var neutronUnchangedTests = []storeTest{
	{"PortThatChangesNothingTakesNoRevision", testUnchangedPort},
	{"NetworkThatChangesNothingTakesNoRevision", testUnchangedNetwork},
	{"PortThatChangesNothingAfterAFailureIsRecorded", testUnchangedPortAfterFailure},
	{"PortThatChangesNothingAfterALaterChangeIsRecorded", testUnchangedPortAfterLaterChange},
	{"ConcurrentPortsThatChangeNothingTakeOneJob", testUnchangedPortConcurrent},
	{"StaleDeleteOfAPortIsAnsweredWithTheMove", testUnchangedStaleDelete},
	{"CancelledPortThatChangesNothingWritesNothing", testUnchangedCancelled},
}

func init() {
	databaseTests = append(databaseTests, struct {
		name        string
		fn          func(t *testing.T, db Database, s *store.Store)
		notOnSQLite bool
	}{"PortsThatChangeNothingOnTwoManagersTakeOneJob", func(t *testing.T, db Database, s *store.Store) {
		testUnchangedTwoManagers(t, s, OpenDatabase(t, db))
	}, false})
}

// samePort is port p1 on netA with guid g, bound to h1, as client.
func samePort(t *testing.T, s *store.Store, g uint64, client string) store.Job {
	t.Helper()
	c := boundPort("p1", netA, g, "h1")
	c.CreatedBy = client
	return mustPort(t, s, c)
}

// completeAll completes every open job, as the applier does once OpenSM has
// applied the current revision.
func completeAll(t *testing.T, s *store.Store) {
	t.Helper()
	term, err := s.NewTerm(t.Context(), "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompleteJobs(t.Context(), term, revision(t, s)); err != nil {
		t.Fatal(err)
	}
}

// wantSame fails the test unless the revision and the jobs are still rev and
// jobs: what changes nothing took neither.
func wantSame(t *testing.T, s *store.Store, what string, rev, jobs int64) {
	t.Helper()
	if got := revision(t, s); got != rev {
		t.Errorf("%s took the revision from %d to %d", what, rev, got)
	}
	if got := jobCount(t, s); got != jobs {
		t.Errorf("%s took the jobs from %d to %d", what, jobs, got)
	}
}

// testUnchangedPort: a port's PUTs (or POSTs) as recorded are answered with
// its newest job of their client, open then completed, and take neither a
// revision nor a job row; another client's, or one that changes the port,
// is recorded.
func testUnchangedPort(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	added := samePort(t, s, 0x0002c9030000a001, "test")
	rev, jobs := revision(t, s), jobCount(t, s)
	for i := range 20 {
		if j := samePort(t, s, 0x0002c9030000a001, "test"); j.ID != added.ID || j.Status != store.StatusPending {
			t.Fatalf("PUT %d answered job %d (%s), want the pending addition's %d", i, j.ID, j.Status, added.ID)
		}
	}
	wantSame(t, s, "20 PUTs of the port as recorded", rev, jobs)
	completeAll(t, s)
	if j := samePort(t, s, 0x0002c9030000a001, "test"); j.ID != added.ID || j.Status != store.StatusCompleted {
		t.Errorf("PUT after the apply answered job %d (%s), want the completed %d", j.ID, j.Status, added.ID)
	}
	wantSame(t, s, "a PUT after the apply", rev, jobs)
	// An unbound port, which holds no membership, likewise.
	unbound := store.PortChange{Port: store.Port{ID: "p2", NetworkID: netA}, Operation: store.OpAddPort,
		CreatedBy: "test", Request: `{}`}
	first := mustPort(t, s, unbound)
	if again := mustPort(t, s, unbound); again.ID != first.ID {
		t.Errorf("the second POST of an unbound port = job %d, want the first's %d", again.ID, first.ID)
	}
	// Another client's PUT is not answered with this client's job.
	if other := samePort(t, s, 0x0002c9030000a001, "other"); other.ID == added.ID {
		t.Errorf("another client's PUT answered with job %d of client test", other.ID)
	}
	// A PUT that changes the port's host is a change.
	c := boundPort("p1", netA, 0x0002c9030000a001, "h2")
	rev = revision(t, s)
	if moved := mustPort(t, s, c); moved.Revision != rev+1 || moved.Status != store.StatusPending {
		t.Errorf("a PUT to another host = job %d at revision %d (%s), want a new pending job at %d",
			moved.ID, moved.Revision, moved.Status, rev+1)
	}
}

// testUnchangedNetwork: a network's PUTs as recorded are answered with its
// newest job of their client; one that renames it is recorded.
func testUnchangedNetwork(t *testing.T, s *store.Store) {
	created := addNetwork(t, s, netA, 101)
	rev, jobs := revision(t, s), jobCount(t, s)
	update := store.NetworkChange{Network: vlanNetwork(netA, 101), Operation: store.OpUpdateNetwork,
		CreatedBy: "test", Request: `{"padding":"` + strings.Repeat(" ", 1000) + `"}`}
	for i := range 20 {
		j, err := s.RecordNetwork(t.Context(), update)
		if err != nil || j.ID != created.ID {
			t.Fatalf("PUT %d = job %d, %v; want the creation's %d", i, j.ID, err, created.ID)
		}
	}
	wantSame(t, s, "20 PUTs of the network as recorded", rev, jobs)
	update.Network.Name = "renamed"
	if j, err := s.RecordNetwork(t.Context(), update); err != nil || j.ID == created.ID || j.Revision != rev+1 {
		t.Errorf("a rename = job %d at revision %d, %v; want a new job at %d", j.ID, j.Revision, err, rev+1)
	}
}

// testUnchangedPortAfterFailure: when the port's newest job failed, a PUT
// as recorded is recorded and applied again.
func testUnchangedPortAfterFailure(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	added := samePort(t, s, 0x0002c9030000a001, "test")
	term, err := s.NewTerm(t.Context(), "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.FailJob(t.Context(), term, added.ID, "the sweep failed"); err != nil || n != 1 {
		t.Fatalf("FailJob = %d, %v", n, err)
	}
	rev := revision(t, s)
	if j := samePort(t, s, 0x0002c9030000a001, "test"); j.ID == added.ID || j.Revision != rev+1 || j.Status != store.StatusPending {
		t.Errorf("PUT after a failure = job %d at revision %d (%s), want a new pending job at %d", j.ID, j.Revision, j.Status, rev+1)
	}
}

// testUnchangedPortAfterLaterChange: a change of the port's rows after its
// client's newest job (another client's change to what it asks, its network
// moved to another VLAN) is not covered by that job: the client's PUT as
// recorded is recorded, not told Completed of what is maybe not applied.
func testUnchangedPortAfterLaterChange(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	samePort(t, s, 0x0002c9030000a001, "test")
	moved := boundPort("p1", netA, 0x0002c9030000a001, "h2")
	moved.CreatedBy = "other"
	mustPort(t, s, moved)
	mustPort(t, s, boundPort("p1", netA, 0x0002c9030000a001, "h1")) // client test's own, back to h1
	completeAll(t, s)
	moved.Port.Host = "h1" // client other asks what client test's job recorded
	rev := revision(t, s)
	if j := mustPort(t, s, moved); j.Revision != rev+1 || j.Status != store.StatusPending {
		t.Errorf("PUT after another client's change = job %d at revision %d (%s), want a new pending job at %d",
			j.ID, j.Revision, j.Status, rev+1)
	}
	// Its network moves to VLAN 103: the port's membership moves with the
	// network's job, after the port's.
	completeAll(t, s)
	if _, err := s.RecordNetwork(t.Context(), store.NetworkChange{Network: vlanNetwork(netA, 103),
		Operation: store.OpUpdateNetwork, CreatedBy: "test", Request: `{}`}); err != nil {
		t.Fatal(err)
	}
	rev = revision(t, s)
	if j := samePort(t, s, 0x0002c9030000a001, "test"); j.Revision != rev+1 || j.Status != store.StatusPending {
		t.Errorf("PUT after its network moved = job %d at revision %d (%s), want a new pending job at %d",
			j.ID, j.Revision, j.Status, rev+1)
	}
}

// testUnchangedPortConcurrent: the same new port POSTed by 16 callers at
// once takes one revision and one job, which answers every caller (the
// changes a group commits together read each other's writes); a port moved
// back and forth meanwhile is answered, each time, with a job of what was
// asked.
func testUnchangedPortConcurrent(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	rev, jobs := revision(t, s), jobCount(t, s)
	answers := make([]store.Job, 16)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			c := boundPort("p1", netA, 0x0002c9030000a001, "h1")
			j, err := s.RecordPort(t.Context(), c)
			if err != nil {
				t.Errorf("RecordPort: %v", err)
			}
			answers[i] = j
		})
	}
	wg.Wait()
	for i, j := range answers {
		if j.ID != answers[0].ID {
			t.Errorf("caller %d answered job %d, caller 0 job %d: want one job", i, j.ID, answers[0].ID)
		}
	}
	if got := revision(t, s); got != rev+1 {
		t.Errorf("16 identical POSTs took the revision from %d to %d, want %d", rev, got, rev+1)
	}
	if got := jobCount(t, s); got != jobs+1 {
		t.Errorf("16 identical POSTs took the jobs from %d to %d, want %d", jobs, got, jobs+1)
	}
	guids := []uint64{0x0002c9030000a001, 0x0002c9030000a002}
	for i := range answers {
		wg.Go(func() {
			g := fabric.GUID(guids[i%2])
			j, err := s.RecordPort(t.Context(), boundPort("p1", netA, uint64(g), "h1"))
			if err != nil {
				t.Errorf("RecordPort: %v", err)
			} else if !strings.Contains(j.Description, "GUID "+g.String()) {
				t.Errorf("a PUT of GUID %s answered job %d: %q", g, j.ID, j.Description)
			}
		})
	}
	wg.Wait()
}

// testUnchangedAddition: additions of GUIDs that are members already, with
// the membership, index0, IPoIB and QoS they ask, are answered with the
// pkey's newest job of their client and take neither a revision nor a job
// row; one that asks another membership, or IPoIB, or QoS, is recorded, and
// so is one after a failure.
func testUnchangedAddition(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	added := mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidA), limited(guidB))))
	rev, jobs := revision(t, s), jobCount(t, s)
	yes, mtu := true, 4
	same := []store.KubernetesAddition{kubeAdd(0x1005, full(guidA)), kubeAdd(0x1005, limited(guidB), full(guidA))}
	withIPoIB := kubeAdd(0x1005, full(guidA))
	withIPoIB.IPoIB = &yes
	same = append(same, withIPoIB)
	for i, a := range same {
		if j := mustKube(t)(s.AddKubernetesGUIDs(ctx, a)); j.ID != added.ID || j.Status != store.StatusPending {
			t.Fatalf("addition %d as recorded answered job %d (%s), want the pending %d", i, j.ID, j.Status, added.ID)
		}
	}
	wantSame(t, s, "additions as recorded", rev, jobs)
	withQoS := kubeAdd(0x1005, full(guidA))
	withQoS.QoS = store.QoSChange{MTULimit: &mtu}
	for i, a := range []store.KubernetesAddition{kubeAdd(0x1005, limited(guidA)), withQoS,
		kubeAdd(0x1005, store.KubernetesMember{GUID: fabric.GUID(guidB), Membership: fabric.Limited, Index0: true})} {
		rev := revision(t, s)
		if j := mustKube(t)(s.AddKubernetesGUIDs(ctx, a)); j.Revision != rev+1 {
			t.Errorf("change %d = job %d at revision %d, want a new one at %d", i, j.ID, j.Revision, rev+1)
		}
	}
	// The QoS now set, asking it again is no change.
	rev, jobs = revision(t, s), jobCount(t, s)
	mustKube(t)(s.AddKubernetesGUIDs(ctx, withQoS))
	wantSame(t, s, "an addition with the QoS recorded", rev, jobs)
	// After a failure, recorded again.
	last := mustKube(t)(s.AddKubernetesGUIDs(ctx, withQoS))
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.FailJob(ctx, term, last.ID, "the sweep failed"); err != nil || n != 1 {
		t.Fatalf("FailJob(%d) = %d, %v", last.ID, n, err)
	}
	if j := mustKube(t)(s.AddKubernetesGUIDs(ctx, withQoS)); j.ID == last.ID || j.Revision != rev+1 {
		t.Errorf("addition after a failure = job %d at revision %d, want a new one at %d", j.ID, j.Revision, rev+1)
	}
}

// testUnchangedCreation: creating a pkey recorded with the IPoIB asked is
// answered with its newest job of its client; with another IPoIB it is a
// change.
func testUnchangedCreation(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	create := store.KubernetesCreation{PKey: 0x1007, IPoIB: true, CreatedBy: "ib-kubernetes", Request: "{}"}
	created := mustKube(t)(s.CreateKubernetesPKey(ctx, create))
	rev, jobs := revision(t, s), jobCount(t, s)
	for i := range 10 {
		if j := mustKube(t)(s.CreateKubernetesPKey(ctx, create)); j.ID != created.ID {
			t.Fatalf("creation %d as recorded answered job %d, want %d", i, j.ID, created.ID)
		}
	}
	wantSame(t, s, "10 creations as recorded", rev, jobs)
	create.IPoIB = false
	if j := mustKube(t)(s.CreateKubernetesPKey(ctx, create)); j.ID == created.ID || j.Revision != rev+1 {
		t.Errorf("creation with another ip_over_ib = job %d at revision %d, want a new one at %d", j.ID, j.Revision, rev+1)
	}
}

// testUnchangedStaleDelete: a DELETE naming a GUID the port no longer holds
// is answered with the port's newest job of its client, the move off that
// GUID, and takes neither a revision nor a job row; without a job of its
// client it is recorded, Completed at once.
func testUnchangedStaleDelete(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	samePort(t, s, 0x0002c9030000a001, "test")
	moved := samePort(t, s, 0x0002c9030000a002, "test")
	rev, jobs := revision(t, s), jobCount(t, s)
	stale := store.PortRemoval{PortID: "p1", GUID: guid(0x0002c9030000a001), CreatedBy: "test", Request: "{}"}
	for i := range 5 {
		if j, err := s.RemovePort(t.Context(), stale); err != nil || j.ID != moved.ID {
			t.Fatalf("stale DELETE %d = job %d, %v; want the move's %d", i, j.ID, err, moved.ID)
		}
	}
	wantSame(t, s, "5 stale DELETEs", rev, jobs)
	stale.CreatedBy = "other"
	if j, err := s.RemovePort(t.Context(), stale); err != nil || j.ID == moved.ID || j.Status != store.StatusCompleted {
		t.Errorf("another client's stale DELETE = job %d (%s), %v; want a completed job of its own", j.ID, j.Status, err)
	}
}

// testUnchangedCancelled: a change as recorded whose caller gave up is
// answered with its error and writes nothing; sent again, it is answered
// with the port's job.
func testUnchangedCancelled(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	added := samePort(t, s, 0x0002c9030000a001, "test")
	rev, jobs := revision(t, s), jobCount(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if j, err := s.RecordPort(ctx, boundPort("p1", netA, 0x0002c9030000a001, "h1")); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled PUT as recorded = job %d, %v; want context.Canceled", j.ID, err)
	}
	wantSame(t, s, "a cancelled PUT", rev, jobs)
	if j := samePort(t, s, 0x0002c9030000a001, "test"); j.ID != added.ID {
		t.Errorf("the PUT sent again = job %d, want %d", j.ID, added.ID)
	}
}

// testUnchangedTwoManagers: the same new port POSTed 8 times on each of two
// managers on one database at once takes one revision and one job: the
// revision's lock orders their changes, the first records, the others find
// its job.
func testUnchangedTwoManagers(t *testing.T, a, b *store.Store) {
	addNetwork(t, a, netA, 101)
	rev, jobs := revision(t, a), jobCount(t, a)
	answers := make([]store.Job, 16)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			s := a
			if i%2 == 1 {
				s = b
			}
			j, err := s.RecordPort(t.Context(), boundPort("p1", netA, 0x0002c9030000a001, "h1"))
			if err != nil {
				t.Errorf("RecordPort on manager %d: %v", i%2, err)
			}
			answers[i] = j
		})
	}
	wg.Wait()
	for i, j := range answers {
		if j.ID != answers[0].ID {
			t.Errorf("caller %d answered job %d, caller 0 job %d: want one job", i, j.ID, answers[0].ID)
		}
	}
	if got := revision(t, a); got != rev+1 {
		t.Errorf("16 identical POSTs on two managers took the revision from %d to %d, want %d", rev, got, rev+1)
	}
	if got := jobCount(t, a); got != jobs+1 {
		t.Errorf("16 identical POSTs on two managers took the jobs from %d to %d, want %d", jobs, got, jobs+1)
	}
}
