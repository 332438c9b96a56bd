package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// A physnet given to another fabric after networks on it were recorded: each
// case records on one configuration, then opens the database again with the
// physnet moved ("ibnet2" from the default fabric to the storage one, or
// "extra" from no fabric to the storage one).
var physnetMoveTests = []struct {
	name        string
	fn          func(t *testing.T, db Database)
	notOnSQLite bool // SQLite has no session to end from outside
}{
	{"ChangesOfANetworkWhosePhysnetMovedAreRefused", testPhysnetMovedRefused, false},
	{"DeletesOfANetworkWhosePhysnetMovedAreAllowed", testPhysnetMovedDeletes, false},
	{"MovePhysnetMovesNetworksPortsAndMembers", testMovePhysnet, false},
	{"MovePhysnetOfANetworkWithNoPartition", testMovePhysnetUnmanaged, false},
	{"MovePhysnetRefusedOnAPKeyOfTheNewFabric", testMovePhysnetPKeyTaken, false},
	{"MovePhysnetBesideAManagerOfTheOldConfiguration", testMovePhysnetConcurrent, false},
	{"MovePhysnetWhoseSessionIsEndedKeepsNothing", testMovePhysnetKilled, true},
}

// openPhysnets opens db as a manager whose default fabric serves
// defaultNets and whose storage fabric serves storageNets.
func openPhysnets(t *testing.T, db Database, defaultNets, storageNets []string) *store.Store {
	t.Helper()
	return openPhysnetRules(t, db, store.Rules{PhysicalNetworks: defaultNets}, store.Rules{PhysicalNetworks: storageNets})
}

// openPhysnetRules opens db as a manager whose default and storage fabrics
// record by these rules.
func openPhysnetRules(t *testing.T, db Database, def, storage store.Rules) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opened, err := storeopen.OpenFabrics(ctx, db.Engine, db.DSN, true, []store.FabricRules{
		{Name: store.DefaultFabric, Rules: def}, {Name: storageFabric, Rules: storage},
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("open %s store: %v", db.Engine, err)
	}
	t.Cleanup(func() { opened.Close() })
	return opened.Fabric(store.DefaultFabric)
}

// Before and after the move of ibnet2 from the default fabric to storage.
var (
	ibnet2OnDefault = [2][]string{{"ibnet", "ibnet2"}, {storageFabric}}
	ibnet2OnStorage = [2][]string{{"ibnet"}, {storageFabric, "ibnet2"}}
	extraOnStorage  = [2][]string{{"ibnet"}, {storageFabric, "extra"}}
)

// recordThenMove records netA (VLAN 100 on physnet) and its ports p1 (GUID A,
// bound) and p2 (GUID B, unbound) under the configuration before, and opens
// the database again under after.
func recordThenMove(t *testing.T, db Database, physnet string, before, after [2][]string) *store.Store {
	t.Helper()
	old := openPhysnets(t, db, before[0], before[1])
	mustNetwork(t, old, netSpec(netA, "vlan", physnet, vlanID(100)))
	mustPort(t, old, boundPort("p1", netA, guidA, "h1"))
	mustPort(t, old, boundPort("p2", netA, guidB, ""))
	old.DB().Close()
	return openPhysnets(t, db, after[0], after[1])
}

// revisions are both fabrics' revisions.
func revisions(t *testing.T, s *store.Store) [2]int64 {
	t.Helper()
	return [2]int64{revision(t, s), revision(t, s.DB().Fabric(storageFabric))}
}

// wantPhysnetMoved fails unless err is the refusal of netA's change,
// recorded on the default fabric while physnet is the storage fabric's, and
// its text names all of it and the command.
func wantPhysnetMoved(t *testing.T, what string, err error, physnet string) {
	t.Helper()
	var moved *store.PhysnetMovedError
	if !errors.As(err, &moved) {
		t.Fatalf("%s = %v, want a PhysnetMovedError", what, err)
	}
	if *moved != (store.PhysnetMovedError{NetworkID: netA, Physnet: physnet, Recorded: store.DefaultFabric, Configured: storageFabric}) {
		t.Errorf("%s: refusal = %+v", what, *moved)
	}
	for _, want := range []string{netA, `"` + physnet + `"`, "fabric default", "fabric storage", "--move-physnet " + physnet} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: refusal %q does not say %q", what, err, want)
		}
	}
}

