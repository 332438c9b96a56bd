package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The adopted partitions (--adopt-partitions, --release-adopted), on every
// engine.

var adoptedTests = []storeTest{
	{"AdoptIsOneChangeAndIdempotent", testAdoptIdempotent},
	{"AdoptedPkeyTakenOverByANetworkKeepsItsMembersUntilReleased", testAdoptedTakeOver},
	{"AdoptSkipsGUIDsAnOwnerHolds", testAdoptSkipsOwned},
	{"ReleaseKeepsTheGivenGUIDs", testReleaseKeeps},
	{"ReleaseOfOwnedOnlyLeavesAnUnownedPKey", testReleaseOwnedOnly},
	{"DeletingTheOwnerReleasesTheAdoptedMembers", testOwnerDeletion},
	{"KubernetesTakeOverAndDeletion", testAdoptedKubernetes},
	{"KubernetesTakeOverSaysHowTheFlagsChange", testAdoptedKubernetesFlags},
	{"ReleaseRacingAPortOfTheSameGUID", testReleaseRacesPort},
	{"AdoptionRacingAPortOfTheSameGUID", testAdoptionRacesPort},
	{"TwoAdoptionsAtOnce", testTwoAdoptions},
}

const (
	adoptedA = 0x0002c90300000a01
	adoptedB = 0x0002c90300000a02
	adoptedC = 0x0002c90300000a03
)

// statement parses one partition statement.
func statement(t *testing.T, text string) partitions.Statement {
	t.Helper()
	st, err := partitions.ParseStatement(text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return st
}

func adopt(t *testing.T, s *store.Store, texts ...string) store.AdoptionOutcome {
	t.Helper()
	a := store.Adoption{CreatedBy: "operator"}
	for _, text := range texts {
		a.Partitions = append(a.Partitions, statement(t, text))
	}
	out, err := s.AdoptPartitions(t.Context(), a)
	if err != nil {
		t.Fatalf("AdoptPartitions: %v", err)
	}
	return out
}

// adoptedMembers is every adopted partition of the snapshot as
// "pkey:guid=membership" strings.
func adoptedMembers(t *testing.T, s *store.Store) []string {
	t.Helper()
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range snap.Adopted {
		for _, m := range a.Statement.Members {
			out = append(out, fmt.Sprintf("%s:%s=%s", a.PKey, m.GUID, m.Membership))
		}
	}
	return out
}

func wantAdopted(t *testing.T, s *store.Store, want ...string) {
	t.Helper()
	if got := adoptedMembers(t, s); !slices.Equal(got, want) {
		t.Errorf("adopted members %v, want %v", got, want)
	}
}

var (
	tenant16 = fmt.Sprintf("tenant_a=0x0010, ipoib, mtu=5 : 0x%016x=full, 0x%016x=limited ;", adoptedA, adoptedB)
	tenant32 = fmt.Sprintf("tenant_b=0x0020 : 0x%016x=full ;", adoptedC)
)

func testAdoptIdempotent(t *testing.T, s *store.Store) {
	out := adopt(t, s, tenant16, tenant32)
	if !out.Changed || out.Job.Revision != 1 || out.Job.Status != store.StatusPending ||
		out.Job.Operation != store.OpAdoptPartitions || out.Job.ObjectType != store.ObjectAdoptedPartition {
		t.Fatalf("first adoption: %+v", out)
	}
	wantAdopted(t, s, "0x0010:0x0002c90300000a01=full", "0x0010:0x0002c90300000a02=limited", "0x0020:0x0002c90300000a03=full")
	list, err := s.AdoptedPartitions(t.Context())
	if err != nil || len(list) != 2 || list[0].Statement.Text() != statement(t, tenant16).Text() {
		t.Fatalf("AdoptedPartitions = %+v, %v", list, err)
	}
	jobs := jobCount(t, s)
	again := adopt(t, s, tenant16, tenant32)
	if again.Changed || again.Job.ID != 0 || revision(t, s) != 1 || jobCount(t, s) != jobs {
		t.Errorf("the same file again: %+v, revision %d, %d jobs (%d before): want nothing recorded", again, revision(t, s), jobCount(t, s), jobs)
	}
	for _, want := range []string{"partition tenant_a (0x0010): left alone: adopted already as the file has it",
		"partition tenant_b (0x0020): left alone: adopted already as the file has it"} {
		if !slices.Contains(again.Notes, want) {
			t.Errorf("the same file again: notes %q lack %q", again.Notes, want)
		}
	}
	// One partition changed: it alone is written, its line says what changed.
	changed := adopt(t, s, strings.Replace(tenant16, ", mtu=5", "", 1), tenant32)
	if !changed.Changed || changed.Job.ID == 0 || revision(t, s) != 2 || jobCount(t, s) != jobs+1 ||
		!slices.Contains(changed.Notes, "partition tenant_a (0x0010): changed: adopted again as the file has it, 2 members (2 recorded), flags: mtu=5 dropped") {
		t.Errorf("one partition changed: %+v, revision %d: want it written and its line to say mtu=5 dropped", changed, revision(t, s))
	}
	// A refused adoption records nothing.
	_, err = s.AdoptPartitions(t.Context(), store.Adoption{Partitions: []partitions.Statement{
		statement(t, tenant16), statement(t, strings.Replace(tenant32, "0x0020", "0x0010", 1))}})
	wantRefused(t, s, err, 2)
}

// builtinFlags is store.Rules.PartitionFlags of the built-in template.
func builtinFlags(ctx context.Context, st partitions.State, pkey fabric.PKey) ([]partitions.Flag, bool, error) {
	st.DefaultPartition, st.Flat.PKey = "Default=0x7fff, ipoib : ALL=limited, SELF=full ;", store.DefaultFlatPKey
	return partitions.BuiltinTemplate().HeaderFlags(ctx, st, pkey)
}

func testAdoptedTakeOver(t *testing.T, s *store.Store) {
	adopt(t, s, tenant16)
	// The network's partition is written as the template writes a
	// network's (ipoib): its job says the adopted mtu=5 is gone.
	j := addNetwork(t, s.WithRules(store.Rules{PartitionFlags: builtinFlags}), netA, 16)
	if want := "; it takes over the adopted partition tenant_a (0x0010), whose flags change: mtu=5 dropped"; !strings.HasSuffix(j.Result, want) {
		t.Errorf("the network's job result %q does not end %q", j.Result, want)
	}
	wantAdopted(t, s, "0x0010:0x0002c90300000a01=full", "0x0010:0x0002c90300000a02=limited")
	// networking-mlnx sends the ports one at a time: each takes its GUID over.
	j, err := addPort(t, s, "port-a", netA, adoptedA)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.Result, "left the adopted partitions 0x0010") {
		t.Errorf("port job result %q does not say the GUID left its adoption", j.Result)
	}
	wantAdopted(t, s, "0x0010:0x0002c90300000a02=limited")
	out, err := s.ReleaseAdoptedMembers(t.Context(), store.AdoptedRelease{PKey: 0x10, CreatedBy: "operator"})
	if err != nil || !slices.Equal(out.Released, []fabric.GUID{adoptedB}) || out.Left != 0 || out.Job.Status != store.StatusPending {
		t.Fatalf("release: %+v, %v", out, err)
	}
	wantAdopted(t, s)
	if _, err := s.ReleaseAdoptedMembers(t.Context(), store.AdoptedRelease{PKey: 0x10}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("releasing a pkey no longer adopted: %v, want ErrNotFound", err)
	}
}

