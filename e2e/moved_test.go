package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestMovedGUIDNamedUntilBack: H1's port is applied, which records the switch
// port H1 is behind. H1 goes down and H2 takes H1's GUIDs (ibsim's Guid):
// OpenSM finds no duplicate, brings the subnet up with H1's GUID behind H2's
// switch port, and programs H1's partition there (read back from the switch).
// Another tenant's job (H3's port) and the victim's (its port's removal) are
// held, naming the GUID and both switch ports; --status says so and exits
// non-zero. The clone's
// link going down opens nothing; once H2 has its own GUID and H1 is back
// behind its switch port, the jobs complete.
func TestMovedGUIDNamedUntilBack(t *testing.T) {
	m := startManager(t, storetest.NewDatabase(t, config.EngineSQLite), 3)
	ctx := t.Context()
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	h1, h2, h3 := m.fabric.Host("H1"), m.fabric.Host("H2"), m.fabric.Host("H3")
	const victimPort = "8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94"
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody(victimPort, netID, vendorClientID(h1.PortGUID))), nil)

	if err := m.fabric.Unlink(ctx, "H1"); err != nil {
		t.Fatal(err)
	}
	// Once OpenSM swept without H1, ibsim's console is quiet again (the
	// traps of the unlink are answered), and H1's GUID is off the fabric.
	dump := filepath.Join(m.dir, "opensm", "opensm-subnet.lst")
	waitFor(t, "OpenSM's dump without H1", func() bool {
		data, err := os.ReadFile(dump)
		return err == nil && strings.Contains(string(data), "{H3}") && !strings.Contains(string(data), "{H1}")
	})
	h1Node, h2Node := h1.PortGUID-1, h2.PortGUID-1 // the simulator's node GUIDs
	if _, err := m.fabric.Sim(ctx, fmt.Sprintf(`Guid "H2" %s`, h1Node)); err != nil {
		t.Fatal(err)
	}
	// Another tenant's port: its apply's sweep finds H1's GUID behind H2's
	// switch port.
	other := m.accept("POST", "/cloudx/Port", portBody("5d2e8f1a-3c4b-4d6e-9f7a-1b2c3d4e5f60", netID, vendorClientID(h3.PortGUID)))
	moved := fmt.Sprintf("port GUID %s recorded behind switch port %s:%d is behind %s:%d", h1.PortGUID,
		h1.SwitchGUID, h1.SwitchPort, h2.SwitchGUID, h2.SwitchPort)
	m.waitDescription(other, moved)
	// What the gate is for: the switch port facing H2 enforces H1's
	// partition (VLAN 101's pkey, full) for the clone.
	keys, err := m.fabric.SwitchPKeys(ctx, h2.PortGUID)
	if err != nil || !slices.Contains(keys, 0x8065) {
		t.Errorf("the switch port facing H2: %s, %v; want H1's pkey 0x8065 there (OpenSM programs the moved GUID's partitions)",
			hex(keys), err)
	}
	// The victim's own job, its port's removal: held, saying why.
	victim := m.accept("DELETE", "/cloudx/Port/"+victimPort, "")
	m.waitDescription(victim, moved)
	code, out := m.statusExit()
	if code == 0 || !strings.Contains(out, moved) {
		t.Errorf("--status with H1's GUID behind H2's switch port: exit %d, want non-zero and %q:\n%s", code, moved, out)
	}
	// OpenSM saw no duplicate: what holds the jobs is the recorded place.
	if data, err := os.ReadFile(filepath.Join(m.dir, "opensm", "opensm.log")); err != nil || strings.Contains(string(data), "ERR 0D01") {
		t.Errorf("OpenSM's log: %v, or an ERR 0D01 in it: the clone was to be seen with H1 down", err)
	}
	if strings.Contains(out, applier.DuplicateGUIDText) {
		t.Errorf("--status names a duplicate OpenSM found, want only the moved GUID:\n%s", out)
	}

	// The clone's link down: the GUID is off the fabric, the mark holds.
	if err := m.fabric.Unlink(ctx, "H2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "--status to say H1's GUID has not been seen back", func() bool {
		code, out := m.statusExit()
		return code != 0 && strings.Contains(out, "has not been seen back since")
	})
	for _, job := range []string{victim, other} {
		if j := m.job(job); j.Status == "Completed" {
			t.Fatalf("job %s completed while the clone's link was down: %+v", job, j)
		}
	}

	if _, err := m.fabric.Sim(ctx, fmt.Sprintf(`Guid "H2" %s`, h2Node)); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"H1", "H2"} {
		if err := m.fabric.Relink(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	m.waitCompleted(victim, nil)
	m.waitCompleted(other, nil)
	if code, out := m.statusExit(); strings.Contains(out, applier.MovedGUIDText) {
		t.Errorf("--status with H1 back behind its switch port: exit %d, still names it:\n%s", code, out)
	}
}

// TestSwitchWhereAHostWas: after the switches were confirmed, H1 is
// unplugged and a switch (S2, unlinked at confirmation) is cabled to the
// switch port H1 was behind: what OpenSM sees of a host that answers NodeInfo
// as a switch (ibsim fixes a node's type in its topology, so a host cannot
// turn into one; a switch linked at the host's port is the same sweep). The
// port becomes an inter-switch link, unenforced and unaudited: the gate
// unconfirmed_switch holds every job, naming S2, and --status exits
// non-zero; once the switch is gone and H1 is back, the jobs complete.
func TestSwitchWhereAHostWas(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 3, Switches: 2}, settings{})
	ctx := t.Context()
	s2 := fabricsim.SwitchGUID(2)
	dump := filepath.Join(m.dir, "opensm", "opensm-subnet.lst")
	if err := m.fabric.Unlink(ctx, "S2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OpenSM's dump without S2", func() bool {
		data, err := os.ReadFile(dump)
		return err == nil && strings.Contains(string(data), fabricsim.SwitchGUID(1).String()[2:]) &&
			!strings.Contains(string(data), "{S2}")
	})
	m.confirmSwitches()
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)

	h1, h3 := m.fabric.Host("H1"), m.fabric.Host("H3")
	if err := m.fabric.Unlink(ctx, "H1"); err != nil {
		t.Fatal(err)
	}
	// S2's port 3 is free (H2 is on its port 1, the chain on 7).
	if err := m.fabric.Link(ctx, "S1", h1.SwitchPort, "S2", 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OpenSM's dump with S2 behind H1's switch port", func() bool {
		data, err := os.ReadFile(dump)
		return err == nil && strings.Contains(string(data), fmt.Sprintf("{S1} LID:0002 PN:%02X } { SW", h1.SwitchPort)) &&
			strings.Contains(string(data), "{S2}")
	})
	job := m.accept("POST", "/cloudx/Port", portBody("5d2e8f1a-3c4b-4d6e-9f7a-1b2c3d4e5f60", netID, vendorClientID(h3.PortGUID)))
	unconfirmed := "switch " + s2.String() + " (S2) is in OpenSM's last sweep but was not confirmed"
	m.waitDescription(job, unconfirmed)
	if code, out := m.statusExit(); code == 0 || !strings.Contains(out, unconfirmed) {
		t.Errorf("--status with a switch behind H1's switch port: exit %d, want non-zero and %q:\n%s", code, unconfirmed, out)
	}

	if err := m.fabric.Unlink(ctx, "S2"); err != nil {
		t.Fatal(err)
	}
	if err := m.fabric.Relink(ctx, "H1"); err != nil {
		t.Fatal(err)
	}
	m.waitCompleted(job, nil)
}
