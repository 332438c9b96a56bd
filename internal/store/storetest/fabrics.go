package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// Two fabrics on one database: the default one serves physnet ibnet, the
// storage one physnet storage. Each case runs on a store of its own.
var twoFabricTests = []storeTest{
	{"SameVLANOnTwoFabrics", testSameVLANOnTwoFabrics},
	{"SameGUIDOnTwoFabrics", testSameGUIDOnTwoFabrics},
	{"OneGUIDTwiceOnOneFabricIsRejected", testGUIDTwiceOnOneFabric},
	{"FabricsHaveTheirOwnRevisionAndLock", testFabricsIndependent},
	{"PortCannotMoveBetweenFabrics", testPortMovesFabric},
	{"NetworkOnNoFabric", testNetworkOnNoFabric},
	{"NetworkRecreatedOnAnotherFabric", testNetworkRecreatedOnAnotherFabric},
	{"ConcurrentChangesOnTwoFabrics", testConcurrentChangesOnTwoFabrics},
	{"RoutedChangeKeepsTheCallersClock", testRoutedChangeKeepsTheCallersClock},
	{"RefusalsNameTheFabricsSection", testRefusalsNameTheFabricsSection},
	{"WakeAfterAChangeOfItsFabric", func(t *testing.T, s *store.Store) {
		// The storage fabric's waiters wake after a storage change, recorded
		// through the default view (routed by physnet).
		wake := s.DB().Fabric(storageFabric).Wake(t.Context())
		// Drain the wake-up a listener gives when it (re)connects.
		time.Sleep(200 * time.Millisecond)
		select {
		case <-wake:
		default:
		}
		mustNetwork(t, s, storageNetwork(netC, 100))
		select {
		case <-wake:
		case <-time.After(20 * time.Second):
			t.Fatal("no wake-up of the storage fabric after its change")
		}
	}},
}

const storageFabric = "storage"

// OpenFabrics opens (and migrates) a new database of engine as a manager of
// the default fabric (physnet ibnet) and the storage fabric (physnet storage).
func OpenFabrics(t testing.TB, engine string) *store.DB {
	t.Helper()
	return OpenFabricsDatabase(t, NewMigratedDatabase(t, engine))
}

