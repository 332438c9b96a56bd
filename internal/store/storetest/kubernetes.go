package storetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The Kubernetes partitions (UFM's pkeys API, as ib-kubernetes uses it), on
// every engine.

var kubernetesTests = []storeTest{
	{"KubernetesAddRemoveDelete", testKubernetesLifecycle},
	{"KubernetesRefusalsChangeNothing", testKubernetesRefusals},
	{"KubernetesLastUpdatedMovesOnlyWhenApplied", testKubernetesLastUpdated},
	{"KubernetesGUIDsCountAgainstThePortLimit", testKubernetesPortLimit},
	{"GUIDsNotOnTheFabricCountAgainstTheirSwitchPort", testPortLimitOffFabric},
	{"ConcurrentAdditionsOfOneGUIDStayUnderThePortLimit", testPortLimitConcurrent},
	{"ConcurrentNeutronAndKubernetesClaimsOfOneGUID", testConcurrentNeutronKubernetesClaims},
	{"KubernetesReplaceSetsTheMembers", testKubernetesReplace},
	{"KubernetesPartitionNameIsKept", testKubernetesPartitionName},
	{"ConcurrentReplaceAndAdditionOfOnePKey", testConcurrentReplaceAndAddition},
}

var kubeRange = fabric.PKeyRange{First: 0x1000, Last: 0x1fff}

// kubeStore is rulesStore with a Kubernetes range of 0x1000-0x1fff.
func kubeStore(s *store.Store) *store.Store {
	return s.WithRules(store.Rules{
		PhysicalNetworks: []string{"ibnet"},
		FlatPKey:         store.DefaultFlatPKey,
		StaticPKey:       func(p fabric.PKey) (string, bool) { return "storage", p == 0x1010 },
		StaticMember:     func(g fabric.GUID) (string, bool) { return "storage", g == fabric.GUID(guidC) },
		KubernetesRange:  kubeRange,
	})
}

func kubeAdd(pkey fabric.PKey, members ...store.KubernetesMember) store.KubernetesAddition {
	return store.KubernetesAddition{PKey: pkey, Members: members, CreatedBy: "ib-kubernetes", Request: "{}"}
}

func full(g uint64) store.KubernetesMember {
	return store.KubernetesMember{GUID: fabric.GUID(g), Membership: fabric.Full, Index0: true}
}

func limited(g uint64) store.KubernetesMember {
	return store.KubernetesMember{GUID: fabric.GUID(g), Membership: fabric.Limited}
}

// since is m as recorded by the change of revision rev.
func since(m store.KubernetesMember, rev int64) store.KubernetesMember {
	m.Revision = rev
	return m
}

// mustKube fails the test when the Kubernetes change it is given failed:
// mustKube(t)(s.AddKubernetesGUIDs(...)).
func mustKube(t *testing.T) func(store.Job, error) store.Job {
	t.Helper()
	return func(j store.Job, err error) store.Job {
		t.Helper()
		if err != nil {
			t.Fatalf("Kubernetes change: %v", err)
		}
		return j
	}
}

// testKubernetesLifecycle takes a pkey of ib-kubernetes through its life:
// added, asked for again, partly removed and deleted; then an empty pkey
// created ahead of its members. Its GUID is free for a network afterwards.
func testKubernetesLifecycle(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	kubeFirstAdd(t, s)
	kubeAddAgain(t, s)
	kubeRemoveThenDelete(t, s)
	kubeCreateEmpty(t, s)

	// GUID A left 0x1005: it may now join a network's partition.
	addNetwork(t, s, netA, 101)
	if _, err := addPort(t, s, "port-a", netA, guidA); err != nil {
		t.Fatalf("a GUID that left its Kubernetes pkey joins a network: %v", err)
	}
}

// kubeFirstAdd adds GUIDs A (full) and B (limited) to pkey 0x1005, the
// store's first change.
func kubeFirstAdd(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := t.Context()
	j := mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidA), limited(guidB))))
	if j.Revision != 1 || j.Status != store.StatusPending || j.ObjectType != store.ObjectPKey ||
		j.ObjectID != "0x1005" || j.Operation != store.OpAddKubernetesGUIDs || j.CreatedBy != "ib-kubernetes" {
		t.Fatalf("job = %+v", j)
	}
	want := store.KubernetesPKey{PKey: 0x1005, IPoIB: true, Revision: 1, Members: []store.KubernetesMember{
		since(full(guidA), 1), since(limited(guidB), 1)}}
	got, err := s.GetKubernetesPKey(ctx, 0x1005)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("GetKubernetesPKey = %+v, %v; want %+v", got, err, want)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || snap.Revision != 1 || !reflect.DeepEqual(snap.Kubernetes, []store.KubernetesPKey{want}) {
		t.Fatalf("Snapshot = %+v, %v", snap, err)
	}
}

