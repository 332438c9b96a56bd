package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// TestSweepLongerThanSweepTimeoutCompletesWithOneSignal: the real OpenSM is
// stopped (SIGSTOP) in the middle of the heavy sweep that applies a change,
// for several sweep_timeouts: the manager follows that sweep rather than
// writing the file and signalling again, and the job completes once OpenSM
// goes on (SIGCONT), after the one SIGHUP of its apply.
func TestSweepLongerThanSweepTimeoutCompletesWithOneSignal(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 16, Switches: 4}, settings{})
	m.confirmSwitches()
	m.stop()
	conf, err := os.ReadFile(m.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.conf, []byte(strings.Replace(string(conf), "sweep_timeout = 20", "sweep_timeout = 1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	m.debug = true // the manager logs each SIGHUP it sends
	m.start()
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)

	pid := m.openSMPID()
	openSMLog := filepath.Join(m.dir, "opensm", "opensm.log")
	var job string
	signalsBefore := 0
	for attempt := 1; ; attempt++ {
		if attempt > 10 {
			t.Fatal("OpenSM's sweep ended before it could be stopped, 10 times")
		}
		from := fileSize(t, openSMLog)
		signalsBefore = strings.Count(m.log(), "SIGHUP sent; waiting for the heavy sweep")
		h := m.fabric.Host(fmt.Sprintf("H%d", attempt))
		job = m.accept("POST", "/cloudx/Port", portBody(fmt.Sprintf("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a%02d", attempt), netID,
			vendorClientID(h.PortGUID)))
		// Stopped as soon as the sweep's start is in the log.
		testenv.Await(t, "a heavy sweep after the change", time.Minute, 200*time.Microsecond, func() (bool, error) {
			return strings.Contains(readFrom(t, openSMLog, from), "INITIATING HEAVY SWEEP"), nil
		})
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		sweep := readFrom(t, openSMLog, from)
		if !strings.Contains(sweep[strings.Index(sweep, "INITIATING HEAVY SWEEP"):], "-> SUBNET UP\n") {
			break // stopped mid-sweep
		}
		// Too late: that sweep ended. Let it go on and try again.
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		m.waitCompleted(job, nil)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	// Two sweep_timeouts pass with OpenSM stopped mid-sweep: the manager
	// warns at each (following the sweep, or applying again).
	timeouts := func() int {
		n := 0
		for _, l := range strings.Split(m.log(), "\n") {
			if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, "sweep_timeout") {
				n++
			}
		}
		return n
	}
	waitFor(t, "two sweep_timeouts with OpenSM stopped", func() bool { return timeouts() >= 2 })
	if j := m.job(job); j.Status != "Running" || !strings.Contains(j.Description, "still running after") {
		t.Errorf("job while OpenSM is stopped: %+v; want Running, saying the sweep is followed", j)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	m.waitCompleted(job, nil)
	if n := strings.Count(m.log(), "SIGHUP sent; waiting for the heavy sweep") - signalsBefore; n != 1 {
		t.Errorf("%d SIGHUPs for the change, want 1", n)
	}
	if strings.Contains(m.log(), "not proven applied within sweep_timeout; applying again") {
		t.Error("the manager applied again while the sweep ran")
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// readFrom returns what the file holds past offset.
func readFrom(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}