// testPhysnetMovedRefused: once ibnet2 is the storage fabric's, a port
// create or update and a network update of netA (recorded on the default
// fabric) are refused, naming the physnet, both fabrics and the command, and
// write nothing: before the fix they were recorded on the default fabric,
// whose partition the storage fabric's hosts never see. The same for a
// network recorded with no partition (physnet extra on no fabric), whose
// ports' jobs completed with no partition anywhere.
func testPhysnetMovedRefused(t *testing.T, db Database) {
	for _, c := range []struct {
		physnet       string
		before, after [2][]string
	}{{"ibnet2", ibnet2OnDefault, ibnet2OnStorage}, {"extra", ibnet2OnDefault, extraOnStorage}} {
		t.Run(c.physnet, func(t *testing.T) {
			s := recordThenMove(t, NewDatabase(t, db.Engine), c.physnet, c.before, c.after)
			revs := revisions(t, s)
			before := snapshotOf(t, s, store.DefaultFabric)
			_, err := s.RecordPort(t.Context(), boundPort("p3", netA, 0x0002c90300000c03, "h3"))
			wantPhysnetMoved(t, "a new port", err, c.physnet)
			_, err = s.DB().Fabric(storageFabric).RecordPort(t.Context(), boundPort("p1", netA, guidA, "h2"))
			wantPhysnetMoved(t, "a port update through the storage fabric's view", err, c.physnet)
			_, err = recordNetwork(s, t, netSpec(netA, "vlan", c.physnet, vlanID(100)))
			wantPhysnetMoved(t, "a network update", err, c.physnet)
			if got := revisions(t, s); got != revs {
				t.Errorf("revisions after the refusals = %v, want %v", got, revs)
			}
			if _, err := s.GetPort(t.Context(), "p3"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("refused port p3 = %v, want not recorded", err)
			}
			if after := snapshotOf(t, s, store.DefaultFabric); len(after.Members) != len(before.Members) {
				t.Errorf("default members = %+v after the refusals, want %+v", after.Members, before.Members)
			}
		})
	}
}

// testPhysnetMovedDeletes: deleting a port or a network whose physnet moved
// is allowed: it takes a membership out of the fabric that has it, and
// Neutron cannot delete a network whose ports it cannot delete.
func testPhysnetMovedDeletes(t *testing.T, db Database) {
	s := recordThenMove(t, db, "ibnet2", ibnet2OnDefault, ibnet2OnStorage)
	j, err := s.DB().Fabric(storageFabric).RemovePort(t.Context(), store.PortRemoval{PortID: "p1", CreatedBy: "test", Request: `{}`})
	if err != nil || j.Fabric != store.DefaultFabric {
		t.Fatalf("RemovePort = %+v, %v; want the default fabric's job", j, err)
	}
	if m := snapshotOf(t, s, store.DefaultFabric).Members; len(m) != 0 {
		t.Errorf("default members after the port's removal = %+v, want none", m)
	}
	if _, err := s.RemoveNetwork(t.Context(), store.NetworkRemoval{NetworkID: netA, CreatedBy: "test", Request: `{}`}); err != nil {
		t.Fatalf("RemoveNetwork: %v", err)
	}
	// Deleted, the network is created again on the storage fabric.
	if j := mustNetwork(t, s, netSpec(netA, "vlan", "ibnet2", vlanID(100))); j.Fabric != storageFabric {
		t.Errorf("the network created again is fabric %s's, want %s", j.Fabric, storageFabric)
	}
}