// kubeAddAgain asks again for GUID A in 0x1005, limited and without IPoIB
// (revision 2), and adds pkey 0x1006.
func kubeAddAgain(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := t.Context()
	// Asking again for a member, with another membership and without
	// IPoIB, is a change: its answer waits for a sweep, and ib-kubernetes
	// waits for last_updated to move.
	noIPoIB := false
	again := kubeAdd(0x1005, limited(guidA))
	again.IPoIB = &noIPoIB
	j := mustKube(t)(s.AddKubernetesGUIDs(ctx, again))
	if j.Revision != 2 || j.Status != store.StatusPending {
		t.Fatalf("second add: job = %+v", j)
	}
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1006, full(guidB))))
	list, err := s.KubernetesPKeys(ctx)
	if err != nil || len(list) != 2 || list[0].PKey != 0x1005 || list[0].IPoIB ||
		!reflect.DeepEqual(list[0].Members, []store.KubernetesMember{since(limited(guidA), 2), since(limited(guidB), 1)}) ||
		list[1].PKey != 0x1006 || !list[1].IPoIB || len(list[1].Members) != 1 {
		t.Fatalf("KubernetesPKeys = %+v, %v", list, err)
	}
}

// kubeRemoveThenDelete removes GUID A (and one never added) from 0x1005,
// then deletes it, twice: the second delete finds nothing and changes
// nothing.
func kubeRemoveThenDelete(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := t.Context()
	j := mustKube(t)(s.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x1005,
		GUIDs: []fabric.GUID{fabric.GUID(guidA), 0x0002c90300009999}, CreatedBy: "ib-kubernetes"}))
	if j.Revision != 4 || !strings.Contains(j.Result, "nothing to remove for 0002c90300009999") {
		t.Fatalf("remove: job = %+v", j)
	}
	if got, err := s.GetKubernetesPKey(ctx, 0x1005); err != nil || len(got.Members) != 1 || got.Members[0].GUID != fabric.GUID(guidB) {
		t.Fatalf("after remove: %+v, %v", got, err)
	}
	// Removing from a pkey that is not recorded is nothing to remove.
	if _, err := s.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x1abc, GUIDs: []fabric.GUID{1}}); err != nil {
		t.Fatalf("remove from an unknown pkey: %v", err)
	}

	j = mustKube(t)(s.DeleteKubernetesPKey(ctx, store.KubernetesDeletion{PKey: 0x1005, CreatedBy: "ib-kubernetes"}))
	if j.Operation != store.OpDeleteKubernetesPKey || !strings.Contains(j.Result, "and its members (1)") {
		t.Fatalf("delete: job = %+v", j)
	}
	if _, err := s.GetKubernetesPKey(ctx, 0x1005); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted pkey: err = %v, want ErrNotFound", err)
	}
	before := revision(t, s)
	if _, err := s.DeleteKubernetesPKey(ctx, store.KubernetesDeletion{PKey: 0x1005}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete again: err = %v, want ErrNotFound", err)
	}
	if revision(t, s) != before {
		t.Errorf("a DELETE of an unknown pkey moved the revision")
	}
}

