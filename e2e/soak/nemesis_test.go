package soak

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// TestDealEveryKind: each deck deals every kind once, so that a short run
// with a fault in each round meets every kind.
func TestDealEveryKind(t *testing.T) {
	r := &run{rng: rand.New(rand.NewPCG(1, 2)), faultKind: []string{faultDBLatency, faultDBPartition, faultGaleraWriters,
		faultSlowSweep, faultPKeyErrors, faultRestoreDB}}
	for deck := range 3 {
		var dealt []string
		for range len(r.faultKind) {
			dealt = append(dealt, r.deal())
		}
		slices.Sort(dealt)
		want := slices.Sorted(slices.Values(r.faultKind))
		if !slices.Equal(dealt, want) {
			t.Errorf("deck %d dealt %v, want each of %v once", deck, dealt, want)
		}
	}
}

// TestDealFirstKindsFirst: the first deck deals the run's first kinds
// before any other, whatever the seed; later decks deal every kind in turn.
func TestDealFirstKindsFirst(t *testing.T) {
	kinds := []string{faultKillManager, faultDBLatency, faultDropSets, faultSlowSweep, faultCloneGUID, faultTenantSM}
	first := []string{faultDropSets, faultCloneGUID, faultTenantSM}
	for seed := range uint64(20) {
		r := &run{rng: rand.New(rand.NewPCG(seed, 2)), faultKind: kinds, o: Options{FirstFaults: first}}
		var dealt []string
		for range 2 * len(kinds) {
			dealt = append(dealt, r.deal())
		}
		if got := slices.Sorted(slices.Values(dealt[:len(first)])); !slices.Equal(got, slices.Sorted(slices.Values(first))) {
			t.Fatalf("seed %d: first deck began %v, want %v first", seed, dealt[:len(first)], first)
		}
		for deck := range 2 {
			got := slices.Sorted(slices.Values(dealt[deck*len(kinds) : (deck+1)*len(kinds)]))
			if !slices.Equal(got, slices.Sorted(slices.Values(kinds))) {
				t.Fatalf("seed %d: deck %d dealt %v, want each of %v once", seed, deck, got, kinds)
			}
		}
	}
}

// TestScheduleDealsEveryHostileKindFirst: on any seed, each hostile
// tenant's kind an engine lists comes in its first rounds, whatever the
// rate draws (one seed in ten had fewer than three faults in a run of 40
// operations at 30 %, and seed 1 dealt none of them to PostgreSQL and
// MariaDB); with FirstFaults unset too, and only those listed. The rounds
// after them pay the forced faults back: a run keeps the rate's count.
func TestScheduleDealsEveryHostileKindFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds []string
		first []string // FirstFaults
		want  []string // dealt in the first rounds
	}{
		{name: "CI's kinds and the hostile ones", kinds: append(slices.Clone(CIFaults), TenantFaults...), want: TenantFaults},
		{name: "two hostile kinds", kinds: []string{faultKillManager, faultDropSets, faultLink, faultTenantSM},
			want: []string{faultDropSets, faultTenantSM}},
		{name: "a first kind beside them", kinds: []string{faultKillManager, faultCloneGUID, faultLink, faultSlowSweep},
			first: []string{faultSlowSweep}, want: []string{faultCloneGUID, faultSlowSweep}},
		{name: "no hostile kind", kinds: CIFaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total := 0
			for seed := range uint64(200) {
				r := &run{rng: rand.New(rand.NewPCG(seed, 0x50a4)), faultKind: tc.kinds,
					o: Options{FaultRate: DefaultFaultRate, FirstFaults: tc.first}}
				var dealt []string
				faults := 0
				for range 16 { // a run of 40 operations
					if at, kind := r.placeFault(1 + r.rng.IntN(4)); at >= 0 {
						dealt, faults = append(dealt, kind), faults+1
					} else if len(dealt) < len(tc.want) {
						t.Fatalf("seed %d: a round without a fault after %v, before each of %v", seed, dealt, tc.want)
					}
				}
				if got := slices.Sorted(slices.Values(dealt[:len(tc.want)])); !slices.Equal(got, slices.Sorted(slices.Values(tc.want))) {
					t.Fatalf("seed %d: the first faults were %v; want each of %v first", seed, dealt, tc.want)
				}
				if len(tc.want) == 0 && faults == 16 {
					t.Fatalf("seed %d: a fault in every round without a first kind; want the rate's", seed)
				}
				total += faults
			}
			// The forced faults are paid back: a run has about the rate's
			// count of them (30 % of 16 rounds), not three more.
			if mean, want := float64(total)/200, 0.3*16; mean < want-0.5 || mean > want+0.5 {
				t.Errorf("%.2f faults a run of 16 rounds on average; want the rate's %.1f", mean, want)
			}
		})
	}
}

// TestModelSnapshotRestore: a restore puts the recorded state back, and
// later changes to the model do not reach the snapshot.
func TestModelSnapshotRestore(t *testing.T) {
	h1 := fabricsim.HostGUID(1)
	hosts := []fabric.GUID{h1}
	m := NewModel()
	m.PutNetwork(network{ID: "n1", Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(101)}).Apply()
	m.PutPort(portRequest{ID: "p1", s: sent{Network: "n1", Host: "compute-1", DeviceOwner: "compute:nova",
		ClientID: "20:" + guidOctets(h1), GUID: &h1}}).Apply()
	snap := m.snapshot()
	backupParts, backupTables := m.Partitions(), m.Tables(hosts)
	m.DeletePort("p1", &h1).Apply()
	m.PutNetwork(network{ID: "n2", Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(102)}).Apply()
	if m.Partitions() == backupParts {
		t.Fatal("the changes after the snapshot changed nothing: the test proves nothing")
	}
	m.restore(snap)
	if got := m.Partitions(); got != backupParts {
		t.Errorf("restored partitions %s, want the snapshot's %s", got, backupParts)
	}
	if got := m.Tables(hosts)[h1]; !slices.Equal(got, backupTables[h1]) {
		t.Errorf("restored table %s, want %s", hexKeys(got), hexKeys(backupTables[h1]))
	}
	m.DeletePort("p1", &h1).Apply() // must not reach the snapshot
	m.restore(snap)
	if got := m.Partitions(); got != backupParts {
		t.Errorf("a second restore gives %s, want %s", got, backupParts)
	}
}

func TestMergeParts(t *testing.T) {
	got := mergeParts("0x0065:a;0x7ffe:;", "0x1001:b,c;0x1003:;")
	if want := "0x0065:a;0x1001:b,c;0x1003:;0x7ffe:;"; got != want {
		t.Errorf("mergeParts = %s, want %s", got, want)
	}
}