func testAdoptSkipsOwned(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 40)
	if _, err := addPort(t, s, "port-a", netA, adoptedA); err != nil {
		t.Fatal(err)
	}
	out := adopt(t, s, tenant16)
	if !strings.Contains(strings.Join(out.Notes, "\n"), "member 0x0002c90300000a01 not adopted: port port-a") {
		t.Errorf("notes %q do not name the port that holds the GUID", out.Notes)
	}
	wantAdopted(t, s, "0x0010:0x0002c90300000a02=limited")
}

func testReleaseKeeps(t *testing.T, s *store.Store) {
	adopt(t, s, tenant16)
	out, err := s.ReleaseAdoptedMembers(t.Context(), store.AdoptedRelease{PKey: 0x10, Keep: []fabric.GUID{adoptedB}})
	if err != nil || !slices.Equal(out.Released, []fabric.GUID{adoptedA}) || out.Left != 1 {
		t.Fatalf("release: %+v, %v", out, err)
	}
	wantAdopted(t, s, "0x0010:0x0002c90300000a02=limited")
	rev := revision(t, s)
	out, err = s.ReleaseAdoptedMembers(t.Context(), store.AdoptedRelease{PKey: 0x10, Keep: []fabric.GUID{adoptedB}})
	if err != nil || len(out.Released) != 0 || out.Job.Status != store.StatusCompleted || revision(t, s) != rev {
		t.Errorf("releasing nothing: %+v, %v, revision %d (was %d)", out, err, revision(t, s), rev)
	}
}

