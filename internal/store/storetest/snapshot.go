package storetest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

var snapshotTests = []storeTest{
	{"IncrementalSnapshotIsTheFullOne", testIncrementalSnapshot},
	{"IncrementalSnapshotReadsWhatChanged", testIncrementalSnapshotReads},
}

// ChangeWorld is the small universe random changes draw from, so that they
// collide: GUIDs taken by another port or by Kubernetes, VLANs of another
// network, the pkey 0x1010 and GUID 0x0002c90300001039 a template's static
// partition has in the suite, networks deleted under their ports. The changes
// use physnet "ibnet" (managed) and "other", and Kubernetes pkeys in
// 0x1000-0x1fff.
type ChangeWorld struct {
	networks []string
	ports    []string
	guids    []uint64
	kpkeys   []fabric.PKey
}

// NewChangeWorld is the universe of the compliance suite's random changes.
func NewChangeWorld() ChangeWorld {
	w := ChangeWorld{kpkeys: []fabric.PKey{0x1001, 0x1002, 0x1003, 0x1010}}
	for i := range 6 {
		w.networks = append(w.networks, fmt.Sprintf("%08x-1111-4a7b-8c9d-0e1f2a3b4c5d", 0xa0000000+i))
	}
	for i := range 200 {
		w.ports = append(w.ports, fmt.Sprintf("port-%02d", i))
	}
	for i := range 150 {
		w.guids = append(w.guids, 0x0002c90300001000+uint64(i))
	}
	w.guids = append(w.guids, guidC) // the static partition's member
	return w
}

// Networks records every network of the world, one flat, the others VLAN
// networks of the managed physnet: the changes then find networks to use.
func (w ChangeWorld) Networks(t *testing.T, s *store.Store) {
	for i, id := range w.networks {
		spec := netSpec(id, "vlan", "ibnet", vlanID(int64(100+i)))
		if i == 0 {
			spec.Type, spec.SegmentationID = "flat", nil
		}
		mustNetwork(t, s, spec)
	}
}

// Change makes one random change through s; refusals are part of the
// sequence.
func (w ChangeWorld) Change(t *testing.T, s *store.Store, r *rand.Rand) {
	ctx := t.Context()
	pick := func(n int) int { return r.IntN(n) }
	g := func() *fabric.GUID {
		if pick(6) == 0 {
			return nil
		}
		return guid(w.guids[pick(len(w.guids))])
	}
	kmembers := func() []store.KubernetesMember {
		var out []store.KubernetesMember
		for range 1 + pick(3) {
			// From a third of the GUIDs: the rest stay the ports'.
			m := store.KubernetesMember{GUID: *guid(w.guids[pick(len(w.guids)/3)]), Membership: fabric.Limited}
			if pick(2) == 0 {
				m.Membership, m.Index0 = fabric.Full, pick(2) == 0
			}
			out = append(out, m)
		}
		return out
	}
	var err error
	switch op := pick(100); {
	case op < 10:
		spec := netSpec(w.networks[pick(len(w.networks))], "vlan", "ibnet", vlanID(int64(100+pick(8))))
		switch pick(5) {
		case 0:
			spec.Type, spec.SegmentationID = "flat", nil
		case 1:
			spec.PhysicalNetwork = "other" // not managed
		case 2:
			spec.SegmentationID = vlanID(0x1010) // the static partition's: refused
		}
		_, err = recordNetwork(s, t, spec)
	case op < 12:
		_, err = s.RemoveNetwork(ctx, store.NetworkRemoval{NetworkID: w.networks[pick(len(w.networks))], CreatedBy: "test", Request: "{}"})
	case op < 58:
		c := boundPort(w.ports[pick(len(w.ports))], w.networks[pick(len(w.networks))], 0, "host")
		c.Port.GUID = g()
		if pick(8) == 0 {
			c.Port.Host = "" // unbound: no membership
		}
		_, err = s.RecordPort(ctx, c)
	case op < 60:
		err = w.adopt(t, s, pick)
	case op < 62:
		keep := []fabric.GUID{fabric.GUID(w.guids[pick(len(w.guids))])}
		_, err = s.ReleaseAdoptedMembers(ctx, store.AdoptedRelease{PKey: w.adoptedPKey(pick), Keep: keep[:pick(2)], CreatedBy: "test"})
	case op < 75:
		_, err = s.RemovePort(ctx, store.PortRemoval{PortID: w.ports[pick(len(w.ports))], CreatedBy: "test", Request: "{}"})
	case op < 85:
		_, err = s.AddKubernetesGUIDs(ctx, kubeAdd(w.kpkeys[pick(len(w.kpkeys))], kmembers()...))
	case op < 92:
		var guids []fabric.GUID
		for _, m := range kmembers() {
			guids = append(guids, m.GUID)
		}
		_, err = s.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: w.kpkeys[pick(len(w.kpkeys))], GUIDs: guids,
			CreatedBy: "ib-kubernetes", Request: "{}"})
	case op < 96:
		_, err = s.CreateKubernetesPKey(ctx, store.KubernetesCreation{PKey: w.kpkeys[pick(len(w.kpkeys))], IPoIB: pick(2) == 0,
			CreatedBy: "ib-kubernetes", Request: "{}"})
	default:
		_, err = s.DeleteKubernetesPKey(ctx, store.KubernetesDeletion{PKey: w.kpkeys[pick(len(w.kpkeys))],
			CreatedBy: "ib-kubernetes", Request: "{}"})
	}
	if err != nil && store.IsUnavailable(err) {
		t.Errorf("change: %v", err) // a refusal is expected; the database going away is not
	}
}

