package storetest

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Every job's proof obligation: the places its change records with it
// (store.Place), as OpenJobs reads them back, on every engine.

// placesCase is one change, after setup, and the places its job must list:
// exactly these, in GUID and pkey order.
type placesCase struct {
	name   string
	setup  func(t *testing.T, s *store.Store)
	change func(t *testing.T, s *store.Store) (store.Job, error)
	want   []store.Place
}

const (
	pkeyA    fabric.PKey = 101 // netA's VLAN
	pkeyB    fabric.PKey = 102
	kubePKey fabric.PKey = 0x1001
	notKube  uint64      = 0x0002c90300000bad // a GUID no Kubernetes pkey has
)

func place(g uint64, pkey fabric.PKey, want store.Want) store.Place {
	return store.Place{GUID: fabric.GUID(g), PKey: pkey, Want: want}
}

// tenant16Kube is tenant16 on a Kubernetes pkey.
var tenant16Kube = fmt.Sprintf("pods=0x%04x : 0x%016x=full, 0x%016x=limited ;", uint16(kubePKey), adoptedA, adoptedB)

func removePort(id string) func(t *testing.T, s *store.Store) (store.Job, error) {
	return func(t *testing.T, s *store.Store) (store.Job, error) {
		return s.RemovePort(t.Context(), store.PortRemoval{PortID: id, CreatedBy: "test", Request: `{}`})
	}
}

func recordPortStep(c store.PortChange) func(t *testing.T, s *store.Store) (store.Job, error) {
	return func(t *testing.T, s *store.Store) (store.Job, error) { return s.RecordPort(t.Context(), c) }
}

func networkChange(spec store.NetworkSpec) func(t *testing.T, s *store.Store) (store.Job, error) {
	return func(t *testing.T, s *store.Store) (store.Job, error) { return recordNetwork(s, t, spec) }
}

// steps runs each setup step in turn.
func steps(fns ...func(t *testing.T, s *store.Store)) func(t *testing.T, s *store.Store) {
	return func(t *testing.T, s *store.Store) {
		for _, fn := range fns {
			fn(t, s)
		}
	}
}

func withNetwork(spec store.NetworkSpec) func(t *testing.T, s *store.Store) {
	return func(t *testing.T, s *store.Store) { mustNetwork(t, s, spec) }
}

func withPort(c store.PortChange) func(t *testing.T, s *store.Store) {
	return func(t *testing.T, s *store.Store) { mustPort(t, s, c) }
}

func withAdopted(texts ...string) func(t *testing.T, s *store.Store) {
	return func(t *testing.T, s *store.Store) { adopt(t, s, texts...) }
}

func withKube(members ...store.KubernetesMember) func(t *testing.T, s *store.Store) {
	return func(t *testing.T, s *store.Store) {
		mustKube(t)(s.AddKubernetesGUIDs(t.Context(), kubeAdd(kubePKey, members...)))
	}
}

func vlan(id string, v int64) store.NetworkSpec { return netSpec(id, "vlan", "ibnet", vlanID(v)) }
func flat(id string) store.NetworkSpec          { return netSpec(id, "flat", "ibnet", nil) }

func unbound(c store.PortChange) store.PortChange { c.Port.Host = ""; return c }

