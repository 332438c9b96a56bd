package e2e

import (
	"fmt"
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

// otherTenantNet is another tenant's network, on VLAN 102 (pkey 0x0066).
const otherTenantNet = "6c1e2a4f-0b7d-4e9a-8f3c-2d5b7a9e1c04"

// otherTenantNetwork is network_create_vlan.json as another tenant's network.
func otherTenantNetwork(t *testing.T) string {
	body := fixture(t, "network_create_vlan.json")
	body = strings.Replace(body, `"id": "`+netID+`"`, `"id": "`+otherTenantNet+`"`, 1)
	return strings.Replace(body, `"provider:segmentation_id": 101`, `"provider:segmentation_id": 102`, 1)
}

// TestReadBackDroppedSetsHoldOnlyTheirHost: the simulator drops every
// P_KeyTable MAD to H2 (as a host whose own software took over its SMA), so
// that every heavy sweep ends with "Errors during initialization". A port
// for H2 and another tenant's port for H3 are sent: H3's job completes once
// its table, read back, shows it; H2's waits, naming H2, never completed
// while its table cannot be set. H2's port, and no other, is named by
// afm_port_sets_failed, recorded in the database: a restarted manager (a new
// term) names it too. Once the drops end, the state applied again gives H2
// the pkey, its job completes, and the sweep that came up clean clears the
// metric.
func TestReadBackDroppedSetsHoldOnlyTheirHost(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 3},
		settings{OpenSM: []string{"verify_timeout = 300"}, API: []string{"metrics_token = " + metricsToken}})
	m.confirmSwitches()
	h2, h3 := m.fabric.Host("H2").PortGUID, m.fabric.Host("H3").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Network", otherTenantNetwork(t)), nil)
	if _, err := m.fabric.Sim(t.Context(), `Error "H2"[1] 100 22`); err != nil {
		t.Fatal(err)
	}
	dropped := m.accept("POST", "/cloudx/Port", portBody("port-h2", netID, vendorClientID(h2)))
	other := m.accept("POST", "/cloudx/Port", portBody("port-h3", otherTenantNet, vendorClientID(h3)))
	m.waitCompleted(other, func() {
		if got := m.pkeys(h3); !slices.Contains(got, 0x8066) {
			t.Fatalf("H3's job read Completed while H3's pkey table is %s, without 0x8066", hex(got))
		}
	})
	if !strings.Contains(m.log(), "the sweep ended with errors; judging each job by its ports' P_Key tables") {
		t.Errorf("H3's job completed, but no sweep ended with errors (the test proves nothing):\n%s", m.log())
	}
	j := m.waitDescription(dropped, "port "+h2.String())
	if j.Status != "Running" {
		t.Fatalf("H2's job while its Sets are dropped: %+v; want Running", j)
	}
	waitFor(t, "afm_port_sets_failed to name H2's port", func() bool { return slices.Equal(m.setFailures(), []string{h2.String()}) })
	m.stop()
	m.start()
	if got := m.setFailures(); !slices.Equal(got, []string{h2.String()}) {
		t.Errorf("afm_port_sets_failed after a restart names %v; want H2's port %s alone", got, h2)
	}
	heal(t, m, "H2")
	m.waitCompleted(dropped, func() {
		if got := m.pkeys(h2); !slices.Contains(got, 0x8065) {
			t.Fatalf("H2's job read Completed while H2's pkey table is %s, without 0x8065", hex(got))
		}
	})
	waitFor(t, "afm_port_sets_failed to name no port once a sweep came up clean", func() bool { return len(m.setFailures()) == 0 })
}

// setFailures are the ports afm_port_sets_failed names on the default
// fabric, sorted.
func (m *manager) setFailures() []string {
	m.t.Helper()
	var ports []string
	for _, s := range m.scrape(m.url+"/metrics", metricsToken)["afm_port_sets_failed"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "port" && s.GetGauge().GetValue() == 1 {
				ports = append(ports, l.GetValue())
			}
		}
	}
	slices.Sort(ports)
	return ports
}

// TestReadBackRemovalHeldAcrossARestart: H1's port is removed while the
// simulator drops every P_KeyTable MAD to H1, so that OpenSM cannot take the
// pkey out of H1's table and no read can show it gone. The removal waits,
// naming H1; a restarted manager (a new term, nothing remembered) reads the
// removal's recorded place again and keeps it waiting; once the drops end,
// the state applied again takes the pkey out of H1's table, and the removal
// completes then.
func TestReadBackRemovalHeldAcrossARestart(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 2},
		settings{OpenSM: []string{"verify_timeout = 300"}})
	m.confirmSwitches()
	h1 := m.fabric.Host("H1").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody(readbackPort, netID, vendorClientID(h1))), nil)
	if _, err := m.fabric.Sim(t.Context(), `Error "H1"[1] 100 22`); err != nil {
		t.Fatal(err)
	}
	removal := m.accept("DELETE", "/cloudx/Port/"+readbackPort, portBody(readbackPort, netID, vendorClientID(h1)))
	m.waitDescription(removal, "port "+h1.String())
	m.stop()
	from := len(m.log())
	m.start()
	waitFor(t, "the restarted manager's sweep to end with errors", func() bool {
		return strings.Contains(m.log()[from:], "the sweep ended with errors; judging each job by its ports' P_Key tables")
	})
	// The judgement is logged before the job says it: a sweep the new term
	// followed past sweep_timeout wrote its own wait into the job meanwhile.
	// waitDescription fails the test should the removal leave Running.
	m.waitDescription(removal, "port "+h1.String())
	heal(t, m, "H1")
	m.waitCompleted(removal, func() {
		if got := m.pkeys(h1); slices.Contains(got, 0x8065) || slices.Contains(got, 0x0065) {
			t.Fatalf("the removal read Completed while H1's pkey table is %s, still with 0x0065", hex(got))
		}
	})
}

// heal ends ibsim's drops of host's MADs. ibsim logs each MAD it drops, and
// a log that goes on after the console's prompt hides its answer: the
// command is sent again until one is answered, once the drops have ended.
func heal(t *testing.T, m *manager, host string) {
	t.Helper()
	waitFor(t, "ibsim to end the drops to "+host, func() bool {
		_, err := m.fabric.Sim(t.Context(), fmt.Sprintf(`Error "%s"[1] 0`, host))
		return err == nil
	})
}
