package main

import (
	"os"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/neutrontest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// --import-neutron records each of Neutron's networks in the fabric of its
// physnet, with the fabric's own rules: one VLAN ID on both physnets, and one
// GUID in a port of each, become a partition on each fabric. It reports per
// fabric, and a second run finds both in agreement.
func TestImportNeutronIntoEachFabric(t *testing.T) {
	n := neutrontest.Start(t, "ib", "storage")
	f := newTwoFabrics(t, config.EngineSQLite)
	b, err := os.ReadFile(f.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b) + "\n[neutron]\nclouds_file = " + n.CloudsFile(t) + "\ncloud = neutrontest\n"
	if err := os.WriteFile(f.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	const g = fabric.GUID(0x0002c90300000101)
	ids := map[string]string{}
	for _, physnet := range []string{"ib", "storage"} {
		ids[physnet] = n.CreateNetwork(t, neutrontest.Network{Name: physnet, Type: "vlan", Physnet: physnet, VLAN: 101})
		n.CreatePort(t, neutrontest.Port{NetworkID: ids[physnet], Host: "node-1", ClientID: neutrontest.ClientID(g)})
	}

	code, out, errOut := runCommand(t, "--config-file", f.conf, "--import-neutron")
	if code != 0 {
		t.Fatalf("--import-neutron: exit %d:\n%s%s", code, out, errOut)
	}
	rest := out
	for _, want := range []string{"fabric default ([opensm]):\n", "recorded: network " + ids["ib"], "summary:",
		"fabric storage ([fabric:storage]):\n", "recorded: network " + ids["storage"], "summary:"} {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("--import-neutron does not say %q after what came before:\n%s", want, out)
		}
		rest = rest[i+len(want):]
	}
	for physnet, st := range map[string]*store.Store{"ib": f.def, "storage": f.storage} {
		snap, err := st.Snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Networks) != 1 || snap.Networks[0].ID != ids[physnet] || snap.Networks[0].PKey == nil ||
			*snap.Networks[0].PKey != 0x0065 || len(snap.Members) != 1 || snap.Members[0].GUID != g {
			t.Errorf("fabric %s recorded %+v, members %+v; want network %s, pkey 0x0065, member %s",
				st.FabricName(), snap.Networks, snap.Members, ids[physnet], g)
		}
	}

	code, out, errOut = runCommand(t, "--config-file", f.conf, "--import-neutron")
	if code != 0 || strings.Count(out, "2 in agreement") != 2 {
		t.Errorf("--import-neutron again: exit %d, want 0 and both fabrics in agreement:\n%s%s", code, out, errOut)
	}
}