var portPlacesCases = []placesCase{
	{"PortCreate", withNetwork(vlan(netA, 101)), recordPortStep(boundPort("p1", netA, guidA, "h1")),
		[]store.Place{place(guidA, pkeyA, store.WantFull)}},
	{"PortUpdateUnchanged", steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1"))),
		recordPortStep(boundPort("p1", netA, guidA, "h2")),
		[]store.Place{place(guidA, pkeyA, store.WantFull)}},
	{"PortTakesAnotherGUID", steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1"))),
		recordPortStep(boundPort("p1", netA, guidB, "h1")),
		[]store.Place{place(guidA, pkeyA, store.WantAbsent), place(guidB, pkeyA, store.WantFull)}},
	{"PortUnboundDropsItsGUID", steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1"))),
		recordPortStep(unbound(boundPort("p1", netA, guidA, "h1"))),
		[]store.Place{place(guidA, pkeyA, store.WantAbsent)}},
	{"PortMovesToAnotherNetwork",
		steps(withNetwork(vlan(netA, 101)), withNetwork(vlan(netB, 102)), withPort(boundPort("p1", netA, guidA, "h1"))),
		recordPortStep(boundPort("p1", netB, guidA, "h1")),
		[]store.Place{place(guidA, pkeyA, store.WantAbsent), place(guidA, pkeyB, store.WantFull)}},
	// The holder of the GUID is a port of the same network (another
	// network's is refused): the place it leaves is the one taken.
	{"PortTakesTheGUIDOfAnotherPort",
		steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1"))),
		recordPortStep(boundPort("p2", netA, guidA, "h2")),
		[]store.Place{place(guidA, pkeyA, store.WantFull)}},
	{"PortOnAFlatNetwork", withNetwork(flat(netFlat)), recordPortStep(boundPort("pf", netFlat, guidA, "h1")),
		[]store.Place{place(guidA, store.DefaultFlatPKey, store.WantFull)}},
	// Both flat networks share the flat pkey: the GUID leaves one network
	// and stays in the pkey, full.
	{"PortMovesBetweenFlatNetworks",
		steps(withNetwork(flat(netFlat)), withNetwork(flat(netFlat2)), withPort(boundPort("pf", netFlat, guidA, "h1"))),
		recordPortStep(boundPort("pf", netFlat2, guidA, "h1")),
		[]store.Place{place(guidA, store.DefaultFlatPKey, store.WantFull)}},
	// A GUID leaving the flat pkey is absent: no other port holds it.
	{"PortLeavesTheFlatPKey",
		steps(withNetwork(flat(netFlat)), withNetwork(vlan(netA, 101)), withPort(boundPort("pf", netFlat, guidA, "h1"))),
		recordPortStep(boundPort("pf", netA, guidA, "h1")),
		[]store.Place{place(guidA, pkeyA, store.WantFull), place(guidA, store.DefaultFlatPKey, store.WantAbsent)}},
	{"PortReleasesItsGUIDFromAnAdoptedPartition",
		steps(withAdopted(tenant16), withNetwork(vlan(netA, 101))),
		recordPortStep(boundPort("p1", netA, adoptedA, "h1")),
		[]store.Place{place(adoptedA, 0x10, store.WantAbsent), place(adoptedA, pkeyA, store.WantFull)}},
	// The network owns the adopted pkey: the port's own place wins.
	{"PortTakesOverItsAdoptedMembership",
		steps(withAdopted(tenant16), withNetwork(vlan(netA, 16))),
		recordPortStep(boundPort("p1", netA, adoptedB, "h1")),
		[]store.Place{place(adoptedB, 0x10, store.WantFull)}},
	{"PortDelete", steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1"))),
		removePort("p1"),
		[]store.Place{place(guidA, pkeyA, store.WantAbsent)}},
	{"PortDeleteOnAFlatNetwork", steps(withNetwork(flat(netFlat)), withPort(boundPort("pf", netFlat, guidA, "h1"))),
		removePort("pf"),
		[]store.Place{place(guidA, store.DefaultFlatPKey, store.WantAbsent)}},
}

