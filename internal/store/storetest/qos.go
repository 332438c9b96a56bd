package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// A Kubernetes pkey's QoS (UFM's mtu_limit, service_level, rate_limit), on
// every engine.

var qosTests = []storeTest{
	{"KubernetesQoSUnsetUntilAClientSetsItThenChangesWhatIsNamed", testKubernetesQoS},
	{"KubernetesQoSRefusalsChangeNothing", testKubernetesQoSRefusals},
	{"ConcurrentQoSChangesOfOnePKeyKeepEach", testKubernetesQoSConcurrent},
}

func ints(v int) *int { return &v }

// qosOf reads pkey's recorded QoS.
func qosOf(t *testing.T, s *store.Store, pkey fabric.PKey) fabric.QoS {
	t.Helper()
	p, err := s.GetKubernetesPKey(t.Context(), pkey)
	if err != nil {
		t.Fatalf("read pkey %s: %v", pkey, err)
	}
	return p.QoS
}

func testKubernetesQoS(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB), limited(guidA))))
	// ib-kubernetes never sends a QoS: its pkeys have none, so that their
	// partitions carry no limit.
	if got := qosOf(t, s, 0x1005); got != (fabric.QoS{}) {
		t.Errorf("a new pkey's QoS = %+v, want none set", got)
	}
	before := revision(t, s)
	job := mustKube(t)(s.SetKubernetesQoS(ctx, store.KubernetesQoS{PKey: 0x1005, CreatedBy: "nico", Request: "{}",
		QoS: store.QoSChange{MTULimit: ints(4), RateMbps: ints(200000)}}))
	if job.Revision <= before || job.Operation != store.OpSetKubernetesQoS || job.ObjectID != "0x1005" {
		t.Errorf("QoS job %+v, want a new revision after %d", job, before)
	}
	want := fabric.QoS{MTULimit: 4, ServiceLevel: 0, RateMbps: 200000}
	if got := qosOf(t, s, 0x1005); got != want {
		t.Errorf("QoS after the change = %+v, want %+v", got, want)
	}
	// The job promises the members as they are: the sweep that rewrites
	// their statement proves it.
	open, err := s.OpenJobs(ctx, job.Revision)
	if err != nil {
		t.Fatal(err)
	}
	var places []store.Place
	for _, o := range open {
		if o.ID == job.ID {
			places = o.Places
		}
	}
	if len(places) != 2 || places[0].PKey != 0x1005 || places[1].PKey != 0x1005 {
		t.Errorf("the QoS job's places = %+v, want its two members in pkey 0x1005", places)
	}
	// An addition without QoS keeps it; one with QoS changes what it names.
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, limited(0x1111))))
	if got := qosOf(t, s, 0x1005); got != want {
		t.Errorf("QoS after an addition without QoS = %+v, want %+v", got, want)
	}
	a := kubeAdd(0x1005, limited(0x1111))
	a.QoS = store.QoSChange{ServiceLevel: ints(7)}
	mustKube(t)(s.AddKubernetesGUIDs(ctx, a))
	want.ServiceLevel = 7
	if got := qosOf(t, s, 0x1005); got != want {
		t.Errorf("QoS after an addition with service_level 7 = %+v, want %+v", got, want)
	}
	// A new pkey created with QoS takes it over UFM's defaults.
	mustKube(t)(s.CreateKubernetesPKey(ctx, store.KubernetesCreation{PKey: 0x1006, IPoIB: true,
		QoS: store.QoSChange{RateMbps: ints(10000)}}))
	if got, w := qosOf(t, s, 0x1006), (fabric.QoS{MTULimit: 2, RateMbps: 10000}); got != w {
		t.Errorf("QoS of a pkey created with rate_limit 10 = %+v, want %+v", got, w)
	}
	list, err := s.KubernetesPKeys(ctx)
	if err != nil || len(list) != 2 || list[0].QoS != want {
		t.Errorf("KubernetesPKeys = %+v, %v; want 0x1005 with %+v", list, err, want)
	}
	snap, err := s.ReadSnapshot(ctx, &store.SnapshotCache{})
	if err != nil || len(snap.Kubernetes) != 2 || snap.Kubernetes[0].QoS != want {
		t.Errorf("snapshot's Kubernetes pkeys = %+v, %v; want 0x1005 with %+v", snap.Kubernetes, err, want)
	}
}

func testKubernetesQoSRefusals(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
	set := func(pkey fabric.PKey, c store.QoSChange) func() error {
		return func() error {
			_, err := s.SetKubernetesQoS(ctx, store.KubernetesQoS{PKey: pkey, QoS: c})
			return err
		}
	}
	assertRefused(t, []refusal{
		{"mtu 3", set(0x1005, store.QoSChange{MTULimit: ints(3)}), []string{"pkey 0x1005: mtu_limit 3: want 2 or 4"}},
		{"sl 16", set(0x1005, store.QoSChange{ServiceLevel: ints(16)}), []string{"service_level 16: want 0 to 15"}},
		{"a rate UFM does not list", set(0x1005, store.QoSChange{RateMbps: ints(7000)}), []string{"rate_limit 7: want one of 2.5, 10"}},
		{"nothing", set(0x1005, store.QoSChange{}), []string{"no QoS to set"}},
		{"outside the range", set(0x2000, store.QoSChange{MTULimit: ints(4)}), []string{"outside [ufm_pkeys] pkey_range"}},
		{"an addition with a bad QoS", func() error {
			a := kubeAdd(0x1005, limited(0x1111))
			a.QoS = store.QoSChange{MTULimit: ints(4), ServiceLevel: ints(-1)}
			_, err := s.AddKubernetesGUIDs(ctx, a)
			return err
		}, []string{"service_level -1"}},
	}, func(t *testing.T) string {
		return fmt.Sprintf("revision %d, %+v", revision(t, s), qosOf(t, s, 0x1005))
	})
	before := revision(t, s)
	if _, err := s.SetKubernetesQoS(ctx, store.KubernetesQoS{PKey: 0x1006, QoS: store.QoSChange{MTULimit: ints(4)}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("QoS of an unrecorded pkey: %v, want ErrNotFound", err)
	}
	if r := revision(t, s); r != before {
		t.Errorf("QoS of an unrecorded pkey moved the revision from %d to %d", before, r)
	}
}

// Changes of different fields of one pkey's QoS, sent at once, keep each
// other's: each reads the recorded QoS under the revision's lock, after the
// one before it committed.
func testKubernetesQoSConcurrent(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
	changes := []store.QoSChange{{MTULimit: ints(4)}, {ServiceLevel: ints(9)}, {RateMbps: ints(56000)}}
	var wg sync.WaitGroup
	errs := make([]error, len(changes))
	for i, c := range changes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.SetKubernetesQoS(ctx, store.KubernetesQoS{PKey: 0x1005, QoS: c})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	if got, want := qosOf(t, s, 0x1005), (fabric.QoS{MTULimit: 4, ServiceLevel: 9, RateMbps: 56000}); got != want {
		t.Errorf("QoS after three concurrent changes = %+v, want %+v", got, want)
	}
}
