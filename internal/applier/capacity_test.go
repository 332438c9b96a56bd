package applier

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	tm.recordOverCapacity(ctxT(t), State(snap, tm.Cfg.DefaultPartition, tm.Cfg.FlatPKey), dumpRead{topo, err})
	got, err := s.EnforcementErrors(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].SwitchPort() != "0x0002c90300f00001:2" ||
		!strings.Contains(got[0].Line, "host port 0x0002c90300000101 carries 4 pkeys") {
		t.Fatalf("recorded %+v, want H1's switch port 0x0002c90300f00001:2", got)
	}
	reasons, err := Gates{Store: s, SubnetDump: dump}.Closed(ctxT(t))
	if err != nil || !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, EnforcementCleared) }) {
		t.Errorf("gates: %q, %v; want closed by the enforcement error", reasons, err)
	}

	// Below the capacity (H2 alone, capacity 5): nothing more is recorded.
	if _, err := s.ClearEnforcementErrors(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	tm.Cfg.PortLimit = &topology.PortLimit{DumpFile: dump, Capacity: 5, Static: static}
	snap.Members = []store.Member{{NetworkID: "net-a", GUID: h1}, {NetworkID: "net-flat", GUID: h2}}
	tm.recordOverCapacity(ctxT(t), State(snap, tm.Cfg.DefaultPartition, tm.Cfg.FlatPKey), dumpRead{topo, err})
	if got, _ := s.EnforcementErrors(ctxT(t)); len(got) != 0 {
		t.Errorf("recorded %+v below the capacity", got)
	}
}