var networkPlacesCases = []placesCase{
	{"NetworkVLANMove",
		steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1")),
			withPort(boundPort("p2", netA, guidB, "h2"))),
		networkChange(vlan(netA, 102)),
		[]store.Place{place(guidA, pkeyA, store.WantAbsent), place(guidA, pkeyB, store.WantFull),
			place(guidB, pkeyA, store.WantAbsent), place(guidB, pkeyB, store.WantFull)}},
	{"NetworkUnchangedMovesNoMember",
		steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1"))),
		networkChange(vlan(netA, 101)), nil},
	{"NetworkNoLongerManaged",
		steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1"))),
		networkChange(netSpec(netA, "vlan", "ethnet", vlanID(101))),
		[]store.Place{place(guidA, pkeyA, store.WantAbsent)}},
	{"NetworkLeavesAnAdoptedPKey",
		steps(withAdopted(tenant16), withNetwork(vlan(netA, 16)), withPort(boundPort("p1", netA, guidA, "h1"))),
		networkChange(vlan(netA, 101)),
		[]store.Place{place(adoptedA, 0x10, store.WantAbsent), place(adoptedB, 0x10, store.WantAbsent),
			place(guidA, 0x10, store.WantAbsent), place(guidA, pkeyA, store.WantFull)}},
	{"NetworkDelete",
		steps(withNetwork(vlan(netA, 101)), withPort(boundPort("p1", netA, guidA, "h1")),
			withPort(boundPort("p2", netA, guidB, "h2"))),
		removeNetwork(netA),
		[]store.Place{place(guidA, pkeyA, store.WantAbsent), place(guidB, pkeyA, store.WantAbsent)}},
	{"NetworkDeleteEndsItsAdoption",
		steps(withAdopted(tenant16), withNetwork(vlan(netA, 16)), withPort(boundPort("p1", netA, guidA, "h1"))),
		removeNetwork(netA),
		[]store.Place{place(adoptedA, 0x10, store.WantAbsent), place(adoptedB, 0x10, store.WantAbsent),
			place(guidA, 0x10, store.WantAbsent)}},
	{"FlatNetworkDelete",
		steps(withNetwork(flat(netFlat)), withPort(boundPort("pf", netFlat, guidA, "h1"))),
		removeNetwork(netFlat),
		[]store.Place{place(guidA, store.DefaultFlatPKey, store.WantAbsent)}},
}

func removeNetwork(id string) func(t *testing.T, s *store.Store) (store.Job, error) {
	return func(t *testing.T, s *store.Store) (store.Job, error) {
		return s.RemoveNetwork(t.Context(), store.NetworkRemoval{NetworkID: id, CreatedBy: "test", Request: `{}`})
	}
}

var kubernetesPlacesCases = []placesCase{
	{"KubernetesAdd", nil,
		func(t *testing.T, s *store.Store) (store.Job, error) {
			return s.AddKubernetesGUIDs(t.Context(), kubeAdd(kubePKey, full(guidA), limited(guidB)))
		},
		[]store.Place{place(guidA, kubePKey, store.WantFull), place(guidB, kubePKey, store.WantLimited)}},
	{"KubernetesAddReleasesAdoptedMembers", withAdopted(tenant16),
		func(t *testing.T, s *store.Store) (store.Job, error) {
			return s.AddKubernetesGUIDs(t.Context(), kubeAdd(kubePKey, full(adoptedA)))
		},
		[]store.Place{place(adoptedA, 0x10, store.WantAbsent), place(adoptedA, kubePKey, store.WantFull)}},
	// A GUID that is no member is nothing the removal promises.
	{"KubernetesRemove", withKube(full(guidA), limited(guidB)),
		func(t *testing.T, s *store.Store) (store.Job, error) {
			return s.RemoveKubernetesGUIDs(t.Context(), store.KubernetesRemoval{PKey: kubePKey,
				GUIDs: []fabric.GUID{fabric.GUID(guidB), fabric.GUID(notKube)}, CreatedBy: "ib-kubernetes", Request: "{}"})
		},
		[]store.Place{place(guidB, kubePKey, store.WantAbsent)}},
	{"KubernetesDeletePKey", withKube(full(guidA), limited(guidB)),
		func(t *testing.T, s *store.Store) (store.Job, error) {
			return s.DeleteKubernetesPKey(t.Context(), store.KubernetesDeletion{PKey: kubePKey, CreatedBy: "ib-kubernetes"})
		},
		[]store.Place{place(guidA, kubePKey, store.WantAbsent), place(guidB, kubePKey, store.WantAbsent)}},
	{"KubernetesDeletePKeyEndsItsAdoption", steps(withAdopted(tenant16Kube), withKube(full(guidA))),
		func(t *testing.T, s *store.Store) (store.Job, error) {
			return s.DeleteKubernetesPKey(t.Context(), store.KubernetesDeletion{PKey: kubePKey, CreatedBy: "ib-kubernetes"})
		},
		[]store.Place{place(adoptedA, kubePKey, store.WantAbsent), place(adoptedB, kubePKey, store.WantAbsent),
			place(guidA, kubePKey, store.WantAbsent)}},
	{"KubernetesCreateKeepsItsMembers", withKube(full(guidA), limited(guidB)),
		func(t *testing.T, s *store.Store) (store.Job, error) {
			return s.CreateKubernetesPKey(t.Context(), store.KubernetesCreation{PKey: kubePKey, IPoIB: false, CreatedBy: "ib-kubernetes"})
		},
		[]store.Place{place(guidA, kubePKey, store.WantFull), place(guidB, kubePKey, store.WantLimited)}},
	{"KubernetesCreateEmpty", nil,
		func(t *testing.T, s *store.Store) (store.Job, error) {
			return s.CreateKubernetesPKey(t.Context(), store.KubernetesCreation{PKey: kubePKey, IPoIB: true, CreatedBy: "ib-kubernetes"})
		}, nil},
}