// An import's release (OwnedOnly) changes nothing while only the adoption
// holds the pkey, and releases once a network took it over.
func testReleaseOwnedOnly(t *testing.T, s *store.Store) {
	adopt(t, s, tenant16)
	rev := revision(t, s)
	release := store.AdoptedRelease{PKey: 0x10, Keep: []fabric.GUID{adoptedB}, OwnedOnly: true}
	if _, err := s.ReleaseAdoptedMembers(t.Context(), release); !errors.Is(err, store.ErrAdoptedUnowned) {
		t.Errorf("an owned-only release of an unowned pkey: %v, want ErrAdoptedUnowned", err)
	}
	wantAdopted(t, s, "0x0010:0x0002c90300000a01=full", "0x0010:0x0002c90300000a02=limited")
	if revision(t, s) != rev {
		t.Errorf("the refused release moved the revision %d -> %d", rev, revision(t, s))
	}
	addNetwork(t, s, netA, 16)
	out, err := s.ReleaseAdoptedMembers(t.Context(), release)
	if err != nil || !slices.Equal(out.Released, []fabric.GUID{adoptedA}) || out.Left != 1 {
		t.Fatalf("the owned-only release once a network owns the pkey: %+v, %v", out, err)
	}
	wantAdopted(t, s, "0x0010:0x0002c90300000a02=limited")
}

