package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/neutrontest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The physnets of the tests' Neutron: only ibPhysnet is in [api]
// physical_networks.
const (
	ibPhysnet  = "ibnet"
	ethPhysnet = "ethphys"
)

// useNeutron adds the [neutron] section that reaches n to the manager's
// configuration.
func (m *manager) useNeutron(n *neutrontest.Server) {
	m.t.Helper()
	f, err := os.OpenFile(m.conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "\n[neutron]\nclouds_file = %s\ncloud = neutrontest\n", n.CloudsFile(m.t)); err != nil {
		m.t.Fatal(err)
	}
}

// importNeutron runs --import-neutron with args; it returns what it printed
// and its exit status.
func (m *manager) importNeutron(args ...string) (string, int) {
	m.t.Helper()
	cmd := exec.Command(m.binary, append([]string{"--config-file", m.conf, "--import-neutron"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out) + stderr.String(), exit.ExitCode()
	case err != nil:
		m.t.Fatal(err)
	}
	return string(out) + stderr.String(), 0
}

// wantLines fails the test unless out has a line starting with each of want.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for _, w := range want {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
			t.Errorf("%s: no line starting %q in:\n%s", what, w, out)
		}
	}
}

// waitPKey waits until host port g's pkey table holds pkey (member says
// whether it must hold it, or not).
func (m *manager) waitPKey(g fabric.GUID, pkey uint16, member bool) {
	m.t.Helper()
	waitUntil(m.t, fmt.Sprintf("%s with pkey 0x%04x: %v", g, pkey, member), func() (bool, error) {
		got := m.pkeys(g)
		return slices.Contains(got, pkey) == member, fmt.Errorf("pkey table %s", hex(got))
	})
}

// TestImportNeutronIntoAnEmptyDatabase adopts a cloud: a real Neutron holds
// InfiniBand networks and ports that networking-mlnx never sent to this
// manager (an empty database), and an Ethernet network. The dry run writes
// nothing; the import records every InfiniBand network and client-id port,
// and the running manager puts each GUID in its partition.
func TestImportNeutronIntoAnEmptyDatabase(t *testing.T) {
	n := neutrontest.Start(t, ibPhysnet, ethPhysnet)
	db := storetest.NewDatabase(t, config.EngineSQLite)
	m := startManager(t, db, 4, "physical_networks = "+ibPhysnet)
	m.useNeutron(n)
	h := hostGUIDs(m, 4)
	vlan := n.CreateNetwork(t, neutrontest.Network{Name: "ib-a", Type: "vlan", Physnet: ibPhysnet, VLAN: 150})
	flat := n.CreateNetwork(t, neutrontest.Network{Name: "ib-flat", Type: "flat", Physnet: ibPhysnet})
	eth := n.CreateNetwork(t, neutrontest.Network{Name: "eth", Type: "vlan", Physnet: ethPhysnet, VLAN: 151})
	p1 := n.CreatePort(t, neutrontest.Port{NetworkID: vlan, Host: "node-1", ClientID: neutrontest.ClientID(h[0])})
	p2 := n.CreatePort(t, neutrontest.Port{NetworkID: vlan, Host: "node-2", ClientID: neutrontest.ClientID(h[1])})
	p3 := n.CreatePort(t, neutrontest.Port{NetworkID: flat, Host: "node-3", ClientID: neutrontest.ClientID(h[2])})
	n.CreatePort(t, neutrontest.Port{NetworkID: eth, Host: "node-4", ClientID: neutrontest.ClientID(h[3])})

	rev, jobs := dbCounts(t, db)
	out, code := m.importNeutron("--dry-run")
	if code != 5 {
		t.Fatalf("--dry-run with everything to record: exit %d, want 5:\n%s", code, out)
	}
	wantLines(t, "--dry-run", out, "would record: network "+vlan, "would record: network "+flat,
		"would record: port "+p1, "would record: port "+p2, "would record: port "+p3)
	if strings.Contains(out, eth) {
		t.Errorf("--dry-run names the Ethernet network %s or its port:\n%s", eth, out)
	}
	if r, j := dbCounts(t, db); r != rev || j != jobs {
		t.Errorf("--dry-run wrote: revision %d -> %d, jobs %d -> %d", rev, r, jobs, j)
	}

	out, code = m.importNeutron()
	if code != 0 {
		t.Fatalf("the import: exit %d, want 0:\n%s", code, out)
	}
	wantLines(t, "the import", out, "recorded: network "+vlan, "recorded: port "+p1, "recorded: port "+p3)
	m.waitPKey(h[0], 0x8096, true)
	m.waitPKey(h[1], 0x8096, true)
	m.waitPKey(h[2], 0xfffe, true) // the flat partition, [opensm] flat_pkey 0x7ffe
	if got := m.pkeys(h[3]); slices.Contains(got, 0x8097) {
		t.Errorf("the Ethernet network's port has its VLAN as a pkey: %s", hex(got))
	}
	if out, code = m.importNeutron(); code != 0 || !strings.Contains(out, "5 in agreement, 0 recorded") {
		t.Errorf("the import run again: exit %d, want 0 with 5 in agreement and nothing recorded:\n%s", code, out)
	}
}