// testMovePhysnet: --move-physnet ibnet2 moves netA, its ports and its
// member to the storage fabric in one change on each fabric; a dry run
// before writes nothing, a second run has nothing to do, and the port
// refused before is recorded on the storage fabric.
func testMovePhysnet(t *testing.T, db Database) {
	ctx := t.Context()
	s := recordThenMove(t, db, "ibnet2", ibnet2OnDefault, ibnet2OnStorage)
	var caches [2]store.SnapshotCache // the appliers' incremental reads
	for i, f := range []string{store.DefaultFabric, storageFabric} {
		if _, err := s.DB().Fabric(f).ReadSnapshot(ctx, &caches[i]); err != nil {
			t.Fatal(err)
		}
	}
	revs := revisions(t, s)
	dry, err := s.MovePhysnet(ctx, store.PhysnetMove{Physnet: "ibnet2", DryRun: true, CreatedBy: "test"})
	if err != nil || len(dry.Networks) != 1 || len(dry.Jobs) != 0 || revisions(t, s) != revs {
		t.Fatalf("dry run = %+v, %v; revisions %v, want netA listed and nothing written (%v)", dry, err, revisions(t, s), revs)
	}
	out, err := s.MovePhysnet(ctx, store.PhysnetMove{Physnet: "ibnet2", CreatedBy: "test"})
	if err != nil {
		t.Fatalf("MovePhysnet: %v", err)
	}
	if len(out.Networks) != 1 || out.To != storageFabric {
		t.Fatalf("moved = %+v, want netA to storage", out)
	}
	if n := out.Networks[0]; n.Network.ID != netA || n.From != store.DefaultFabric || n.Ports != 2 || n.Members != 1 || n.Note != "" {
		t.Errorf("moved network = %+v, want netA from default with 2 ports and 1 member", n)
	}
	if got := revisions(t, s); got != [2]int64{revs[0] + 1, revs[1] + 1} {
		t.Errorf("revisions after the move = %v, want both one past %v", got, revs)
	}
	wantMoveJobs(t, s, out, revs)
	for i, f := range []string{store.DefaultFabric, storageFabric} {
		snap, err := s.DB().Fabric(f).ReadSnapshot(ctx, &caches[i])
		if err != nil {
			t.Fatal(err)
		}
		wantNets, wantMembers := 0, 0
		if f == storageFabric {
			wantNets, wantMembers = 1, 1
		}
		if len(snap.Networks) != wantNets || len(snap.Members) != wantMembers ||
			(wantMembers == 1 && (snap.Members[0].PortID != "p1" || snap.Members[0].GUID != fabric.GUID(guidA))) {
			t.Errorf("fabric %s after the move (incremental read): networks %+v, members %+v", f, snap.Networks, snap.Members)
		}
	}
	again, err := s.MovePhysnet(ctx, store.PhysnetMove{Physnet: "ibnet2", CreatedBy: "test"})
	if err != nil || len(again.Networks) != 0 || len(again.Jobs) != 0 {
		t.Errorf("second move = %+v, %v; want nothing to move", again, err)
	}
	if j := mustPort(t, s, boundPort("p3", netA, 0x0002c90300000c03, "h3")); j.Fabric != storageFabric {
		t.Errorf("port p3's job is fabric %s's, want %s", j.Fabric, storageFabric)
	}
}

// wantMoveJobs checks a move's two jobs: the default fabric's, then the
// storage fabric's, each open at its fabric's new revision and promising
// GUID A's places (absent from, then full in, pkey 0x0064).
func wantMoveJobs(t *testing.T, s *store.Store, out store.PhysnetMoveOutcome, revs [2]int64) {
	t.Helper()
	if len(out.Jobs) != 2 {
		t.Fatalf("jobs = %+v, want one on each fabric", out.Jobs)
	}
	for i, c := range []struct {
		fabric string
		want   store.Want
	}{{store.DefaultFabric, store.WantAbsent}, {storageFabric, store.WantFull}} {
		j, err := s.GetJob(t.Context(), out.Jobs[i].ID)
		if err != nil || j.Fabric != c.fabric || j.Revision != revs[i]+1 || j.Status != store.StatusPending ||
			j.Operation != store.OpMovePhysnet || !strings.Contains(j.Result, netA) {
			t.Errorf("job %d = %+v, %v; want fabric %s's, pending at revision %d", i, j, err, c.fabric, revs[i]+1)
		}
		want := store.Place{GUID: fabric.GUID(guidA), PKey: 0x64, Want: c.want}
		if got := out.Places[out.Jobs[i].ID]; len(got) != 1 || got[0] != want {
			t.Errorf("fabric %s's job's places = %v, want %v", c.fabric, got, want)
		}
		// Recorded with the job: what the fabric's read-back proves.
		open, err := s.DB().Fabric(c.fabric).OpenJobs(t.Context(), j.Revision)
		if err != nil {
			t.Fatal(err)
		}
		var recorded []store.Place
		for _, o := range open {
			if o.ID == j.ID {
				recorded = o.Places
			}
		}
		if len(recorded) != 1 || recorded[0] != want {
			t.Errorf("fabric %s's job's recorded places = %v, want %v", c.fabric, recorded, want)
		}
	}
}

