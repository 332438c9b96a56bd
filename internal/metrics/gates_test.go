package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
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

// afm_audit_held_port names each host port the last audit holds alone (a
// table that lies while its switch port is right), and forgets it once an
// audit finds the port right; afm_audit_breaches does not count it.
func TestAuditHeldPort(t *testing.T) {
	m := New()
	f := m.Fabric(store.DefaultFabric)
	lie := audit.Finding{Kind: audit.ForeignPKey, Port: 0x0002c90300000201, PKey: 0x123, HostOnly: true, Text: "lies"}
	f.AuditFinished(audit.Summary{Findings: []audit.Finding{lie}}, nil)
	got := gathered(t, m)
	if v := got["afm_audit_held_port"]["fabric=default,port=0x0002c90300000201"]; v != 1 {
		t.Errorf("afm_audit_held_port = %v; want the port at 1", got["afm_audit_held_port"])
	}
	if v := got["afm_audit_breaches"]["fabric=default"]; v != 0 {
		t.Errorf("afm_audit_breaches = %v; want 0", v)
	}
	f.AuditFinished(audit.Summary{}, nil)
	if held := gathered(t, m)["afm_audit_held_port"]; len(held) != 0 {
		t.Errorf("afm_audit_held_port after a clean audit = %v; want none", held)
	}
}

// afm_gate_closed says every kind the verdict judges, as --status does: a
// second SM the leader recorded is a gate="second_subnet_manager" series
// (the metrics used to evaluate only the switches, the enforcement errors
// and the duplicated GUIDs).
func TestGateClosedNamesSecondSM(t *testing.T) {
	s := storetest.Open(t, config.EngineSQLite)
	term, err := s.NewTerm(t.Context(), "leader")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSecondSM(t.Context(), term, store.SecondSM{PortGUID: 0x0002c90300000301, Priority: 15,
		State: "MASTER", OwnState: "STANDBY"}); err != nil {
		t.Fatal(err)
	}
	m := New()
	f := m.Fabric(store.DefaultFabric)
	m.Registry().MustRegister(&State{Fabric: f, DB: s, SM: fakeSM{running: true},
		Gates: verdict.Source{Store: s, SecondSMs: s, Audits: s}, Ready: func(context.Context) bool { return true }})
	f.Leading(term)
	var named int
	for labels := range gathered(t, m)["afm_gate_closed"] {
		if strings.Contains(labels, "gate=second_subnet_manager,") && strings.Contains(labels, "port 0x0002c90300000301") {
			named++
		}
	}
	if named != 1 {
		t.Errorf("afm_gate_closed: %d series of the second SM; want one", named)
	}
}

// A GUID the leader saw behind another switch port than its recorded one is
// a gate="duplicate_guid" series too, naming both switch ports.
func TestGateClosedNamesMovedGUID(t *testing.T) {
	s := storetest.Open(t, config.EngineSQLite)
	ctx := t.Context()
	term, err := s.NewTerm(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	const h1, s1 = 0x0002c90300000101, 0x0002c90300f00001
	if _, err := s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: h1, Switch: s1, Port: 2, New: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: h1, Switch: s1, Port: 2,
		MovedTo: "0x0002c90300f00001:3"}}); err != nil {
		t.Fatal(err)
	}
	m := New()
	f := m.Fabric(store.DefaultFabric)
	m.Registry().MustRegister(&State{Fabric: f, DB: s, SM: fakeSM{running: true}, Gates: verdict.Source{Store: s},
		Ready: func(context.Context) bool { return true }})
	f.Leading(term)
	var moved []string
	for labels := range gathered(t, m)["afm_gate_closed"] {
		if strings.Contains(labels, "gate=duplicate_guid,") && strings.Contains(labels, verdict.MovedGUIDText) {
			moved = append(moved, labels)
			if !strings.Contains(labels, "port GUID 0x0002c90300000101 recorded behind switch port 0x0002c90300f00001:2 was behind 0x0002c90300f00001:3") {
				t.Errorf("reason %q does not name the GUID and both switch ports", labels)
			}
		}
	}
	if len(moved) != 1 {
		t.Errorf("afm_gate_closed gate=duplicate_guid series of the moved GUID: %q; want one", moved)
	}
}