// hostGUIDs are the port GUIDs of the fabric's hosts H1 to Hn.
func hostGUIDs(m *manager, n int) []fabric.GUID {
	var out []fabric.GUID
	for i := 1; i <= n; i++ {
		out = append(out, m.fabric.Host(fmt.Sprintf("H%d", i)).PortGUID)
	}
	return out
}

// TestImportNeutronReconciles changes both sides after an import: Neutron
// deletes a port and gains a network and port; networking-mlnx sends the
// manager a network and port Neutron does not have. The import records what
// Neutron has and lists what it lacks, leaving it; --prune removes it.
func TestImportNeutronReconciles(t *testing.T) {
	n := neutrontest.Start(t, ibPhysnet)
	m := startManager(t, storetest.NewDatabase(t, config.EngineSQLite), 4, "physical_networks = "+ibPhysnet)
	m.useNeutron(n)
	h := hostGUIDs(m, 4)
	vlan := n.CreateNetwork(t, neutrontest.Network{Name: "ib-a", Type: "vlan", Physnet: ibPhysnet, VLAN: 150})
	n.CreatePort(t, neutrontest.Port{NetworkID: vlan, Host: "node-1", ClientID: neutrontest.ClientID(h[0])})
	p2 := n.CreatePort(t, neutrontest.Port{NetworkID: vlan, Host: "node-2", ClientID: neutrontest.ClientID(h[1])})
	if out, code := m.importNeutron(); code != 0 {
		t.Fatalf("the first import: exit %d:\n%s", code, out)
	}
	m.waitPKey(h[1], 0x8096, true)

	n.Delete(t, "ports", p2)
	vlan2 := n.CreateNetwork(t, neutrontest.Network{Name: "ib-b", Type: "vlan", Physnet: ibPhysnet, VLAN: 160})
	p4 := n.CreatePort(t, neutrontest.Port{NetworkID: vlan2, Host: "node-4", ClientID: neutrontest.ClientID(h[3])})
	const ours = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73" // the fixture's: VLAN 101, pkey 0x0065
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h3", ours, vendorClientID(h[2]))), nil)

	out, code := m.importNeutron("--dry-run")
	if code != 5 {
		t.Fatalf("--dry-run: exit %d, want 5:\n%s", code, out)
	}
	wantLines(t, "--dry-run", out, "would record: network "+vlan2, "would record: port "+p4,
		"not in Neutron: port "+p2, "not in Neutron: network "+ours, "not in Neutron: port port-h3")

	out, code = m.importNeutron()
	if code != 5 {
		t.Fatalf("the import with memberships Neutron lacks: exit %d, want 5:\n%s", code, out)
	}
	wantLines(t, "the import", out, "recorded: network "+vlan2, "recorded: port "+p4,
		"not in Neutron: port "+p2, "not in Neutron: network "+ours)
	m.waitPKey(h[3], 0x80a0, true)
	if got := m.pkeys(h[1]); !slices.Contains(got, 0x8096) {
		t.Errorf("without --prune the port Neutron deleted lost its pkey: %s", hex(got))
	}

	out, code = m.importNeutron("--prune")
	if code != 0 {
		t.Fatalf("--prune: exit %d, want 0:\n%s", code, out)
	}
	wantLines(t, "--prune", out, "removed: network "+ours, "removed: port "+p2)
	m.waitPKey(h[1], 0x8096, false)
	m.waitPKey(h[2], 0x8065, false)
	m.waitPKey(h[0], 0x8096, true)
}

// TestRestoreThenImportNeutron follows docs/backup.md's restore: the backup
// is older than what Neutron has, so the restored manager takes a port's
// pkey away; the import that follows brings back every network and port
// Neutron has. Each engine has a Neutron of its own: every simulated fabric's
// hosts have the same GUIDs, and two Neutron ports with one GUID are not
// imported.
func TestRestoreThenImportNeutron(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			restoreThenImport(t, neutrontest.Start(t, ibPhysnet), storetest.NewDatabase(t, engine), 150)
		})
	}
}