// testMovePhysnetUnmanaged: a network recorded with no partition (physnet
// extra on no fabric) moves without one, its ports without GUIDs, and the
// move says to import them from Neutron; neither fabric's partitions change,
// so both jobs complete at once.
func testMovePhysnetUnmanaged(t *testing.T, db Database) {
	s := recordThenMove(t, db, "extra", ibnet2OnDefault, extraOnStorage)
	revs := revisions(t, s)
	out, err := s.MovePhysnet(t.Context(), store.PhysnetMove{Physnet: "extra", CreatedBy: "test"})
	if err != nil || len(out.Networks) != 1 || len(out.Jobs) != 2 {
		t.Fatalf("MovePhysnet = %+v, %v; want netA moved, with two jobs", out, err)
	}
	if n := out.Networks[0]; n.Network.Managed || n.Members != 0 || !strings.Contains(n.Note, "--import-neutron") {
		t.Errorf("moved network = %+v, want no partition, no member, and a note naming --import-neutron", n)
	}
	for _, j := range out.Jobs {
		if j.Status != store.StatusCompleted {
			t.Errorf("job %+v, want Completed at once", j)
		}
	}
	if got := revisions(t, s); got != revs {
		t.Errorf("revisions = %v, want %v: no partition changed", got, revs)
	}
	if p, err := s.DB().Fabric(storageFabric).GetPort(t.Context(), "p1"); err != nil || p.GUID != nil {
		t.Errorf("port p1 = %+v, %v; want it recorded without a GUID", p, err)
	}
	// Its port's next change completes with no partition still, and says
	// why and what records it (it said "not in [api] physical_networks").
	j := mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	if want := `"extra" was not in [fabric:storage] physical_networks when the network was recorded (--import-neutron`; j.Fabric != storageFabric || !strings.Contains(j.Result, want) {
		t.Errorf("port p1's job after the move = %+v, want the storage fabric's saying %q", j, want)
	}
}

// testMovePhysnetPKeyTaken: the storage fabric already has VLAN 100: the
// move is refused, naming the network there, and writes nothing.
func testMovePhysnetPKeyTaken(t *testing.T, db Database) {
	s := recordThenMove(t, db, "ibnet2", ibnet2OnDefault, ibnet2OnStorage)
	mustNetwork(t, s, storageNetwork(netB, 100))
	revs := revisions(t, s)
	_, err := s.MovePhysnet(t.Context(), store.PhysnetMove{Physnet: "ibnet2", CreatedBy: "test"})
	if !isRejected(err) || !strings.Contains(err.Error(), netB) || !strings.Contains(err.Error(), "fabric storage") {
		t.Fatalf("MovePhysnet = %v, want refused naming network %s on fabric storage", err, netB)
	}
	if got := revisions(t, s); got != revs {
		t.Errorf("revisions after the refusal = %v, want %v", got, revs)
	}
	if m := snapshotOf(t, s, store.DefaultFabric).Members; len(m) != 1 {
		t.Errorf("default members after the refusal = %+v, want p1's", m)
	}
}