var adoptedPlacesCases = []placesCase{
	// A keyword (ALL) names no place.
	{"AdoptPartitions", nil,
		func(t *testing.T, s *store.Store) (store.Job, error) {
			return adopt(t, s, tenant16, fmt.Sprintf("other=0x0011 : ALL=limited, 0x%016x=full ;", adoptedC)).Job, nil
		},
		[]store.Place{place(adoptedA, 0x10, store.WantFull), place(adoptedB, 0x10, store.WantLimited),
			place(adoptedC, 0x11, store.WantFull)}},
	{"ReleaseAdoptedMembers", withAdopted(tenant16),
		func(t *testing.T, s *store.Store) (store.Job, error) {
			out, err := s.ReleaseAdoptedMembers(t.Context(), store.AdoptedRelease{PKey: 0x10,
				Keep: []fabric.GUID{adoptedA}, CreatedBy: "operator"})
			return out.Job, err
		},
		[]store.Place{place(adoptedB, 0x10, store.WantAbsent)}},
}

var placesTests = []storeTest{
	{"PlacesOfARefusedChangeAreNotWritten", testPlacesRefused},
	{"PlacesOfAChangeThatTouchesNoPartition", testPlacesNoOp},
	{"PlacesOfTwoChangesInOneGroup", testPlacesGrouped},
	{"PlacesOfTenThousandGUIDs", testPlacesMany},
}

func init() {
	twoFabricTests = append(twoFabricTests, storeTest{"PlacesOfARoutedChange", testPlacesRouted})
	for _, cases := range [][]placesCase{portPlacesCases, networkPlacesCases, kubernetesPlacesCases, adoptedPlacesCases} {
		for _, c := range cases {
			placesTests = append(placesTests, storeTest{"Places/" + c.name, func(t *testing.T, s *store.Store) { c.run(t, s) }})
		}
	}
}

func (c placesCase) run(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	if c.setup != nil {
		c.setup(t, s)
	}
	j, err := c.change(t, s)
	if err != nil {
		t.Fatalf("the change: %v", err)
	}
	got, open := jobPlaces(t, s, j.ID)
	if !open {
		t.Fatalf("job %d (%s) is not open: %+v", j.ID, j.Description, j)
	}
	if !reflect.DeepEqual(got, c.want) {
		t.Errorf("job %d (%s) places:\n got %v\nwant %v", j.ID, j.Description, got, c.want)
	}
}

// jobPlaces are the places of job id as OpenJobs reads them; open is false
// when the job is not open.
func jobPlaces(t *testing.T, s *store.Store, id int64) (places []store.Place, open bool) {
	t.Helper()
	jobs, err := s.OpenJobs(t.Context(), math.MaxInt64)
	if err != nil {
		t.Fatalf("OpenJobs: %v", err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j.Places, true
		}
	}
	return nil, false
}

// allPlaces are the places of every open job.
func allPlaces(t *testing.T, s *store.Store) []store.Place {
	t.Helper()
	jobs, err := s.OpenJobs(t.Context(), math.MaxInt64)
	if err != nil {
		t.Fatalf("OpenJobs: %v", err)
	}
	var out []store.Place
	for _, j := range jobs {
		out = append(out, j.Places...)
	}
	return out
}

// A refused change (400) rolls back with its job: none of its places is
// written, and the places already recorded stay as they were.
func testPlacesRefused(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	mustNetwork(t, s, vlan(netA, 101))
	mustNetwork(t, s, vlan(netB, 102))
	mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	before := allPlaces(t, s)
	rev := revision(t, s)
	_, err := s.RecordPort(t.Context(), boundPort("p2", netB, guidA, "h2"))
	wantRefused(t, s, err, rev)
	_, err = s.AddKubernetesGUIDs(t.Context(), kubeAdd(kubePKey, full(guidB), full(guidA)))
	wantRefused(t, s, err, rev)
	if got := allPlaces(t, s); !reflect.DeepEqual(got, before) {
		t.Errorf("places after the refusals = %v, want %v", got, before)
	}
}

