package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestClonedGUIDNamedUntilUndone: a tenant rewrites H2's node GUID to H1's
// (ibsim's Guid command). OpenSM finds it behind two switch ports, logs
// ERR 0D01 and sweeps again and again without SUBNET UP: the job of a change
// made meanwhile names the GUID and the switch ports, --status names it and
// exits non-zero; once H2 has its own GUID again OpenSM comes up and the job
// completes.
func TestClonedGUIDNamedUntilUndone(t *testing.T) {
	m := startManager(t, storetest.NewDatabase(t, config.EngineSQLite), 2)
	job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	m.waitCompleted(job, nil)

	h1, h2 := m.fabric.Host("H1"), m.fabric.Host("H2")
	h1Node, h2Node := h1.PortGUID-1, h2.PortGUID-1 // the simulator's node GUIDs
	if _, err := m.fabric.Sim(t.Context(), fmt.Sprintf(`Guid "H2" %s`, h1Node)); err != nil {
		t.Fatal(err)
	}
	// The port's apply makes OpenSM sweep: its discovery finds the clone.
	job = m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1.PortGUID)))
	want := fmt.Sprintf("node GUID %s behind switch ports %s:%d and %s:%d", h1Node,
		h1.SwitchGUID, h1.SwitchPort, h2.SwitchGUID, h2.SwitchPort)
	j := m.waitDescription(job, want)
	if j.Status == "Completed" {
		t.Fatalf("job completed while a GUID is cloned: %+v", j)
	}
	code, out := m.statusExit()
	if code == 0 || !strings.Contains(out, want) {
		t.Errorf("--status with a cloned GUID: exit %d, want non-zero and %q:\n%s", code, want, out)
	}

	if _, err := m.fabric.Sim(t.Context(), fmt.Sprintf(`Guid "H2" %s`, h2Node)); err != nil {
		t.Fatal(err)
	}
	m.waitCompleted(job, nil)
	if code, out := m.statusExit(); strings.Contains(out, "GUID twice") {
		t.Errorf("--status after the clone was undone: exit %d, still names it:\n%s", code, out)
	}
}
