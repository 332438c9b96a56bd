package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestSwitchGUIDRefused: a switch's GUID sent as a port's client-id
// (networking-mlnx) or as a pod's GUID (the pkeys API) is refused with 400,
// naming the switch, once OpenSM's subnet dump lists it: a tenant sets its
// port's client-id, and a switch in its partition is a path to the switch's
// management port. Nothing is recorded.
func TestSwitchGUIDRefused(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricOptions(1), settings{UFMPKeys: []string{
		"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff", "apply_timeout = 60",
	}})
	m.confirmSwitches() // OpenSM has written its subnet dump
	sw := fabricsim.SwitchGUID(1)
	const net = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)

	status, body := m.send("POST", "/cloudx/Port", portBody("port-switch", net, vendorClientID(sw)))
	if status != http.StatusBadRequest || !strings.Contains(body, "is switch "+sw.String()+"'s") {
		t.Errorf("a port with the switch's GUID: %d %s, want 400 naming the switch", status, body)
	}
	k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
	resp, answer := k.do("POST", "/ufmRest/resources/pkeys", `{"pkey": "0x1005", "guids": ["`+ufm(sw)+`"]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer, "is switch "+sw.String()+"'s") {
		t.Errorf("a pod GUID that is the switch's: %d %s, want 400 naming the switch", resp.StatusCode, answer)
	}
	// A host's GUID is still taken, as job 2: the refused changes left none.
	job := m.accept("POST", "/cloudx/Port", portBody("port-h1", net, vendorClientID(m.fabric.Host("H1").PortGUID)))
	if job != "app/jobs/2" {
		t.Errorf("the next change is %s, want app/jobs/2", job)
	}
	m.waitCompleted(job, nil)
}