// testMovePhysnetConcurrent: a manager still on the old configuration
// (ibnet2 the default fabric's) records ports of netA while another moves
// ibnet2: the move takes every fabric's revision before it reads, so each
// port the old manager recorded is moved with it (none is left behind on
// the default fabric), and a port the old manager sends after the move is
// refused by it, not recorded on the default fabric.
func testMovePhysnetConcurrent(t *testing.T, db Database) {
	s := recordThenMove(t, db, "ibnet2", ibnet2OnDefault, ibnet2OnStorage)
	old := openPhysnets(t, db, ibnet2OnDefault[0], ibnet2OnDefault[1])
	const ports = 20
	recorded := make([]bool, ports)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range ports {
			_, err := old.RecordPort(t.Context(), boundPort(fmt.Sprintf("c%02d", i), netA, 0x0002c90300000d00+uint64(i), "h"))
			var moved *store.PhysnetMovedError
			switch {
			case err == nil:
				recorded[i] = true
			case !errors.As(err, &moved):
				t.Errorf("port c%02d: %v, want recorded or a PhysnetMovedError", i, err)
			}
		}
	}()
	out, err := s.MovePhysnet(t.Context(), store.PhysnetMove{Physnet: "ibnet2", CreatedBy: "test"})
	wg.Wait()
	if err != nil || len(out.Networks) != 1 {
		t.Fatalf("MovePhysnet = %+v, %v", out, err)
	}
	if m := snapshotOf(t, s, store.DefaultFabric).Members; len(m) != 0 {
		t.Errorf("default members after the move = %+v, want none", m)
	}
	members := map[string]bool{}
	for _, m := range snapshotOf(t, s, storageFabric).Members {
		members[m.PortID] = true
	}
	for i, ok := range recorded {
		if id := fmt.Sprintf("c%02d", i); ok && !members[id] {
			t.Errorf("port %s, recorded by the old manager, is not a member on the storage fabric: %v", id, members)
		}
	}
}

// testMovePhysnetKilled: the move's session is ended by the server in the
// middle of its transaction (a crash, a database restart), after it took
// both fabrics' revisions and read what to move: nothing of it is kept,
// neither fabric's revision nor any row, and running it again does the
// whole move.
func testMovePhysnetKilled(t *testing.T, db Database) {
	s := recordThenMove(t, db, "ibnet2", ibnet2OnDefault, ibnet2OnStorage)
	revs := revisions(t, s)
	held := newGate(guidA) // the move checks GUID A against the storage fabric's template
	storage := held.rules()
	storage.PhysicalNetworks = ibnet2OnStorage[1]
	gated := openPhysnetRules(t, db, store.Rules{PhysicalNetworks: ibnet2OnStorage[0]}, storage)
	done := make(chan error, 1)
	go func() {
		_, err := gated.MovePhysnet(t.Context(), store.PhysnetMove{Physnet: "ibnet2", CreatedBy: "test"})
		done <- err
	}()
	held.wait(t)
	killTransaction(t, db)
	close(held.open)
	if err := <-done; err == nil {
		t.Fatal("a move whose session was ended succeeded")
	}
	if got := revisions(t, s); got != revs {
		t.Errorf("revisions after the failed move = %v, want %v", got, revs)
	}
	if m := snapshotOf(t, s, store.DefaultFabric).Members; len(m) != 1 {
		t.Errorf("default members after the failed move = %+v, want p1's", m)
	}
	if n := snapshotOf(t, s, storageFabric).Networks; len(n) != 0 {
		t.Errorf("storage networks after the failed move = %+v, want none", n)
	}
	out, err := s.MovePhysnet(t.Context(), store.PhysnetMove{Physnet: "ibnet2", CreatedBy: "test"})
	if err != nil || len(out.Networks) != 1 || len(out.Jobs) != 2 {
		t.Fatalf("the move run again = %+v, %v; want netA moved", out, err)
	}
	if m := snapshotOf(t, s, storageFabric).Members; len(m) != 1 || m[0].PortID != "p1" {
		t.Errorf("storage members after the move run again = %+v, want p1's", m)
	}
}
