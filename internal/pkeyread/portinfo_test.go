package pkeyread_test

import (
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// TestReadPortInfoSimulatedFabric reads each host port's PortInfo (its LID,
// the master SM's LID) and the switch ports facing them, and checks what the
// simulated fabric does with the enforcement bits: OpenSM, whose part_enforce
// defaults to both, sets them in every switch port it programs, and ibsim
// does not keep them. The audit relies on this fact (internal/audit
// EnforcementUnknown): should a newer ibsim keep them, this test says so.
func TestReadPortInfoSimulatedFabric(t *testing.T) {
	f := sweptFabric(t, 4, 2)
	r := simReader(t, f)
	smLID, err := f.LID(f.SMGUID)
	if err != nil {
		t.Fatal(err)
	}
	var hosts, switches []pkeyread.SwitchPort
	for _, tg := range targets(t, f) {
		hosts = append(hosts, pkeyread.SwitchPort{GUID: tg.Port, LID: tg.LID})
		switches = append(switches, tg.Switch)
	}
	for _, res := range r.ReadPortInfo(t.Context(), hosts) {
		if res.Err != nil {
			t.Fatalf("%+v: %v", res.Port, res.Err)
		}
		if res.Info.LID != res.Port.LID || int(res.Info.MasterSMLID) != smLID {
			t.Errorf("%s: LID %d, master SM LID %d; want %d and %d", res.Port.GUID, res.Info.LID,
				res.Info.MasterSMLID, res.Port.LID, smLID)
		}
	}
	for _, res := range r.ReadPortInfo(t.Context(), switches) {
		if res.Err != nil {
			t.Fatalf("%+v: %v", res.Port, res.Err)
		}
		if res.Info.Enforcing() || res.Info.FilterRawInbound || res.Info.FilterRawOutbound {
			t.Errorf("switch %s port %d reads enforcement bits %+v: the simulator keeps them now; "+
				"the audit may judge them on it", res.Port.GUID, res.Port.Port, res.Info)
		}
	}
	// A LID that answers as another node is not read as the port asked for.
	wrong := hosts[0]
	wrong.GUID = hosts[1].GUID
	if res := r.ReadPortInfo(t.Context(), []pkeyread.SwitchPort{wrong}); res[0].Err == nil {
		t.Errorf("PortInfo of %s at the LID of another port: read, want ErrMoved", wrong.GUID)
	}
}