// OpenFabricsDatabase opens (and migrates) an existing test database as
// OpenFabrics does.
func OpenFabricsDatabase(t testing.TB, db Database) *store.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := storeopen.OpenFabrics(ctx, db.Engine, db.DSN, true, []store.FabricRules{
		{Name: store.DefaultFabric, Rules: store.Rules{PhysicalNetworks: []string{"ibnet"}}},
		{Name: storageFabric, Rules: store.Rules{PhysicalNetworks: []string{storageFabric}}},
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("open %s store of two fabrics: %v", db.Engine, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func storageNetwork(id string, vlan int64) store.NetworkSpec {
	return store.NetworkSpec{ID: id, Name: "net " + id[:8], Type: "vlan", PhysicalNetwork: storageFabric, SegmentationID: &vlan}
}

// snapshotOf reads fabric's snapshot from scratch.
func snapshotOf(t *testing.T, s *store.Store, fabric string) store.Snapshot {
	t.Helper()
	var c store.SnapshotCache
	snap, err := s.DB().Fabric(fabric).ReadSnapshot(t.Context(), &c)
	if err != nil {
		t.Fatalf("ReadSnapshot of fabric %s: %v", fabric, err)
	}
	return snap
}

// networksOf are the ids and pkeys of a snapshot's networks.
func networksOf(snap store.Snapshot) map[string]string {
	out := map[string]string{}
	for _, n := range snap.Networks {
		out[n.ID] = "flat"
		if n.PKey != nil {
			out[n.ID] = n.PKey.String()
		}
	}
	return out
}

// testSameVLANOnTwoFabrics: VLAN 100 on each fabric's physnet is two
// partitions, each in its own fabric's snapshot only, each at revision 1 of
// its own fabric; either view records either network (routing by physnet).
func testSameVLANOnTwoFabrics(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 100)
	mustNetwork(t, s, storageNetwork(netC, 100)) // on the default view: routed
	for fabric, want := range map[string]string{store.DefaultFabric: netA, storageFabric: netC} {
		got := networksOf(snapshotOf(t, s, fabric))
		if len(got) != 1 || got[want] != "0x0064" {
			t.Errorf("fabric %s's networks = %v, want only %s with pkey 0x0064", fabric, got, want)
		}
		if rev, err := s.DB().Fabric(fabric).Revision(t.Context()); err != nil || rev != 1 {
			t.Errorf("fabric %s's revision = %d, %v; want 1", fabric, rev, err)
		}
	}
	if _, err := recordNetwork(s.DB().Fabric(storageFabric), t, vlanNetwork(netB, 100)); !isRejected(err) {
		t.Errorf("a second VLAN 100 on the default fabric = %v, want rejected", err)
	}
}

// testSameGUIDOnTwoFabrics: one GUID in a port on each fabric (simulated
// hosts repeat GUIDs) is a member on each.
func testSameGUIDOnTwoFabrics(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 100)
	mustNetwork(t, s, storageNetwork(netC, 100))
	mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	mustPort(t, s, boundPort("p2", netC, guidA, "h2"))
	for fabric, port := range map[string]string{store.DefaultFabric: "p1", storageFabric: "p2"} {
		m := snapshotOf(t, s, fabric).Members
		if len(m) != 1 || m[0].PortID != port || uint64(m[0].GUID) != guidA {
			t.Errorf("fabric %s's members = %+v, want %s holding the GUID", fabric, m, port)
		}
	}
}

// testGUIDTwiceOnOneFabric: within a fabric a GUID is one port's.
func testGUIDTwiceOnOneFabric(t *testing.T, s *store.Store) {
	mustNetwork(t, s, storageNetwork(netC, 100))
	mustNetwork(t, s, storageNetwork(netB, 101))
	mustPort(t, s, boundPort("p1", netC, guidA, "h1"))
	if _, err := s.RecordPort(t.Context(), boundPort("p2", netB, guidA, "h2")); !isRejected(err) {
		t.Errorf("the storage fabric's GUID on a second port = %v, want rejected", err)
	}
}

// testFabricsIndependent: a change on one fabric moves its revision only;
// each fabric's applier lock, and HA lease, is its own.
func testFabricsIndependent(t *testing.T, s *store.Store) {
	ctx := t.Context()
	addNetwork(t, s, netA, 100)
	addNetwork(t, s, netB, 101)
	storage := s.DB().Fabric(storageFabric)
	if rev, err := storage.Revision(ctx); err != nil || rev != 0 {
		t.Errorf("storage revision after two default changes = %d, %v; want 0", rev, err)
	}
	l1, err := s.TryLock(ctx)
	if err != nil || l1 == nil {
		t.Fatalf("default TryLock = %v, %v", l1, err)
	}
	defer l1.Release(ctx)
	l2, err := storage.TryLock(ctx)
	if err != nil || l2 == nil {
		t.Fatalf("storage TryLock while the default's is held = %v, %v; want it taken", l2, err)
	}
	defer l2.Release(ctx)
	if l3, err := storage.TryLock(ctx); err != nil || l3 != nil {
		t.Errorf("second storage TryLock = %v, %v; want nil, nil", l3, err)
	}
	if s.DB().Name() == config.EngineSQLite {
		return // no lease
	}
	for _, c := range []struct {
		view   *store.Store
		holder string
	}{{s, "A"}, {storage, "B"}} {
		l, err := c.view.Leases()
		if err != nil {
			t.Fatal(err)
		}
		if got, won, err := l.TakeLease(ctx, c.holder, time.Minute); err != nil || !won || got.Holder != c.holder {
			t.Errorf("fabric %s: TakeLease(%s) = %+v, %v, %v; want taken", c.view.FabricName(), c.holder, got, won, err)
		}
	}
}

// testPortMovesFabric: a port of one fabric sent on a network of the other
// is refused, naming both fabrics, and stays where it was.
func testPortMovesFabric(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 100)
	mustNetwork(t, s, storageNetwork(netC, 200))
	mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	_, err := s.RecordPort(t.Context(), boundPort("p1", netC, guidB, "h1"))
	if !isRejected(err) || !strings.Contains(err.Error(), store.DefaultFabric) || !strings.Contains(err.Error(), storageFabric) {
		t.Fatalf("port moved to the storage fabric = %v, want rejected naming both fabrics", err)
	}
	if m := snapshotOf(t, s, store.DefaultFabric).Members; len(m) != 1 || m[0].PortID != "p1" {
		t.Errorf("default members after the refusal = %+v, want p1", m)
	}
	if m := snapshotOf(t, s, storageFabric).Members; len(m) != 0 {
		t.Errorf("storage members after the refusal = %+v, want none", m)
	}
}

// testNetworkOnNoFabric: a network on a physnet no fabric serves is
// recorded, without a partition, its job complete at once.
func testNetworkOnNoFabric(t *testing.T, s *store.Store) {
	j := mustNetwork(t, s.DB().Fabric(storageFabric), netSpec(netA, "vlan", "elsewhere", vlanID(100)))
	if j.Status != store.StatusCompleted {
		t.Errorf("job of a network on no fabric = %s, want Completed", j.Status)
	}
	for _, fabric := range []string{store.DefaultFabric, storageFabric} {
		if got := networksOf(snapshotOf(t, s, fabric)); len(got) != 0 {
			t.Errorf("fabric %s's partitions = %v, want none", fabric, got)
		}
	}
	if got, err := s.GetJob(t.Context(), j.ID); err != nil || got.ID != j.ID {
		t.Errorf("GetJob = %+v, %v", got, err)
	}
}