// kubeCreateEmpty creates an empty pkey ahead of its members; created again,
// it keeps them and takes the IPoIB asked. A pkey out of the range is
// refused.
func kubeCreateEmpty(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := t.Context()
	j := mustKube(t)(s.CreateKubernetesPKey(ctx, store.KubernetesCreation{PKey: 0x1fff, IPoIB: true}))
	if j.Operation != store.OpCreateKubernetesPKey || j.Status != store.StatusPending {
		t.Fatalf("create: job = %+v", j)
	}
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1fff, limited(guidA))))
	mustKube(t)(s.CreateKubernetesPKey(ctx, store.KubernetesCreation{PKey: 0x1fff, IPoIB: false}))
	if got, err := s.GetKubernetesPKey(ctx, 0x1fff); err != nil || got.IPoIB || len(got.Members) != 1 {
		t.Fatalf("created twice: %+v, %v", got, err)
	}
	if _, err := s.CreateKubernetesPKey(ctx, store.KubernetesCreation{PKey: 0x2000}); err == nil {
		t.Error("created a pkey outside the range")
	}
	mustKube(t)(s.DeleteKubernetesPKey(ctx, store.KubernetesDeletion{PKey: 0x1fff}))
}

func testKubernetesRefusals(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	addNetwork(t, s, netA, 101)
	if _, err := addPort(t, s, "port-a", netA, guidA); err != nil {
		t.Fatal(err)
	}
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))

	add := func(pkey fabric.PKey, members ...store.KubernetesMember) func() error {
		return func() error { _, err := s.AddKubernetesGUIDs(ctx, kubeAdd(pkey, members...)); return err }
	}
	remove := func(r store.KubernetesRemoval) func() error {
		return func() error { _, err := s.RemoveKubernetesGUIDs(ctx, r); return err }
	}
	assertRefused(t, []refusal{
		{"pkey below the range", add(0x0fff, full(0x1111)), []string{"pkey 0x0fff is outside [ufm_pkeys] pkey_range 0x1000-0x1fff"}},
		{"the default partition", add(0x7fff, full(0x1111)), []string{"default partition"}},
		{"a static partition's pkey", add(0x1010, full(0x1111)), []string{`static partition "storage"`}},
		{"a GUID of an OpenStack network", add(0x1006, full(0x1111), full(guidA)),
			[]string{"GUID 248a070300b1c2d4 is held by another owner"}},
		{"a GUID the template lists", add(0x1006, full(guidC)), []string{`partition "storage" of the partitions template`}},
		{"index 0 in two pkeys", add(0x1006, full(guidB)), []string{"already has index 0 in Kubernetes pkey 0x1005"}},
		{"a GUID twice", add(0x1006, limited(0x1111), full(0x1111)), []string{"listed twice"}},
		{"no GUIDs", add(0x1006), []string{"no GUIDs to add"}},
		{"GUID zero", add(0x1006, full(0)), []string{"is not a port GUID"}},
		{"a membership that is neither", add(0x1006, store.KubernetesMember{GUID: 0x1111, Membership: "both"}),
			[]string{`membership "both"`}},
		{"remove outside the range", remove(store.KubernetesRemoval{PKey: 0x2000, GUIDs: []fabric.GUID{0x1111}}),
			[]string{"outside [ufm_pkeys] pkey_range"}},
		{"remove nothing", remove(store.KubernetesRemoval{PKey: 0x1005}), []string{"no GUIDs to remove"}},
		{"delete the default partition", func() error {
			_, err := s.DeleteKubernetesPKey(ctx, store.KubernetesDeletion{PKey: 0x7fff})
			return err
		}, []string{"default partition"}},
		{"a Neutron port on a Kubernetes GUID", func() error {
			_, err := addPort(t, s, "port-b", netA, guidB)
			return err
		}, []string{"GUID 0xfa163e00005b7c1d is held by another owner"}},
		{"a VLAN in the Kubernetes range", func() error {
			_, err := s.RecordNetwork(ctx, store.NetworkChange{Network: vlanNetwork(netB, 0x1001), Operation: store.OpCreateNetwork})
			return err
		}, []string{"VLAN ID 4097 (pkey 0x1001) is in [ufm_pkeys] pkey_range 0x1000-0x1fff"}},
	}, func(t *testing.T) string { return fmt.Sprintf("%s\nrevision %d", readKube(t, s), revision(t, s)) })

	// With no range configured, Kubernetes may use no pkey.
	none := s.WithRules(store.Rules{})
	if _, err := none.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(0x1111))); err == nil ||
		!strings.Contains(err.Error(), "no [ufm_pkeys] pkey_range is configured") {
		t.Errorf("add without a range: err = %v", err)
	}
	// A network recorded on a pkey before the range took it keeps it from Kubernetes.
	wide := s.WithRules(store.Rules{KubernetesRange: fabric.PKeyRange{First: 0x0001, Last: 0x0fff}})
	if _, err := wide.AddKubernetesGUIDs(ctx, kubeAdd(101, full(0x1111))); err == nil ||
		!strings.Contains(err.Error(), "pkey 0x0065 is held by another owner") {
		t.Errorf("add on a network's pkey: err = %v", err)
	}
	// And the reverse: a Kubernetes pkey left outside a moved range keeps its VLAN from Neutron.
	if _, err := s.WithRules(store.Rules{KubernetesRange: fabric.PKeyRange{First: 0x2000, Last: 0x2fff}}).RecordNetwork(ctx, store.NetworkChange{Network: vlanNetwork(netB, 0x1005),
		Operation: store.OpCreateNetwork}); err == nil || !strings.Contains(err.Error(), "partition key 0x1005 of a Kubernetes partition") {
		t.Errorf("a VLAN on a Kubernetes pkey: err = %v", err)
	}
}