// A network deleted while adopted members remain takes them with it: the next
// network on the VLAN, perhaps another tenant's, starts without them.
func testOwnerDeletion(t *testing.T, s *store.Store) {
	adopt(t, s, tenant16, tenant32)
	addNetwork(t, s, netA, 16)
	if _, err := s.RemoveNetwork(t.Context(), store.NetworkRemoval{NetworkID: netA, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	wantAdopted(t, s, "0x0020:0x0002c90300000a03=full")
	// A network moved off an adopted pkey leaves its adopted members too.
	addNetwork(t, s, netB, 32)
	mustNetwork(t, s, vlanNetwork(netB, 33))
	wantAdopted(t, s)
}

func testAdoptedKubernetes(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	adopt(t, s, fmt.Sprintf("pods=0x1005 : 0x%016x=full, 0x%016x=limited ;", adoptedA, adoptedB))
	mustKube(t)(s.AddKubernetesGUIDs(t.Context(), kubeAdd(0x1005, limited(adoptedC))))
	wantAdopted(t, s, "0x1005:0x0002c90300000a01=full", "0x1005:0x0002c90300000a02=limited")
	mustKube(t)(s.AddKubernetesGUIDs(t.Context(), kubeAdd(0x1006, full(adoptedA))))
	wantAdopted(t, s, "0x1005:0x0002c90300000a02=limited")
	if _, err := s.DeleteKubernetesPKey(t.Context(), store.KubernetesDeletion{PKey: 0x1005}); err != nil {
		t.Fatal(err)
	}
	wantAdopted(t, s)
}

// A Kubernetes pkey created where an adopted partition is (by an addition
// or a creation) takes it over: its job names the partition and how its
// flags change, the owner's replacing the adopted mtu=4, as a network's
// does; a later change of the pkey says nothing of it.
func testAdoptedKubernetesFlags(t *testing.T, s *store.Store) {
	rules := kubeRules()
	rules.PartitionFlags = builtinFlags
	s = s.WithRules(rules)
	adopt(t, s, fmt.Sprintf("pods=0x1005, ipoib, mtu=4 : 0x%016x=full ;", adoptedA),
		fmt.Sprintf("files=0x1006, ipoib, mtu=4 : 0x%016x=full ;", adoptedB))
	added := mustKube(t)(s.AddKubernetesGUIDs(t.Context(), kubeAdd(0x1005, limited(adoptedC))))
	created := mustKube(t)(s.CreateKubernetesPKey(t.Context(), store.KubernetesCreation{PKey: 0x1006, IPoIB: true,
		CreatedBy: "ib-kubernetes", Request: "{}"}))
	again := mustKube(t)(s.AddKubernetesGUIDs(t.Context(), kubeAdd(0x1005, full(guidA))))
	for _, c := range []struct {
		what, result, want string
	}{
		{"the addition that creates pkey 0x1005", added.Result, "; it takes over the adopted partition pods (0x1005), whose flags change: mtu=4 dropped"},
		{"the creation of pkey 0x1006", created.Result, "; it takes over the adopted partition files (0x1006), whose flags change: mtu=4 dropped"},
	} {
		if !strings.HasSuffix(c.result, c.want) {
			t.Errorf("%s: job result %q does not end %q", c.what, c.result, c.want)
		}
	}
	if strings.Contains(again.Result, "takes over") {
		t.Errorf("a later addition to pkey 0x1005: job result %q speaks of a take-over again", again.Result)
	}
}

// An operator's release and networking-mlnx's port for the same GUID, at
// once: whichever commits first, the port holds the GUID and no adoption
// keeps it.
func testReleaseRacesPort(t *testing.T, s *store.Store) {
	for round := range 5 {
		pkey := fabric.PKey(0x10 + round)
		net := fmt.Sprintf("%08d-0000-4000-8000-000000000000", round)
		g := uint64(adoptedA + round)
		adopt(t, s, fmt.Sprintf("t%d=%s : 0x%016x=full, 0x%016x=full ;", round, pkey, g, adoptedB+0x100*uint64(round)))
		addNetwork(t, s, net, int64(pkey))
		var wg sync.WaitGroup
		var portErr, releaseErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, portErr = addPort(t, s, "port-"+net, net, g)
		}()
		go func() {
			defer wg.Done()
			_, releaseErr = s.ReleaseAdoptedMembers(t.Context(), store.AdoptedRelease{PKey: pkey})
		}()
		wg.Wait()
		if portErr != nil || (releaseErr != nil && !errors.Is(releaseErr, store.ErrNotFound)) {
			t.Fatalf("round %d: port %v, release %v", round, portErr, releaseErr)
		}
		snap, err := s.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held := slices.ContainsFunc(snap.Members, func(m store.Member) bool { return m.GUID == fabric.GUID(g) })
		for _, a := range snap.Adopted {
			if a.PKey == pkey && slices.ContainsFunc(a.Statement.Members, func(m partitions.Member) bool { return m.GUID == fabric.GUID(g) }) {
				t.Errorf("round %d: GUID %x still adopted beside its port", round, g)
			}
		}
		if !held {
			t.Errorf("round %d: the port does not hold GUID %x", round, g)
		}
	}
}

// A port change reads the adopted partitions only when its rows count some
// (store.releaseGUIDs): an adoption of its GUID committed at the same moment,
// on a fabric that adopts nothing else, is either seen and released by the
// port's change, or finds the GUID owned and skips it. Never both the port
// and the adopted partition hold it.
func testAdoptionRacesPort(t *testing.T, s *store.Store) {
	for round := range 6 {
		pkey := fabric.PKey(0x30 + round)
		net := fmt.Sprintf("%08d-0000-4000-8000-00000000ad00", round)
		g := uint64(adoptedA + 0x10*round)
		addNetwork(t, s, net, int64(0x40+round))
		var wg sync.WaitGroup
		var portErr, adoptErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, portErr = addPort(t, s, "port-"+net, net, g)
		}()
		go func() {
			defer wg.Done()
			st, err := partitions.ParseStatement(fmt.Sprintf("r%d=%s : 0x%016x=full, 0x%016x=full ;", round, pkey, g, g+1))
			if err == nil {
				_, err = s.AdoptPartitions(t.Context(), store.Adoption{CreatedBy: "operator", Partitions: []partitions.Statement{st}})
			}
			adoptErr = err
		}()
		wg.Wait()
		if portErr != nil || adoptErr != nil {
			t.Fatalf("round %d: port %v, adoption %v", round, portErr, adoptErr)
		}
		for _, m := range adoptedMembers(t, s) {
			if strings.Contains(m, fabric.GUID(g).String()) {
				t.Errorf("round %d: GUID %x adopted (%s) beside its port", round, g, m)
			}
		}
		// The next round starts on a fabric that adopts nothing again.
		if _, err := s.ReleaseAdoptedMembers(t.Context(), store.AdoptedRelease{PKey: pkey}); err != nil {
			t.Fatal(err)
		}
		if left := adoptedMembers(t, s); len(left) != 0 {
			t.Fatalf("round %d: adopted after the release: %v", round, left)
		}
	}
}

func testTwoAdoptions(t *testing.T, s *store.Store) {
	var wg sync.WaitGroup
	outs := make([]store.AdoptionOutcome, 2)
	errs := make([]error, 2)
	for i, text := range []string{tenant16, tenant32} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = s.AdoptPartitions(t.Context(), store.Adoption{Partitions: []partitions.Statement{statement(t, text)}})
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || outs[0].Job.Revision == outs[1].Job.Revision {
		t.Fatalf("two adoptions: %v %v, revisions %d %d", errs[0], errs[1], outs[0].Job.Revision, outs[1].Job.Revision)
	}
	wantAdopted(t, s, "0x0010:0x0002c90300000a01=full", "0x0010:0x0002c90300000a02=limited", "0x0020:0x0002c90300000a03=full")
}
