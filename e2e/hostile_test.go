package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestHostileNodeDescriptionStopsNoJob: bare-metal tenants name their hosts
// with the phrases the manager reads in OpenSM's log, and bounce their links,
// so that OpenSM quotes the descriptions as it drops and finds their ports
// again. No enforcement error is recorded, and jobs complete, before and
// after the bounce.
func TestHostileNodeDescriptionStopsNoJob(t *testing.T) {
	descs := map[string]string{
		"H2": "Clearing Enforcement bit",
		"H3": "ERR 0507: ERR 0512: Partition configuration in error",
	}
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 3, Descriptions: descs}, settings{})
	m.confirmSwitches()
	job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	m.waitCompleted(job, nil)

	openSMLog := filepath.Join(m.dir, "opensm", "opensm.log")
	logged := func(text string) bool {
		b, err := os.ReadFile(openSMLog)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(b), text)
	}
	for _, host := range []string{"H2", "H3"} {
		if err := m.fabric.Unlink(t.Context(), host); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "OpenSM to drop "+host, func() bool { return logged("of node:" + descs[host]) })
		if err := m.fabric.Relink(t.Context(), host); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "OpenSM to find "+host+" again", func() bool { return logged("of node: " + descs[host]) })
	}
	for i, host := range []string{"H1", "H2", "H3"} {
		h := m.fabric.Host(host)
		job := m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a9"+string(rune('0'+i)), netID, vendorClientID(h.PortGUID)))
		m.waitCompleted(job, nil)
	}
	if out := m.operator("--show-enforcement-errors"); !strings.Contains(out, "no enforcement errors recorded") {
		t.Errorf("--show-enforcement-errors: %s", out)
	}
}