// readKube prints every Kubernetes pkey and member, and every network port.
func readKube(t *testing.T, s *store.Store) string {
	t.Helper()
	list, err := s.KubernetesPKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range list {
		fmt.Fprintf(&b, "%s ipoib=%t %+v\n", p.PKey, p.IPoIB, p.Members)
	}
	fmt.Fprintf(&b, "ports: %v", members(t, s))
	return b.String()
}

func testKubernetesLastUpdated(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	if got, err := s.KubernetesLastUpdated(ctx); err != nil || got != nil {
		t.Fatalf("KubernetesLastUpdated on a new database = %v, %v; want nil", got, err)
	}
	addNetwork(t, s, netA, 101)
	j := mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
	addNetwork(t, s, netB, 102)

	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	term, err := clockAt(s, at).NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	// The network's apply, below the Kubernetes change: last_updated stays.
	if _, err := clockAt(s, at).CompleteJobs(ctx, term, j.Revision-1); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.KubernetesLastUpdated(ctx); got != nil {
		t.Fatalf("last_updated = %v after an apply below the Kubernetes change", got)
	}
	// A deposed term proves nothing.
	newer, err := clockAt(s, at).NewTerm(ctx, "manager-2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clockAt(s, at).CompleteJobs(ctx, term, j.Revision+1); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.KubernetesLastUpdated(ctx); got != nil {
		t.Fatalf("last_updated = %v after a deposed term's apply", got)
	}
	if n, err := clockAt(s, at).CompleteJobs(ctx, newer, j.Revision+1); err != nil || n != 2 {
		t.Fatalf("CompleteJobs = %d, %v", n, err)
	}
	got, err := s.KubernetesLastUpdated(ctx)
	if err != nil || got == nil || !got.Equal(at) {
		t.Fatalf("last_updated = %v, %v; want %v", got, err, at)
	}
	if done := job(t, s, j.ID); done.Status != store.StatusCompleted {
		t.Errorf("the Kubernetes job is %s", done.Status)
	}
	// A later apply with no Kubernetes change in it leaves it.
	addNetwork(t, s, netFlat, 103)
	later := at.Add(time.Hour)
	if _, err := clockAt(s, later).CompleteJobs(ctx, newer, revision(t, s)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.KubernetesLastUpdated(ctx); got == nil || !got.Equal(at) {
		t.Errorf("last_updated = %v after an apply of Neutron changes only; want %v", got, at)
	}
}

func testKubernetesPortLimit(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	// A switch port holds three pkeys: the default partition and two others.
	var asked [][]fabric.PKey
	r := store.Rules{KubernetesRange: kubeRange, PortLimit: func() (store.PortCheck, error) {
		return func(g fabric.GUID, partitions ...fabric.PKey) string {
			asked = append(asked, partitions)
			if len(partitions)+1 >= 3 {
				return fmt.Sprintf("host port %s would carry %d pkeys", g, len(partitions)+1)
			}
			return ""
		}, nil
	}}
	limitedStore := s.WithRules(r)
	mustKube(t)(limitedStore.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidA))))
	// Re-adding to the same pkey counts it once.
	mustKube(t)(limitedStore.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, limited(guidA))))
	_, err := limitedStore.AddKubernetesGUIDs(ctx, kubeAdd(0x1006, limited(guidA)))
	var rej *store.RejectedError
	if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "would carry 3 pkeys") {
		t.Fatalf("a third pkey: err = %v, want the port limit's refusal", err)
	}
	want := [][]fabric.PKey{{0x1005}, {0x1005}, {0x1006, 0x1005}}
	if !reflect.DeepEqual(asked, want) {
		t.Errorf("the port limit was asked %v, want %v", asked, want)
	}
}