// adoptedPKey is a pkey of the adoptions: a network's (VLAN 100-103, which
// then owns it) or one of no owner.
func (w ChangeWorld) adoptedPKey(pick func(int) int) fabric.PKey {
	return []fabric.PKey{100, 101, 102, 103, 0x0300, 0x0301, 0x0302}[pick(7)]
}

// adopt adopts one partition of a few of the world's GUIDs: those a port or
// a Kubernetes pkey holds are left out, and a partition left without
// members is not adopted.
func (w ChangeWorld) adopt(t *testing.T, s *store.Store, pick func(int) int) error {
	pkey := w.adoptedPKey(pick)
	text := fmt.Sprintf("adopted_%04x=%s :", uint16(pkey), pkey) // one name a pkey, as in a running file
	listed := map[uint64]bool{}
	for range 1 + pick(3) {
		g := w.guids[pick(len(w.guids))]
		if listed[g] {
			continue // a statement lists a GUID once
		}
		if len(listed) > 0 {
			text += ","
		}
		listed[g] = true
		text += fmt.Sprintf(" %s=%s", fabric.GUID(g), []string{"full", "limited"}[pick(2)])
	}
	st, err := partitions.ParseStatement(text + " ;")
	if err != nil {
		t.Fatalf("adopt %s: %v", text, err)
	}
	_, err = s.AdoptPartitions(t.Context(), store.Adoption{Partitions: []partitions.Statement{st}, CreatedBy: "operator"})
	return err
}

// The incremental snapshot is the full one at every revision: random
// sequences of changes (networks VLAN, flat and unmanaged, created, moved and
// deleted under their ports; ports bound, moved, unbound and deleted; GUIDs
// taken from one port by another; Kubernetes pkeys and members; partitions
// adopted, their members released; refusals), one
// at a time and in groups, each followed by a read through the same cache
// compared with a full Snapshot. A fresh cache gives the same too, and no read
// after the first is a full one.
func testIncrementalSnapshot(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed>>1))
	w := NewChangeWorld()
	w.Networks(t, s)
	var cache store.SnapshotCache
	ctx := t.Context()
	var reread, kube, adopted, most int
	defer func() {
		t.Logf("reads that read networks again: %d, the Kubernetes pkeys: %d, the adopted partitions: %d; most members: %d",
			reread, kube, adopted, most)
	}()
	for step := range 300 {
		if n := r.IntN(4); n == 3 {
			// Several at once: they commit in one group.
			seeds := []uint64{r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()}
			var wg sync.WaitGroup
			for _, sd := range seeds {
				wg.Go(func() { w.Change(t, s, rand.New(rand.NewPCG(sd, sd))) })
			}
			wg.Wait()
		} else {
			for range n + 1 {
				w.Change(t, s, r)
			}
		}
		got, err := s.ReadSnapshot(ctx, &cache)
		if err != nil {
			t.Fatalf("step %d: ReadSnapshot: %v", step, err)
		}
		want, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (seed %d): incremental snapshot\n%+v\nfull snapshot\n%+v", step, seed, got, want)
		}
		if cache.Last().NetworksRead > 0 {
			reread++
		}
		if cache.Last().Kubernetes {
			kube++
		}
		if cache.Last().Adopted {
			adopted++
		}
		most = max(most, len(got.Members))
		if step > 0 && cache.Last().Full {
			t.Fatalf("step %d: the read was a full one: %+v", step, cache.Last())
		}
		if r.IntN(10) == 0 {
			fresh, err := s.ReadSnapshot(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fresh, want) {
				t.Fatalf("step %d: a fresh read\n%+v\nfull snapshot\n%+v", step, fresh, want)
			}
		}
	}
}

