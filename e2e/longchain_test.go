package e2e

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// TestReadBackLongChain: on a chain of 40 switches, one host each, the
// simulator forwards a LID-routed SMP across 16 switches at most, while
// OpenSM reaches and programs every port by directed route. With the
// defaults (verify = tables, the audit and the second-SM look on), a port
// on H20, behind the 20th switch, completes: the manager reads its table
// back by the directed route OpenSM's dump gives, and at completion the
// table holds the pkey (read by smpquery along that route, once it checked
// that the route leads to H20).
func TestReadBackLongChain(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 40, Switches: 40}, settings{})
	m.confirmSwitches()
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	h20 := fabricsim.HostGUID(20)
	job := m.accept("POST", "/cloudx/Port", portBody(readbackPort, netID, vendorClientID(h20)))
	m.waitCompleted(job, func() {
		topo, err := topology.Load(filepath.Join(m.dir, "opensm", topology.FileName))
		if err != nil {
			t.Fatal(err)
		}
		route, ok := topo.Route(h20)
		if !ok {
			t.Fatalf("OpenSM's subnet dump gives no route to H20")
		}
		got, err := m.fabric.PKeysByRoute(t.Context(), h20, topology.RouteString(route))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(got, 0x8065) {
			t.Fatalf("job read Completed while H20's pkey table is %s, without 0x8065", hex(got))
		}
	})
}