// offFabricLimit is the real port limit with switch_pkey_capacity cap, on a
// subnet dump that lists host port 0x0002c90300000101 behind switch port
// 0x0002c90300f00001:2 and no other.
func offFabricLimit(t *testing.T, s *store.Store, capacity int) *store.Store {
	t.Helper()
	dump := filepath.Join(t.TempDir(), topology.FileName)
	line := "{ CA Ports:01 SystemGUID:0002c90300000100 NodeGUID:0002c90300000100 PortGUID:0002c90300000101 " +
		"VenID:000000 DevID:0000 Rev:000000A1 {H1} LID:0003 PN:01 } { SW Ports:08 SystemGUID:0002c90300f00001 " +
		"NodeGUID:0002c90300f00001 PortGUID:0002c90300f00001 VenID:00000000 DevID:0000 Rev:000000A1 {S1} " +
		"LID:0002 PN:02 } PHY=4x LOG=ACT SPD=10\n"
	if err := os.WriteFile(dump, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	limit := &topology.PortLimit{DumpFile: dump, Capacity: capacity}
	return s.WithRules(store.Rules{PhysicalNetworks: []string{"ibnet"}, KubernetesRange: kubeRange,
		PortLimit: func() (store.PortCheck, error) { return limit.Checker() }})
}

// A GUID the subnet dump does not list (its host's link is down, or it is a
// pod's virtual GUID, which no dump lists) gets its pkeys from OpenSM at the
// sweep that finds it, with no apply in between: it is held to the capacity
// like a placed one, and the pkey that would reach it is refused, saying how
// many pkeys the port would carry.
func testPortLimitOffFabric(t *testing.T, s *store.Store) {
	ctx := t.Context()
	s = offFabricLimit(t, s, 4) // at most 3 pkeys: the default and two others
	for _, g := range []uint64{guidA, 0x0002c90300000101} {
		mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, limited(g))))
		mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1002, limited(g))))
		before := revision(t, s)
		_, err := s.AddKubernetesGUIDs(ctx, kubeAdd(0x1003, limited(g)))
		var rej *store.RejectedError
		if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "would carry 4 pkeys") ||
			!strings.Contains(rej.Reason, "at most 3") {
			t.Fatalf("GUID %x in a third pkey: err = %v, want the port limit's refusal", g, err)
		}
		where := "switch port 0x0002c90300f00001:2"
		if g == guidA {
			where = "not on the fabric now"
		}
		if !strings.Contains(rej.Reason, where) {
			t.Errorf("GUID %x: refusal %q, want it to say %q", g, rej.Reason, where)
		}
		if got := revision(t, s); got != before {
			t.Errorf("a refused addition moved the revision from %d to %d", before, got)
		}
	}
	// A Neutron port whose GUID is off the fabric (a VM's virtual function):
	// with a 2-entry table, the default and its network's pkey do not fit.
	s = offFabricLimit(t, s, 2)
	addNetwork(t, s, netA, 101)
	_, err := addPort(t, s, "port-a", netA, guidB)
	var rej *store.RejectedError
	if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "would carry 2 pkeys") {
		t.Errorf("a port off the fabric reaching the capacity: err = %v, want the port limit's refusal", err)
	}
}

