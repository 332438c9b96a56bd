package e2e

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestReservedGUIDsRefused: a tenant that names the subnet manager's own port
// GUID (its client-id through networking-mlnx, or a pod's GUID through the
// pkeys API) or a GUID of [api] reserved_guids is refused with 400 saying
// why, on a real OpenSM: the SM's port in a tenant's partition would put the
// tenant in the partition of the port that programs every other. Nothing is
// recorded, and a host's own GUID is still taken.
func TestReservedGUIDsRefused(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	reserved := fabric.GUID(0x0002c903000fff01)
	m := launchManager(t, db, fabricOptions(1), settings{
		API: []string{"reserved_guids = " + reserved.String()},
		UFMPKeys: []string{"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff",
			"apply_timeout = 60"},
	})
	m.confirmSwitches()
	const net = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	revision, jobs := dbCounts(t, db)

	k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
	for _, c := range []struct {
		name string
		guid fabric.GUID
		why  string
	}{
		{"the subnet manager's port", m.fabric.SMGUID, "is the port of a subnet manager"},
		{"a GUID of [api] reserved_guids", reserved, "[api] reserved_guids"},
	} {
		status, body := m.send("POST", "/cloudx/Port", portBody("port-squat", net, vendorClientID(c.guid)))
		if status != http.StatusBadRequest || !strings.Contains(body, c.why) {
			t.Errorf("networking-mlnx, %s: %d %s, want 400 saying %q", c.name, status, body, c.why)
		}
		resp, answer := k.do("POST", "/ufmRest/resources/pkeys", `{"pkey": "0x1005", "guids": ["`+ufm(c.guid)+`"]}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer, c.why) {
			t.Errorf("ib-kubernetes, %s: %d %s, want 400 saying %q", c.name, resp.StatusCode, answer, c.why)
		}
		resp, answer = k.do("PUT", "/ufmRest/resources/pkeys", `{"pkey": "0x1006", "guids": ["`+ufm(c.guid)+`"], "index0": false, "ip_over_ib": true}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer, c.why) {
			t.Errorf("UFM's PUT, %s: %d %s, want 400 saying %q", c.name, resp.StatusCode, answer, c.why)
		}
	}
	if r, j := dbCounts(t, db); r != revision || j != jobs {
		t.Errorf("the refused changes left revision %d and %d jobs, want %d and %d", r, j, revision, jobs)
	}
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h1", net, vendorClientID(m.fabric.Host("H1").PortGUID))), nil)
}

// TestStandbySMPortRefused: with two HA managers on PostgreSQL, each with its
// OpenSM on its own SM HCA, the leader's API refuses a port naming either
// manager's SM port, the standby's too: its OpenSM is stopped, but its port
// is the master's as soon as that manager leads.
func TestStandbySMPortRefused(t *testing.T) {
	db := storetest.NewDatabase(t, config.EnginePostgres)
	c := &haCluster{t: t, fabric: fabricsim.StartT(t, fabricsim.Options{Hosts: 2, SMs: 2}), dbs: []storetest.Database{db, db}}
	for k := 1; k <= 2; k++ {
		c.managers = append(c.managers, c.launch(k, db))
	}
	leader := c.leader()
	leader.confirmSwitches()
	const net = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	leader.waitCompleted(leader.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	for k := 1; k <= 2; k++ {
		_, guid := c.fabric.SMEnv(k)
		for _, m := range c.managers {
			status, body := m.send("POST", "/cloudx/Port", portBody("port-squat", net, vendorClientID(guid)))
			if status != http.StatusBadRequest || !strings.Contains(body, "GUID "+guid.String()+" is the port of a subnet manager") {
				t.Errorf("manager %s's API, SM %d's port %s: %d %s, want 400", m.holderName(), k, guid, status, body)
			}
		}
	}
	leader.waitCompleted(leader.accept("POST", "/cloudx/Port", portBody("port-h1", net, vendorClientID(c.fabric.Host("H1").PortGUID))), nil)
}

// TestReservedAfterRecordedNamedByStatus: a port recorded before its GUID
// was listed in [api] reserved_guids keeps its membership on the fabric
// after a restart that lists it; --status names it, its update is refused,
// its removal is not.
func TestReservedAfterRecordedNamedByStatus(t *testing.T) {
	m := startManager(t, storetest.NewDatabase(t, config.EngineSQLite), 2)
	const net, port = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", "port-h2"
	h2 := m.fabric.Host("H2").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody(port, net, vendorClientID(h2))), nil)

	m.stop()
	conf, err := os.ReadFile(m.conf)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(conf), "[api]\n", "[api]\nreserved_guids = "+h2.String()+"\n", 1)
	if err := os.WriteFile(m.conf, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start()

	held := "port " + port + " of network " + net + " holds it: GUID " + h2.String() + " is in [api] reserved_guids"
	if out := m.operator("--status"); !strings.Contains(out, "reserved GUID:") || !strings.Contains(out, held) {
		t.Errorf("--status does not name the held GUID %q:\n%s", held, out)
	}
	m.holds("H2", h2, 0x65, "full")
	status, body := m.send("PUT", "/cloudx/Port/"+port, portBody(port, net, vendorClientID(h2)))
	if status != http.StatusBadRequest || !strings.Contains(body, "is in [api] reserved_guids") {
		t.Errorf("the port's update: %d %s, want 400", status, body)
	}
	m.waitCompleted(m.accept("DELETE", "/cloudx/Port/"+port, portBody(port, net, vendorClientID(h2))), nil)
	m.holds("H2", h2, 0x65, "")
	if out := m.operator("--status"); strings.Contains(out, "reserved GUID:") {
		t.Errorf("--status still names a held GUID after the port's removal:\n%s", out)
	}
}
