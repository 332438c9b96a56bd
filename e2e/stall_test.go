package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Two VLAN networks whose IDs share their first 27 characters are both
// applied, and so is every later change: accepted means applicable.
func TestNetworksWithCommonIDPrefixApply(t *testing.T) {
	m := startManager(t, storetest.NewDatabase(t, config.EngineSQLite), 2)
	ids := []string{"11111111-aaaa-4aaa-8aaa-000000000001", "11111111-aaaa-4aaa-8aaa-000000000002"}
	for i, id := range ids {
		body := strings.Replace(fixture(t, "network_create_vlan.json"), netID, id, 1)
		body = strings.Replace(body, `"provider:segmentation_id": 101`, fmt.Sprintf(`"provider:segmentation_id": %d`, 101+i), 1)
		if j := m.waitFinal(m.accept("POST", "/cloudx/Network", body)); j.Status != "Completed" {
			t.Fatalf("network %s: %+v; want Completed", id, j)
		}
	}
	for i, id := range ids {
		h := m.fabric.Host(fmt.Sprintf("H%d", i+1)).PortGUID
		pkey := uint16(0x8000 | (101 + i))
		job := m.accept("POST", "/cloudx/Port", portBody(fmt.Sprintf("port-%d", i), id, vendorClientID(h)))
		if j := m.waitFinal(job); j.Status != "Completed" {
			t.Fatalf("port of network %s: %+v; want Completed", id, j)
		}
		if got := m.pkeys(h); !slices.Contains(got, pkey) {
			t.Errorf("H%d's pkey table is %s, without %#04x", i+1, hex(got), pkey)
		}
	}
}