// A read after a change reads that change's rows, not the table: adding a
// port reads that port; removing one reads its network's ports again, not
// the other networks'; a Neutron change does not read the Kubernetes
// partitions.
func testIncrementalSnapshotReads(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(101)))
	mustNetwork(t, s, netSpec(netB, "vlan", "ibnet", vlanID(102)))
	for i := range 20 {
		mustPort(t, s, boundPort(fmt.Sprintf("a%02d", i), netA, 0x0002c90300002000+uint64(i), "h"))
		mustPort(t, s, boundPort(fmt.Sprintf("b%02d", i), netB, 0x0002c90300003000+uint64(i), "h"))
	}
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, full(0x0002c90300004000))))
	var cache store.SnapshotCache
	read := func() (store.Snapshot, store.SnapshotRead) {
		t.Helper()
		snap, err := s.ReadSnapshot(ctx, &cache)
		if err != nil {
			t.Fatal(err)
		}
		return snap, cache.Last()
	}
	if _, r := read(); !r.Full || r.Ports != 40 || r.Networks != 2 || !r.Kubernetes {
		t.Fatalf("first read: %+v, want a full one of 40 ports, 2 networks and the Kubernetes pkeys", r)
	}
	mustPort(t, s, boundPort("a20", netA, 0x0002c90300002020, "h"))
	snap, r := read()
	// The rows at the cache's revision are read again (a change that takes
	// no revision writes at the current one): the last port before, and this.
	if r.Full || r.Ports > 2 || r.Networks != 0 || r.NetworksRead != 0 || r.Kubernetes {
		t.Fatalf("read after adding a port: %+v", r)
	}
	if len(snap.Members) != 41 {
		t.Fatalf("%d members after adding one to 40", len(snap.Members))
	}
	if _, err := s.RemovePort(ctx, store.PortRemoval{PortID: "b05", CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	snap, r = read()
	if r.Full || r.NetworksRead != 1 || r.Ports > 22 || r.Kubernetes {
		t.Fatalf("read after removing a port of %s: %+v, want %s's 19 ports read again and nothing else", netB, r, netB)
	}
	if len(snap.Members) != 40 {
		t.Fatalf("%d members after removing one of 41", len(snap.Members))
	}
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, full(0x0002c90300004001))))
	if snap, r = read(); r.Full || !r.Kubernetes || r.Ports > 1 || len(snap.Kubernetes) != 1 || len(snap.Kubernetes[0].Members) != 2 {
		t.Fatalf("read after a Kubernetes change: %+v, %+v", r, snap.Kubernetes)
	}
	if _, err := s.RemoveNetwork(ctx, store.NetworkRemoval{NetworkID: netB, CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	snap, r = read()
	if r.Full || r.NetworksRead != 1 || r.Ports != 0 || len(snap.Networks) != 1 || len(snap.Members) != 21 {
		t.Fatalf("read after removing %s: %+v: %d networks, %d members", netB, r, len(snap.Networks), len(snap.Members))
	}
	want, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("incremental\n%+v\nfull\n%+v", snap, want)
	}
}
