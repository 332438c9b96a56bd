package applier

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// A host port already at its switch port's capacity (the template gained
// static partitions, say) is recorded as an enforcement error, which closes
// the gates; ports below it are not.
func TestRecordOverCapacity(t *testing.T) {
	dump := filepath.Join(t.TempDir(), topology.FileName)
	real, err := os.ReadFile(filepath.Join("..", "topology", "testdata", "good", "ibsim-5-hosts-2-switches.lst"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dump, real, 0o644); err != nil {
		t.Fatal(err)
	}
	const h1, h2 = fabric.GUID(0x0002c90300000101), fabric.GUID(0x0002c90300000201)
	static := func(g fabric.GUID) []fabric.PKey { // every host in two static partitions
		return []fabric.PKey{0x0200, 0x0201}
	}
	s := storetest.Open(t, config.EngineSQLite)
	tm := &term{Applier: &Applier{Store: s, Log: slog.New(slog.DiscardHandler), Cfg: Config{
		FlatPKey:  0x7ffe,
		PortLimit: &topology.PortLimit{DumpFile: dump, Capacity: 4, Static: static},
	}}}
	pkey := fabric.PKey(0x0065)
	snap := store.Snapshot{
		Networks: []store.Network{{ID: "net-a", PKey: &pkey, Managed: true}, {ID: "net-flat", Managed: true}},
		Members:  []store.Member{{NetworkID: "net-a", GUID: h1}},
	}
	// H1: default, 0x0200, 0x0201 and 0x0065 = 4 = the capacity.
	topo, err := topology.NewDump(dump).Load()
	if err := tm.recordOverCapacity(t.Context(), State(snap, tm.Cfg.DefaultPartition, tm.Cfg.FlatPKey), dumpRead{topo, err}); err != nil {
		t.Fatal(err)
	}
	got, err := s.EnforcementErrors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].SwitchPort() != "0x0002c90300f00001:2" ||
		!strings.Contains(got[0].Line, "host port 0x0002c90300000101 carries 4 pkeys") {
		t.Fatalf("recorded %+v, want H1's switch port 0x0002c90300f00001:2", got)
	}
	reasons, err := Gates{Store: s, SubnetDump: dump}.Closed(t.Context())
	if err != nil || !slices.ContainsFunc(reasons, func(r GateReason) bool {
		return r.Kind == GateEnforcementCleared && strings.HasPrefix(r.Text, EnforcementCleared)
	}) {
		t.Errorf("gates: %q, %v; want closed by the enforcement error", reasons, err)
	}

	// Below the capacity (H2 alone, capacity 5): nothing more is recorded.
	if _, err := s.ClearEnforcementErrors(t.Context()); err != nil {
		t.Fatal(err)
	}
	tm.Cfg.PortLimit = &topology.PortLimit{DumpFile: dump, Capacity: 5, Static: static}
	snap.Members = []store.Member{{NetworkID: "net-a", GUID: h1}, {NetworkID: "net-flat", GUID: h2}}
	if err := tm.recordOverCapacity(t.Context(), State(snap, tm.Cfg.DefaultPartition, tm.Cfg.FlatPKey), dumpRead{topo, err}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.EnforcementErrors(t.Context()); len(got) != 0 {
		t.Errorf("recorded %+v below the capacity", got)
	}
}

// faultyStore is the applier's real store with some of its writes refused,
// as a database that is away or refuses them would: fails says, for each call
// of the method named, whether it fails (calls past the list succeed).
type faultyStore struct {
	Store
	mu    sync.Mutex
	fails map[string][]bool
	calls map[string]int
}

var errRefused = errors.New("the database refused the write (injected)")

func (f *faultyStore) fail(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	n := f.calls[method]
	f.calls[method]++
	if n < len(f.fails[method]) && f.fails[method][n] {
		return errRefused
	}
	return nil
}

func (f *faultyStore) RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error {
	if err := f.fail("RecordEnforcementErrors"); err != nil {
		return err
	}
	return f.Store.RecordEnforcementErrors(ctx, term, seen)
}

func (f *faultyStore) FailJob(ctx context.Context, term, id int64, reason string) (int64, error) {
	if err := f.fail("FailJob"); err != nil {
		return 0, err
	}
	return f.Store.FailJob(ctx, term, id, reason)
}

// The capacity check fails closed: OpenSM stops enforcing on a full switch
// port without a word, so when its finding cannot be recorded no job
// completes, and a later apply records it (and the gates then hold the job).
func TestOverCapacityRecordFailureCompletesNothing(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	// H1: the default partition and the network's fill a 2-entry table.
	r.term.Cfg.PortLimit = &topology.PortLimit{DumpFile: r.dump, Capacity: 2}
	faulty := &faultyStore{Store: r.st, fails: map[string][]bool{"RecordEnforcementErrors": {true}}}
	r.term.Store = faulty
	r.network(101)
	job := r.port("port-h1", 0x0002c90300000101)

	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Errorf("apply with the finding not recorded: %v, want a retry", res)
	}
	if j := r.job(job.ID); j.Status == store.StatusCompleted {
		t.Fatalf("the job completed although H1's full switch port could not be recorded: %+v", j)
	}
	if got := recorded(t, r.st); len(got) != 0 {
		t.Fatalf("recorded %q although the write failed", got)
	}

	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply with the database back: %v, want done", res)
	}
	if got := recorded(t, r.st); len(got) != 1 || !strings.HasPrefix(got[0], "0x0002c90300f00001:") {
		t.Errorf("recorded %q, want H1's switch port on S1", got)
	}
	if j := r.job(job.ID); j.Status == store.StatusCompleted || !strings.Contains(j.Description, EnforcementCleared) {
		t.Errorf("job %+v; want it open, held by the recorded finding", j)
	}
}

