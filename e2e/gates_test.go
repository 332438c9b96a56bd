package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The gates, on a real OpenSM: no job completes until an operator confirmed
// the switches, while a confirmed switch is missing from OpenSM's sweep, or
// while a switch port's enforcement is recorded as cleared.

const netID = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"

// TestNewDatabaseCompletesNothingUntilConfirmed, on every engine.
func TestNewDatabaseCompletesNothingUntilConfirmed(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			m := launchManager(t, storetest.NewDatabase(t, engine), fabricsim.Options{Hosts: 1}, settings{})
			job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
			j := m.waitDescription(job, "No expected switches")
			if j.Status == "Completed" {
				t.Fatalf("job completed without confirmed switches: %+v", j)
			}
			var s struct {
				Applier       struct{ Holder string }
				NotCompleting []string `json:"not_completing"`
			}
			if err := json.Unmarshal([]byte(m.operator("--status", "--json")), &s); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(s.Applier.Holder, "pid") || !containsPrefix(s.NotCompleting, "No expected switches") {
				t.Errorf("--status --json = %+v; want a holder and \"No expected switches\"", s)
			}
			m.confirmSwitches()
			m.waitCompleted(job, nil)
		})
	}
}

// TestMissingSwitchBlocksCompletion: a confirmed switch whose links go down
// holds every job, naming the switch, until it is back in OpenSM's sweep.
func TestMissingSwitchBlocksCompletion(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 3, Switches: 2}, settings{})
	m.confirmSwitches()
	job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	m.waitCompleted(job, nil)

	s2 := fabricsim.SwitchGUID(2).String()
	if err := m.fabric.Unlink(t.Context(), "S2"); err != nil {
		t.Fatal(err)
	}
	h1 := m.fabric.Host("H1") // behind S1: still reachable
	job = m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1.PortGUID)))
	j := m.waitDescription(job, "expected switch "+s2+" (S2) is missing")
	if j.Status == "Completed" {
		t.Fatalf("job completed while S2 is gone: %+v", j)
	}
	if err := m.fabric.Relink(t.Context(), "S2"); err != nil {
		t.Fatal(err)
	}
	m.waitCompleted(job, nil)
}

// TestEnforcementErrorBlocksUntilCleared: an ERR 0507 line in OpenSM's log
// holds every job until an operator clears it.
func TestEnforcementErrorBlocksUntilCleared(t *testing.T) {
	m := startManager(t, storetest.NewDatabase(t, config.EngineSQLite), 2)
	job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	m.waitCompleted(job, nil)

	// The exact format of OpenSM's line (opensm-reference §3.2), appended to
	// the log OpenSM writes.
	s1 := fabricsim.SwitchGUID(1).String()
	line := time.Now().Format("Jan 02 15:04:05 000000") + " [7F3A2B] 0x01 -> pkey_mgr_update_peer_port: ERR 0507: " +
		"Not enough pkey entries (60 <= 60) on switch " + s1 + " port 2 (S1). Clearing Enforcement bit\n"
	logFile, err := os.OpenFile(filepath.Join(m.dir, "opensm", "opensm.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := logFile.WriteString(line); err != nil {
		t.Fatal(err)
	}
	logFile.Close()

	want := s1 + ":2"
	waitFor(t, "the enforcement error recorded", func() bool {
		return strings.Contains(m.operator("--show-enforcement-errors"), want+"  first seen")
	})
	if !strings.Contains(m.log(), "OpenSM cleared a switch port's enforcement") {
		t.Errorf("the manager did not log the cleared enforcement:\n%s", m.log())
	}
	h1 := m.fabric.Host("H1")
	job = m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1.PortGUID)))
	j := m.waitDescription(job, "OpenSM cleared a switch port's enforcement: "+want)
	if j.Status == "Completed" {
		t.Fatalf("job completed with an enforcement error recorded: %+v", j)
	}
	if out := m.operator("--clear-enforcement-errors"); !strings.Contains(out, "cleared 1 enforcement errors") {
		t.Errorf("--clear-enforcement-errors printed %q", out)
	}
	m.waitCompleted(job, nil)
}

// confirmSwitches waits for OpenSM's first subnet dump, then runs
// --confirm-switches.
func (m *manager) confirmSwitches() {
	m.t.Helper()
	dump := filepath.Join(m.dir, "opensm", "opensm-subnet.lst")
	waitFor(m.t, "OpenSM's first subnet dump", func() bool {
		_, err := os.Stat(dump)
		return !errors.Is(err, fs.ErrNotExist)
	})
	// OpenSM writes the dump in place: a read racing with it fails; retry.
	var out string
	waitFor(m.t, "--confirm-switches to succeed", func() bool {
		var err error
		out, err = m.tryOperator("--confirm-switches")
		return err == nil
	})
	if !strings.Contains(out, "confirmed") {
		m.t.Fatalf("--confirm-switches printed %q", out)
	}
}

// operator runs an operator command against the manager's configuration.
func (m *manager) operator(args ...string) string {
	m.t.Helper()
	out, err := m.tryOperator(args...)
	if err != nil {
		m.t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (m *manager) tryOperator(args ...string) (string, error) {
	cmd := exec.Command(m.binary, append([]string{"--config-file", m.conf}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.New(err.Error() + ": " + stderr.String())
	}
	return string(out), nil
}

// waitDescription polls the job until its description contains want; the job
// must stay open meanwhile.
func (m *manager) waitDescription(job, want string) jobStatus {
	m.t.Helper()
	var j jobStatus
	waitUntil(m.t, "job "+job+" to say "+want, func() (bool, error) {
		j = m.job(job)
		if j.Status != "Pending" && j.Status != "Running" {
			m.t.Fatalf("job %s is %s before the gate opened: %+v", job, j.Status, j)
		}
		return strings.Contains(j.Description, want), fmt.Errorf("%+v", j)
	})
	return j
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestUnconfirmedSwitchBlocksCompletion: a switch in OpenSM's sweep that was
// not confirmed (S2 unlinked while the switches were confirmed, then linked
// again; a host answering NodeInfo as a switch looks the same) holds every
// job, naming it, until an operator confirms the new set.
func TestUnconfirmedSwitchBlocksCompletion(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 3, Switches: 2}, settings{})
	s2 := fabricsim.SwitchGUID(2)
	dump := filepath.Join(m.dir, "opensm", "opensm-subnet.lst")
	if err := m.fabric.Unlink(t.Context(), "S2"); err != nil {
		t.Fatal(err)
	}
	// The dump shows the fabric without S2 once OpenSM swept after the unlink.
	waitFor(t, "OpenSM's dump without S2", func() bool {
		data, err := os.ReadFile(dump)
		return err == nil && strings.Contains(string(data), fabricsim.SwitchGUID(1).String()[2:]) &&
			!strings.Contains(string(data), "{S2}")
	})
	m.confirmSwitches()
	job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	m.waitCompleted(job, nil)

	if err := m.fabric.Relink(t.Context(), "S2"); err != nil {
		t.Fatal(err)
	}
	h1 := m.fabric.Host("H1")
	job = m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1.PortGUID)))
	j := m.waitDescription(job, "switch "+s2.String()+" (S2) is in OpenSM's last sweep but was not confirmed")
	if j.Status == "Completed" {
		t.Fatalf("job completed with an unconfirmed switch: %+v", j)
	}
	if code, out := m.statusExit(); code == 0 || !strings.Contains(out, s2.String()) {
		t.Errorf("--status with an unconfirmed switch: exit %d, want non-zero naming %s:\n%s", code, s2, out)
	}
	m.confirmSwitches()
	m.waitCompleted(job, nil)
}
