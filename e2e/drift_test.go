package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// TestDriftRepair: a partitions file edited by hand or deleted, and an OpenSM
// killed, are repaired within a check interval, and the hosts' real pkey tables
// are right again; a job sent while OpenSM is down completes only once the new
// OpenSM has swept. SQLite is enough: drift repair does not depend on the engine.
func TestDriftRepair(t *testing.T) {
	m := startManager(t, storetest.NewDatabase(t, "sqlite"), 2)
	h1, h2 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID
	const netID = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h1", netID, vendorClientID(h1))), nil)
	file := filepath.Join(m.dir, "opensm", "partitions.conf")

	// wantFabric waits until the file is the rendered state and the pkey
	// tables are right: H1 a full member of VLAN 101's partition, and H2 too
	// once it has been added.
	wantFabric := func(what string, h2Member bool) {
		t.Helper()
		want := m.rendered()
		waitFor(t, what+": partitions file restored", func() bool {
			got, err := os.ReadFile(file)
			return err == nil && bytes.Equal(got, want)
		})
		waitFor(t, what+": pkey tables right", func() bool {
			return slices.Contains(m.pkeys(h1), 0x8065) && slices.Contains(m.pkeys(h2), 0x8065) == h2Member
		})
	}

	t.Run("EditedByHand", func(t *testing.T) {
		edited := []byte("Default=0x7fff, ipoib : ALL=full, SELF=full ;\n")
		if err := os.WriteFile(file, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		// Make OpenSM apply the edited file, as a trap or a topology change would.
		if err := syscall.Kill(m.openSMPID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		wantFabric("edited file", false)
		m.wantLogLine(`partitions file drifted`, `the file is not what was last applied`)
	})
	t.Run("Deleted", func(t *testing.T) {
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		wantFabric("deleted file", false)
		m.wantLogLine(`partitions file drifted`, `the file is missing`)
	})
	t.Run("OpenSMKilled", func(t *testing.T) {
		old := m.openSMPID()
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a new OpenSM", func() bool { pid := m.openSMPID0(); return pid != 0 && pid != old })
		wantFabric("OpenSM killed", false)
		m.wantLogLine(`OpenSM was restarted`, `partitions.conf`)
	})
	t.Run("JobWhileOpenSMDown", func(t *testing.T) {
		old := m.openSMPID()
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "OpenSM gone", func() bool { return m.openSMPID0() != old })
		job := m.accept("POST", "/cloudx/Port", portBody("port-h2", netID, vendorClientID(h2)))
		m.waitCompleted(job, func() {
			if pid := m.openSMPID0(); pid == 0 || pid == old {
				t.Fatalf("job Completed while no new OpenSM runs (pid %d, killed %d)", pid, old)
			}
			if got := m.pkeys(h2); !slices.Contains(got, 0x8065) {
				t.Fatalf("job Completed while H2's pkey table is %s, without 0x8065", hex(got))
			}
		})
		wantFabric("job while OpenSM down", true)
	})
}

// rendered is what the recorded state renders to, as --render prints it.
func (m *manager) rendered() []byte {
	m.t.Helper()
	out, err := exec.Command(managerBinary, "--config-file", m.conf, "--render").Output()
	if err != nil {
		m.t.Fatalf("--render: %v", err)
	}
	return out
}

// openSMPID0 is the PID of the manager's OpenSM child, 0 when none runs.
func (m *manager) openSMPID0() int {
	pid := m.proc.Pid()
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			comm, _ := os.ReadFile(filepath.Join("/proc", c, "comm"))
			if strings.TrimSpace(string(comm)) == "opensm" {
				n, _ := strconv.Atoi(c)
				return n
			}
		}
	}
	return 0
}

// openSMPID waits for the manager's OpenSM to run and returns its PID.
func (m *manager) openSMPID() int {
	m.t.Helper()
	var pid int
	waitFor(m.t, "OpenSM running", func() bool { pid = m.openSMPID0(); return pid != 0 })
	return pid
}

// wantLogLine waits for a manager log line at warn level that holds every part.
func (m *manager) wantLogLine(parts ...string) {
	m.t.Helper()
	waitFor(m.t, "log line "+strings.Join(parts, " ... "), func() bool {
		for _, l := range strings.Split(m.log(), "\n") {
			if !strings.Contains(l, `"level":"WARN"`) {
				continue
			}
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				return true
			}
		}
		return false
	})
}

// waitFor polls cond for up to a minute (the deadline only keeps a broken
// manager from hanging the test): waitUntil for a condition with nothing to
// show.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, what, func() (bool, error) { return cond(), nil })
}

// waitUntil polls check for up to a minute, and fails the test with what it
// awaited and what check last saw (testenv.Await): the e2e tests' one wait.
func waitUntil(t testing.TB, what string, check func() (bool, error)) {
	t.Helper()
	testenv.Await(t, what, time.Minute, 50*time.Millisecond, check)
}