// Two additions of one GUID, each under the capacity alone and over it
// together, sent at once: the check runs under the revision's lock against
// what the other recorded, so one of them is refused.
func testPortLimitConcurrent(t *testing.T, s *store.Store) {
	ctx := t.Context()
	s = offFabricLimit(t, s, 4)
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, limited(guidA))))
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.AddKubernetesGUIDs(ctx, kubeAdd(fabric.PKey(0x1002+i), limited(guidA)))
			errs <- err
		}()
	}
	accepted := 0
	for range n {
		err := <-errs
		var rej *store.RejectedError
		switch {
		case err == nil:
			accepted++
		case !errors.As(err, &rej):
			t.Fatalf("concurrent addition: %v", err)
		}
	}
	if accepted != 1 {
		t.Errorf("%d of %d concurrent additions accepted; want 1 (the default, 0x1001 and one more fill 3 of 4)", accepted, n)
	}
	pkeys, err := s.KubernetesPKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, p := range pkeys {
		for _, m := range p.Members {
			if m.GUID == fabric.GUID(guidA) {
				held++
			}
		}
	}
	if held != 2 {
		t.Errorf("GUID in %d pkeys, want 2", held)
	}
}

// A GUID sent at once as a Neutron port's and into a Kubernetes pkey, again
// and again: the two lanes commit in separate transactions, each judged under
// the revision's lock against what the other recorded, so the GUID ends in
// one side only.
func testConcurrentNeutronKubernetesClaims(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	addNetwork(t, s, netA, 101)
	for i := range 8 {
		g := uint64(0x0002c90300010000) + uint64(i)
		port := make(chan error, 1)
		go func() {
			_, err := addPort(t, s, fmt.Sprintf("port-%d", i), netA, g)
			port <- err
		}()
		_, kerr := s.AddKubernetesGUIDs(ctx, kubeAdd(fabric.PKey(0x1100+i), limited(g)))
		perr := <-port
		var rej *store.RejectedError
		for _, err := range []error{perr, kerr} {
			if err != nil && !errors.As(err, &rej) {
				t.Fatalf("GUID %x: %v", g, err)
			}
		}
		if (perr == nil) == (kerr == nil) {
			t.Fatalf("GUID %x: port %v, Kubernetes %v; want exactly one accepted", g, perr, kerr)
		}
	}
}

// testKubernetesReplace replaces a pkey's members (UFM's PUT): a member not
// listed leaves in the same change, a listed one takes the membership asked,
// and max_members_per_pkey counts the members the pkey keeps, not those it
// had.
func testKubernetesReplace(t *testing.T, s *store.Store) {
	s = s.WithRules(store.Rules{
		PhysicalNetworks: []string{"ibnet"}, FlatPKey: store.DefaultFlatPKey,
		KubernetesRange: kubeRange, KubernetesMaxMembersPerPKey: 2,
	})
	ctx := t.Context()
	const guidD uint64 = 0x0002c9030000d00d
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidA), limited(guidB))))
	put := kubeAdd(0x1005, full(guidB), limited(guidD))
	put.Replace = true
	j := mustKube(t)(s.AddKubernetesGUIDs(ctx, put))
	if j.Operation != store.OpAddKubernetesGUIDs || !strings.Contains(j.Description, "Set the members of Kubernetes pkey 0x1005") ||
		!strings.Contains(j.Result, fmt.Sprintf("%016x are no members any more", guidA)) {
		t.Fatalf("replace: job = %+v", j)
	}
	want := []store.KubernetesMember{since(limited(guidD), 2), since(full(guidB), 2)}
	if got, err := s.GetKubernetesPKey(ctx, 0x1005); err != nil || !reflect.DeepEqual(got.Members, want) {
		t.Fatalf("after replace: %+v, %v; want members %+v", got, err, want)
	}
	// A replacement of a pkey not recorded creates it, as an addition does.
	put = kubeAdd(0x1006, full(guidA))
	put.Replace = true
	mustKube(t)(s.AddKubernetesGUIDs(ctx, put))
	if got, err := s.GetKubernetesPKey(ctx, 0x1006); err != nil || len(got.Members) != 1 || !got.IPoIB {
		t.Fatalf("replace of a new pkey: %+v, %v", got, err)
	}
}