// A change that touches no partition completes at once and records no
// place.
func testPlacesNoOp(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	mustNetwork(t, s, netSpec(netEth, "vlan", "ethnet", vlanID(300)))
	j := mustPort(t, s, boundPort("pe", netEth, guidA, "h1"))
	if j.Status != store.StatusCompleted {
		t.Fatalf("a port on a network not managed: %+v, want Completed", j)
	}
	if got := allPlaces(t, s); len(got) != 0 {
		t.Errorf("places = %v, want none", got)
	}
}

// Changes that commit in one group (their transaction shared, each held
// write sent before the next change starts) each keep their own places.
func testPlacesGrouped(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	mustNetwork(t, s, vlan(netA, 101))
	jobs := make([]store.Job, 8)
	errs := make(chan error, len(jobs))
	for i := range jobs {
		go func() {
			var err error
			jobs[i], err = s.RecordPort(t.Context(), boundPort(fmt.Sprintf("g%d", i), netA, guidA+uint64(i), "h1"))
			errs <- err
		}()
	}
	for range jobs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, j := range jobs {
		want := []store.Place{place(guidA+uint64(i), pkeyA, store.WantFull)}
		if got, _ := jobPlaces(t, s, j.ID); !reflect.DeepEqual(got, want) {
			t.Errorf("port g%d's job %d places = %v, want %v", i, j.ID, got, want)
		}
	}
}

// A request at the API's limit (10,000 GUIDs): its places are one statement
// (a JSON array the server expands), and a deleted pkey lists every member.
func testPlacesMany(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	const n = 10000
	members := make([]store.KubernetesMember, n)
	for i := range members {
		members[i] = limited(0x0200000000000001 + uint64(i))
	}
	add := mustKube(t)(s.AddKubernetesGUIDs(t.Context(), kubeAdd(kubePKey, members...)))
	del := mustKube(t)(s.DeleteKubernetesPKey(t.Context(), store.KubernetesDeletion{PKey: kubePKey, CreatedBy: "ib-kubernetes"}))
	for _, c := range []struct {
		job  store.Job
		want store.Want
	}{{add, store.WantLimited}, {del, store.WantAbsent}} {
		got, _ := jobPlaces(t, s, c.job.ID)
		if len(got) != n {
			t.Fatalf("job %d (%s): %d places, want %d", c.job.ID, c.job.Operation, len(got), n)
		}
		for i, p := range got {
			if want := place(0x0200000000000001+uint64(i), kubePKey, c.want); p != want {
				t.Fatalf("job %d (%s): place %d = %v, want %v", c.job.ID, c.job.Operation, i, p, want)
			}
		}
	}
}

// A change routed to another fabric (a port of the storage fabric's network,
// removed through the default fabric's store) records its places with its
// job on that fabric: its OpenJobs lists them, the other fabric's does not.
func testPlacesRouted(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 100)
	mustNetwork(t, s, storageNetwork(netC, 100))
	own := mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	mustPort(t, s, boundPort("p2", netC, guidA, "h2"))
	routed, err := removePort("p2")(t, s)
	if err != nil {
		t.Fatal(err)
	}
	storage := s.DB().Fabric(storageFabric)
	want := []store.Place{place(guidA, 100, store.WantAbsent)}
	if got, open := jobPlaces(t, storage, routed.ID); !open || !reflect.DeepEqual(got, want) {
		t.Errorf("the storage fabric's job %d: places %v (open %t), want %v", routed.ID, got, open, want)
	}
	if _, open := jobPlaces(t, s, routed.ID); open {
		t.Errorf("the storage fabric's job %d is listed on the default fabric", routed.ID)
	}
	want = []store.Place{place(guidA, 100, store.WantFull)}
	if got, _ := jobPlaces(t, s, own.ID); !reflect.DeepEqual(got, want) {
		t.Errorf("the default fabric's port job %d: places %v, want %v", own.ID, got, want)
	}
}
