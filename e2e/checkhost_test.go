package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestCheckHostRefusesASquat: a manager started with [api] check_host
// before any host is confirmed warns that it refuses nothing yet. With the
// hosts confirmed, tenant A's port bound to its own host (node01, as Nova names
// it: an FQDN) but naming idle host node03's GUID is refused with 400 naming
// the GUID and A's host only, and nothing is recorded nor programmed; tenant
// B's port on node03, bound to node03, is then accepted and node03's real
// table holds B's pkey, which the squat would have kept from it.
func TestCheckHostRefusesASquat(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	m := launchManager(t, db, fabricsim.Options{Hosts: 3, Descriptions: map[string]string{
		"H1": "node01 mlx5_0", "H2": "node02 mlx5_0", "H3": "node03 mlx5_0"}},
		settings{API: []string{"check_host = true"}})
	m.confirmSwitches()
	if warning := "[api] check_host is on but no host of this fabric is confirmed"; !strings.Contains(m.log(), warning) {
		t.Errorf("the start does not warn %q before --confirm-hosts", warning)
	}
	if out := m.confirmHosts(""); !strings.Contains(out, "confirmed 4 ports of 4 hosts") {
		t.Fatalf("--confirm-hosts printed %q", out)
	}
	const netA, netB = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", "5c2e8b14-9d3f-4a6b-8e1c-7f0a2b4d6e81"
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil) // pkey 0x65
	m.waitCompleted(m.accept("POST", "/cloudx/Network", vlanNetworkBody(netB, 102)), nil)
	h1, h3 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H3").PortGUID
	revision, jobs := dbCounts(t, db)

	status, body := m.send("POST", "/cloudx/Port", boundPortBody("port-squat", netA, h3, "node01.cloud.example.org"))
	want := "GUID " + h3.String() + ` is the port of a confirmed host other than the port's binding:host_id`
	if status != http.StatusBadRequest || !strings.Contains(body, want) || !strings.Contains(body, "node01.cloud.example.org") ||
		!strings.Contains(body, "[api] check_host") {
		t.Errorf("tenant A's port on node03's GUID: %d %s, want 400 saying %q", status, body, want)
	}
	if strings.Contains(body, "node03") {
		t.Errorf("the refusal %s names the confirmed host node03", body)
	}
	if r, j := dbCounts(t, db); r != revision || j != jobs {
		t.Errorf("the refused port left revision %d and %d jobs, want %d and %d", r, j, revision, jobs)
	}
	m.holds("H3", h3, 0x65, "")

	m.waitCompleted(m.accept("POST", "/cloudx/Port", boundPortBody("port-a", netA, h1, "NODE01.cloud.example.org")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", boundPortBody("port-b", netB, h3, "node03")), nil)
	m.holds("H1", h1, 0x65, "full")
	m.holds("H3", h3, 102, "full")
	m.holds("H3", h3, 0x65, "")
}

// boundPortBody is portBody bound to host, with g's vendor client-id.
func boundPortBody(id, networkID string, g fabric.GUID, host string) string {
	return strings.Replace(portBody(id, networkID, vendorClientID(g)),
		`"binding:host_id": "e2c47a1b-5f6d-4c8e-a9b0-3d1f2e4c6a78"`, `"binding:host_id": "`+host+`"`, 1)
}
