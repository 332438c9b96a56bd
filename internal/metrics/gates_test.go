package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// afm_gate_closed is evaluated by the gates the manager registers
// (applier.Gates on the store): a duplicated GUID the leader recorded is a
// gate="duplicate_guid" series naming it, on every manager that scrapes the
// database.
func TestGateClosedNamesDuplicateGUID(t *testing.T) {
	s := storetest.Open(t, config.EngineSQLite)
	term, err := s.NewTerm(t.Context(), "leader")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDuplicateGUIDs(t.Context(), term, []store.DuplicateSighting{{GUID: "0x0002c90300000100",
		Kind: "node", Places: []string{"0x0002c90300f00001:2", "0x0002c90300f00001:3"}, Line: "ERR 0D01", Count: 2}}); err != nil {
		t.Fatal(err)
	}
	m := New()
	f := m.Fabric(store.DefaultFabric)
	m.Registry().MustRegister(&State{Fabric: f, DB: s, SM: fakeSM{running: true}, Gates: applier.Gates{Store: s},
		Ready: func(context.Context) bool { return true }})
	f.Leading(term)
	var kinds []string
	for labels := range gathered(t, m)["afm_gate_closed"] {
		if strings.Contains(labels, "gate=duplicate_guid,") {
			kinds = append(kinds, labels)
			if !strings.Contains(labels, "node GUID 0x0002c90300000100 behind switch ports 0x0002c90300f00001:2 and 0x0002c90300f00001:3") {
				t.Errorf("reason %q does not name the GUID and its places", labels)
			}
		}
	}
	if len(kinds) != 1 {
		t.Errorf("afm_gate_closed gate=duplicate_guid series: %q; want one", kinds)
	}
}