// testKubernetesPartitionName records the name a client gives a pkey: read
// back by one pkey and by the list, kept by a later change that gives none,
// replaced by one that gives another, gone with the pkey.
func testKubernetesPartitionName(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	named := kubeAdd(0x1005, full(guidA))
	named.PartitionName = "tenant_a"
	mustKube(t)(s.AddKubernetesGUIDs(ctx, named))
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, limited(guidB))))
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1006, limited(guidB))))
	list, err := s.KubernetesPKeys(ctx)
	if err != nil || len(list) != 2 || list[0].PartitionName != "tenant_a" || list[1].PartitionName != "" {
		t.Fatalf("KubernetesPKeys = %+v, %v; want 0x1005 named tenant_a, 0x1006 unnamed", list, err)
	}
	named.PartitionName = "tenant_b"
	mustKube(t)(s.AddKubernetesGUIDs(ctx, named))
	if got, err := s.GetKubernetesPKey(ctx, 0x1005); err != nil || got.PartitionName != "tenant_b" {
		t.Fatalf("renamed: %+v, %v", got, err)
	}
	mustKube(t)(s.DeleteKubernetesPKey(ctx, store.KubernetesDeletion{PKey: 0x1005}))
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidA))))
	if got, err := s.GetKubernetesPKey(ctx, 0x1005); err != nil || got.PartitionName != "" {
		t.Fatalf("created again after its deletion: %+v, %v; want no name", got, err)
	}
}

// A replacement (UFM's PUT) and an addition (a POST) of one pkey sent at
// once, again and again: each reads the members under the revision's lock,
// so the pkey ends as one after the other, {A} or {A, B}; never B alone,
// which a replacement that read the members before the addition committed
// and deleted after would leave.
func testConcurrentReplaceAndAddition(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	for i := range 6 {
		pkey := fabric.PKey(0x1100 + i)
		mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(pkey, limited(guidC+1))))
		put := kubeAdd(pkey, store.KubernetesMember{GUID: fabric.GUID(guidA), Membership: fabric.Full})
		put.Replace = true
		errs := make(chan error, 2)
		go func() { _, err := s.AddKubernetesGUIDs(ctx, put); errs <- err }()
		go func() { _, err := s.AddKubernetesGUIDs(ctx, kubeAdd(pkey, limited(guidB))); errs <- err }()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("concurrent change of pkey %s: %v", pkey, err)
			}
		}
		got, err := s.GetKubernetesPKey(ctx, pkey)
		if err != nil {
			t.Fatal(err)
		}
		var guids []fabric.GUID
		for _, m := range got.Members {
			guids = append(guids, m.GUID)
		}
		one, both := []fabric.GUID{fabric.GUID(guidA)}, []fabric.GUID{fabric.GUID(guidA), fabric.GUID(guidB)}
		if !reflect.DeepEqual(guids, one) && !reflect.DeepEqual(guids, both) {
			t.Errorf("pkey %s after a concurrent replacement and addition holds %v; want %v or %v", pkey, guids, one, both)
		}
	}
}