// restoreThenImport runs the restore and the import on db with Neutron
// networks on VLANs vlan and vlan+10.
func restoreThenImport(t *testing.T, n *neutrontest.Server, db storetest.Database, vlan int) {
	m := startManager(t, db, 3, "physical_networks = "+ibPhysnet)
	m.useNeutron(n)
	h := hostGUIDs(m, 3)
	pkey1, pkey2 := uint16(0x8000|vlan), uint16(0x8000|(vlan+10))
	net1 := n.CreateNetwork(t, neutrontest.Network{Name: "ib-" + db.Engine, Type: "vlan", Physnet: ibPhysnet, VLAN: vlan})
	n.CreatePort(t, neutrontest.Port{NetworkID: net1, Host: "node-1", ClientID: neutrontest.ClientID(h[0])})
	if out, code := m.importNeutron(); code != 0 {
		t.Fatalf("the first import: exit %d:\n%s", code, out)
	}
	m.waitPKey(h[0], pkey1, true)
	backup := filepath.Join(t.TempDir(), "afm.backup")
	runTool(t, backupCommand(t, db, backup))

	p2 := n.CreatePort(t, neutrontest.Port{NetworkID: net1, Host: "node-2", ClientID: neutrontest.ClientID(h[1])})
	net2 := n.CreateNetwork(t, neutrontest.Network{Name: "ib2-" + db.Engine, Type: "vlan", Physnet: ibPhysnet, VLAN: vlan + 10})
	p3 := n.CreatePort(t, neutrontest.Port{NetworkID: net2, Host: "node-3", ClientID: neutrontest.ClientID(h[2])})
	if out, code := m.importNeutron(); code != 0 {
		t.Fatalf("the import after the backup: exit %d:\n%s", code, out)
	}
	m.waitPKey(h[1], pkey1, true)
	m.waitPKey(h[2], pkey2, true)

	m.stop()
	runTool(t, restoreCommand(t, db, backup))
	m.start()
	m.waitPKey(h[1], pkey1, false) // the backup's state
	m.waitPKey(h[2], pkey2, false)
	out, code := m.importNeutron("--dry-run")
	if code != 5 {
		t.Fatalf("--dry-run after the restore: exit %d, want 5:\n%s", code, out)
	}
	wantLines(t, "--dry-run after the restore", out, "would record: port "+p2, "would record: network "+net2,
		"would record: port "+p3)
	if out, code := m.importNeutron(); code != 0 {
		t.Fatalf("the import after the restore: exit %d:\n%s", code, out)
	}
	m.waitPKey(h[1], pkey1, true)
	m.waitPKey(h[2], pkey2, true)
	m.waitPKey(h[0], pkey1, true)
}

// TestImportNeutronReleasesAdoptedMembers ends a switch-over
// (docs/switch-over.md): the running fabric's partition of a Neutron network
// was adopted with a member no port of Neutron has (H3) beside two that have
// one, and another adopted partition has no network in Neutron. The dry run
// names H3 and changes nothing; the import records the network and its
// ports and releases H3 only; the other adopted partition stays.
func TestImportNeutronReleasesAdoptedMembers(t *testing.T) {
	n := neutrontest.Start(t, ibPhysnet)
	m := startManager(t, storetest.NewDatabase(t, config.EngineSQLite), 4, "physical_networks = "+ibPhysnet)
	m.useNeutron(n)
	h := hostGUIDs(m, 4)
	running := filepath.Join(t.TempDir(), "running-partitions.conf")
	text := fmt.Sprintf("tenant_a=0x0096, ipoib : %s=full, %s=full, %s=full ;\ntenant_b=0x00aa : %s=full ;\n",
		h[0], h[1], h[2], h[3])
	if err := os.WriteFile(running, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	m.operator("--adopt-partitions", running)
	m.waitPKey(h[2], 0x8096, true)
	m.waitPKey(h[3], 0x80aa, true)
	vlan := n.CreateNetwork(t, neutrontest.Network{Name: "ib-a", Type: "vlan", Physnet: ibPhysnet, VLAN: 150})
	n.CreatePort(t, neutrontest.Port{NetworkID: vlan, Host: "node-1", ClientID: neutrontest.ClientID(h[0])})
	n.CreatePort(t, neutrontest.Port{NetworkID: vlan, Host: "node-2", ClientID: neutrontest.ClientID(h[1])})

	out, code := m.importNeutron("--dry-run")
	if code != 5 {
		t.Fatalf("--dry-run: exit %d, want 5:\n%s", code, out)
	}
	wantLines(t, "--dry-run", out, "would release adopted: pkey 0x0096: "+h[2].String()+" ")
	out, code = m.importNeutron()
	if code != 0 {
		t.Fatalf("the import: exit %d, want 0:\n%s", code, out)
	}
	wantLines(t, "the import", out, "released adopted: pkey 0x0096: "+h[2].String()+" ")
	m.waitPKey(h[2], 0x8096, false)
	for _, g := range h[:2] {
		if got := m.pkeys(g); !slices.Contains(got, 0x8096) {
			t.Errorf("%s, a Neutron port of the network, lost pkey 0x8096: %s", g, hex(got))
		}
	}
	if got := m.pkeys(h[3]); !slices.Contains(got, 0x80aa) {
		t.Errorf("the adopted partition Neutron has no network for lost its member: %s", hex(got))
	}
	if out, code = m.importNeutron(); code != 0 || strings.Contains(out, "release") {
		t.Errorf("the import run again: exit %d, want 0 and nothing released:\n%s", code, out)
	}
}