// testNetworkRecreatedOnAnotherFabric: a network deleted on one fabric and
// created again (same id) on the other: its ports follow it, its removal is
// the new fabric's, and the old fabric keeps nothing of it.
func testNetworkRecreatedOnAnotherFabric(t *testing.T, s *store.Store) {
	ctx := t.Context()
	addNetwork(t, s, netA, 100)
	if _, err := s.RemoveNetwork(ctx, store.NetworkRemoval{NetworkID: netA, CreatedBy: "test", Request: `{}`}); err != nil {
		t.Fatal(err)
	}
	mustNetwork(t, s, storageNetwork(netA, 100))
	mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	if m := snapshotOf(t, s, storageFabric).Members; len(m) != 1 {
		t.Errorf("storage members = %+v, want p1", m)
	}
	j, err := s.RemovePort(ctx, store.PortRemoval{PortID: "p1", CreatedBy: "test", Request: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetJob(ctx, j.ID); err != nil || got.Fabric != storageFabric {
		t.Errorf("the port removal's job = %+v, %v; want the storage fabric's", got, err)
	}
	if got := networksOf(snapshotOf(t, s, store.DefaultFabric)); len(got) != 0 {
		t.Errorf("default networks = %v, want none", got)
	}
}

func isRejected(err error) bool {
	var r *store.RejectedError
	return errors.As(err, &r)
}

// testConcurrentChangesOnTwoFabrics: changes sent at once on two fabrics,
// which do not wait for each other's revision, all record, with ids of their
// own: job ids are given across fabrics (networking-mlnx reads a job by its id
// alone), and within a fabric in the order of its revisions.
func testConcurrentChangesOnTwoFabrics(t *testing.T, s *store.Store) {
	// Workers on each fabric send changes one after another, so that many
	// groups of each fabric commit while the other's are open.
	const workers, rounds, each = 4, 30, 4 * 30
	type result struct {
		fabric string
		job    store.Job
		err    error
	}
	results := make(chan result, 2*each)
	var wg sync.WaitGroup
	for w := range workers {
		for f, physnet := range []string{"ibnet", storageFabric} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					i := w*rounds + r
					vlan := int64(100 + i)
					spec := store.NetworkSpec{ID: fmt.Sprintf("%08x-0000-4000-8000-00000000000%d", i, f),
						Name: "concurrent", Type: "vlan", PhysicalNetwork: physnet, SegmentationID: &vlan}
					j, err := recordNetwork(s, t, spec)
					results <- result{physnet, j, err}
				}
			}()
		}
	}
	wg.Wait()
	close(results)
	ids := map[int64]bool{}
	byRevision := map[string]map[int64]int64{} // fabric's physnet: revision -> job id
	for r := range results {
		if r.err != nil {
			t.Errorf("a change on %s: %v", r.fabric, r.err)
			continue
		}
		if ids[r.job.ID] {
			t.Errorf("job id %d given twice", r.job.ID)
		}
		ids[r.job.ID] = true
		if byRevision[r.fabric] == nil {
			byRevision[r.fabric] = map[int64]int64{}
		}
		byRevision[r.fabric][r.job.Revision] = r.job.ID
	}
	for fabric, jobs := range byRevision {
		revs := slices.Sorted(maps.Keys(jobs))
		if len(revs) != each {
			t.Errorf("%s: %d revisions, want %d", fabric, len(revs), each)
		}
		for i := 1; i < len(revs); i++ {
			if jobs[revs[i]] <= jobs[revs[i-1]] {
				t.Errorf("%s: the job of revision %d has id %d, not above revision %d's %d",
					fabric, revs[i], jobs[revs[i]], revs[i-1], jobs[revs[i-1]])
			}
		}
	}
}

// testRoutedChangeKeepsTheCallersClock: a change routed to the caller's own
// fabric runs on the caller's view, with its clock (WithClock) and rules,
// not on the fabric's configured view.
func testRoutedChangeKeepsTheCallersClock(t *testing.T, s *store.Store) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, v := range []*store.Store{s, s.DB().Fabric(storageFabric)} {
		spec := vlanNetwork(netA, 100)
		if v.FabricName() == storageFabric {
			spec = storageNetwork(netC, 100)
		}
		j, err := recordNetwork(v.WithClock(func() time.Time { return at }), t, spec)
		if err != nil {
			t.Fatalf("fabric %s: %v", v.FabricName(), err)
		}
		if !j.CreatedAt.Equal(at) {
			t.Errorf("fabric %s: the job was created at %v, want the caller's clock's %v", v.FabricName(), j.CreatedAt, at)
		}
	}
}

// testRefusalsNameTheFabricsSection: a refusal by a fabric's setting names the
// section the operator sets it in: [opensm] for the default fabric,
// [fabric:storage] for the storage fabric.
func testRefusalsNameTheFabricsSection(t *testing.T, s *store.Store) {
	flat := int64(store.DefaultFlatPKey)
	for spec, want := range map[store.NetworkSpec]string{
		{ID: netA, Name: "a", Type: "vlan", PhysicalNetwork: "ibnet", SegmentationID: &flat}:       "([opensm] flat_pkey)",
		{ID: netC, Name: "c", Type: "vlan", PhysicalNetwork: storageFabric, SegmentationID: &flat}: "([fabric:storage] flat_pkey)",
	} {
		_, err := recordNetwork(s, t, spec)
		if !isRejected(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("VLAN %d on %s: %v, want a refusal naming %s", flat, spec.PhysicalNetwork, err, want)
		}
	}
}