// Kubernetes memberships recorded past a GUID's capacity (by a manager with a
// larger switch_pkey_capacity, or before the capacity was lowered) never reach
// the file, whether the GUID is on the fabric or not: OpenSM would give them to
// the port at the sweep that finds it, filling its switch port's table. The
// latest are left out and their jobs fail; the GUID keeps its older pkeys,
// every other port its own, and no gate closes for anyone.
func TestOverCapacityMembershipsAreWithheld(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	r.term.Cfg.PortLimit = &topology.PortLimit{DumpFile: r.dump, Capacity: 4} // 3 pkeys: the default and two
	// No port limit where they were recorded.
	kube := r.st.WithRules(store.Rules{KubernetesRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff}})
	const (
		offFabric = fabric.GUID(0x0002c90300000601) // not in the dump: link down, or virtual
		h1        = fabric.GUID(0x0002c90300000101) // behind switch port 0x0002c90300f00001:2
		other     = fabric.GUID(0x0002c90300000701)
	)
	add := func(pkey fabric.PKey, gs ...fabric.GUID) store.Job {
		t.Helper()
		a := store.KubernetesAddition{PKey: pkey}
		for _, g := range gs {
			a.Members = append(a.Members, store.KubernetesMember{GUID: g, Membership: fabric.Full})
		}
		j, err := kube.AddKubernetesGUIDs(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	jobs := []store.Job{add(0x1001, offFabric, other), add(0x1002, offFabric, h1), add(0x1003, offFabric),
		add(0x1004, offFabric, h1), add(0x1005, h1)}
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	want := []string{store.StatusCompleted, store.StatusCompleted, store.StatusFailed, store.StatusFailed,
		store.StatusFailed}
	for i, j := range jobs {
		got := r.job(j.ID)
		if got.Status != want[i] {
			t.Errorf("job %d (%s): %s (%s), want %s", i, got.Description, got.Status, got.Error, want[i])
		}
		if got.Status == store.StatusFailed && !strings.Contains(got.Error, "switch_pkey_capacity") {
			t.Errorf("job %d failed without saying why: %q", i, got.Error)
		}
	}
	file, err := os.ReadFile(r.term.Cfg.PartitionsFile)
	if err != nil {
		t.Fatal(err)
	}
	for g, n := range map[fabric.GUID]int{offFabric: 2, h1: 2, other: 1} {
		if got := strings.Count(string(file), g.String()); got != n {
			t.Errorf("%s is in %d partitions of the file, want %d:\n%s", g, got, n, file)
		}
	}
	if got, err := r.st.EnforcementErrors(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("enforcement errors %+v, %v; want none: nothing in the file overflows", got, err)
	}
	// --render and the drift check render the same file.
	snap, err := r.st.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Render(t.Context(), snap, r.term.Cfg.RenderInput()); err != nil || got.Problems != nil || string(got.Text) != string(file) {
		t.Errorf("Render: %v, %v; want the file written", err, got.Problems)
	}
}

// BenchmarkWithhold is the capacity pass of every render over [ufm_pkeys]
// max_members' default, 100,000 Kubernetes members: 1,000 pkeys of 100 GUIDs,
// each GUID in two pkeys, none past the capacity (the common case).
func BenchmarkWithhold(b *testing.B) {
	snap := store.Snapshot{}
	for p := range 1000 {
		k := store.KubernetesPKey{PKey: fabric.PKey(0x1000 + p)}
		for i := range 100 {
			g := fabric.GUID(0x0200000000000000 + uint64((p/2)*100+i))
			k.Members = append(k.Members, store.KubernetesMember{GUID: g, Membership: fabric.Full, Revision: int64(p)})
		}
		snap.Kubernetes = append(snap.Kubernetes, k)
	}
	limit := &topology.PortLimit{Capacity: 32, Static: func(fabric.GUID) []fabric.PKey { return nil }}
	b.ReportAllocs()
	for b.Loop() {
		if _, left := withhold(snap, limit); len(left) != 0 {
			b.Fatalf("%d withheld", len(left))
		}
	}
}
