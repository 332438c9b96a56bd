package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The read-back proof ([opensm] verify): a job completes once the ports' own
// P_Key tables show its change, not on OpenSM's log alone. (A normal add and
// removal, checked against the tables at the moment the job completes, are
// TestVerticalSlice's, which runs with the default, verify = tables.)

const readbackPort = "8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94"

// readbackManager starts a manager on two hosts with the network of
// network_create_vlan.json (pkey 0x0065) in place, and H2's links cut: a
// port for H2 is then in no table OpenSM's sweep can reach, while nothing in
// OpenSM's log names it.
func readbackManager(t *testing.T, opensmLines ...string) *manager {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 2},
		settings{OpenSM: opensmLines})
	m.confirmSwitches()
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	if err := m.fabric.Unlink(t.Context(), "H2"); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReadBackHoldsWhatTheLogCompletes: OpenSM's sweep for H2's port ends
// cleanly (SUBNET UP, no error naming the port: H2 is simply not on the
// fabric), so the log alone completes its job; the read-back proof keeps it
// Running, naming the port, and fails it after verify_timeout.
func TestReadBackHoldsWhatTheLogCompletes(t *testing.T) {
	h2 := fabricsim.HostGUID(2)
	t.Run("log", func(t *testing.T) {
		m := readbackManager(t, "verify = log")
		m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody(readbackPort, netID, vendorClientID(h2))), nil)
	})
	t.Run("tables", func(t *testing.T) {
		m := readbackManager(t, "verify_timeout = 8")
		job := m.accept("POST", "/cloudx/Port", portBody(readbackPort, netID, vendorClientID(h2)))
		j := m.waitDescription(job, "Not completing until the ports' own P_Key tables show the change")
		if !strings.Contains(j.Description, "port "+h2.String()+": not in OpenSM's subnet dump") {
			t.Errorf("the waiting job's description does not name H2 and why: %q", j.Description)
		}
		j = m.waitFinal(job)
		if j.Status != "Failed" || !strings.Contains(j.Summary, "did not show it within verify_timeout (8s)") ||
			!strings.Contains(j.Summary, h2.String()) {
			t.Errorf("job %+v: want Failed after verify_timeout, naming H2", j)
		}
	})
}

// TestReadBackCompletesAPortThatComesBack: H2's job waits while H2 is off the
// fabric; once its links are back, OpenSM sweeps it in by itself, a later
// read finds its table holding the pkey, and the job completes then, not
// before.
func TestReadBackCompletesAPortThatComesBack(t *testing.T) {
	m := readbackManager(t, "verify_timeout = 300")
	h2 := fabricsim.HostGUID(2)
	job := m.accept("POST", "/cloudx/Port", portBody(readbackPort, netID, vendorClientID(h2)))
	m.waitDescription(job, "port "+h2.String()+": not in OpenSM's subnet dump")
	if err := m.fabric.Relink(t.Context(), "H2"); err != nil {
		t.Fatal(err)
	}
	m.waitCompleted(job, func() {
		if got := m.pkeys(h2); !slices.Contains(got, 0x8065) {
			t.Fatalf("job read Completed while H2's pkey table is %s, without 0x8065", hex(got))
		}
	})
}

// TestReadBackHoldsOnlyTheCutHost: H2's link is cut, and its port's job
// waits for H2's table; a port for H1 sent meanwhile (another tenant's VM
// booting) completes once H1's table shows it, while H2's job still waits:
// one host off the fabric holds no other port's job.
func TestReadBackHoldsOnlyTheCutHost(t *testing.T) {
	m := readbackManager(t, "verify_timeout = 300")
	h1, h2 := fabricsim.HostGUID(1), fabricsim.HostGUID(2)
	cut := m.accept("POST", "/cloudx/Port", portBody(readbackPort, netID, vendorClientID(h2)))
	m.waitDescription(cut, "port "+h2.String()+": not in OpenSM's subnet dump")
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("5d1c9e7a-3b2f-4a6e-8c0d-9f1e2a3b4c5d", netID,
		vendorClientID(h1))), func() {
		if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
			t.Fatalf("H1's job read Completed while H1's pkey table is %s, without 0x8065", hex(got))
		}
	})
	if j := m.job(cut); j.Status != "Running" {
		t.Errorf("H2's job, its host still cut off: %+v; want Running", j)
	}
}
