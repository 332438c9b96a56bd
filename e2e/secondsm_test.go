package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// A second subnet manager on the fabric: another real OpenSM, on another
// SM HCA, with partitions of its own.

// foreignSM is an OpenSM the manager does not run.
type foreignSM struct {
	guid fabric.GUID
	log  string
	cmd  *exec.Cmd
}

// startForeignSM starts a real OpenSM on the k-th SM HCA of f with priority
// and a partitions file of its own (only the default partition), in a
// directory of its own; conf are more lines of its opensm.conf.
func startForeignSM(t *testing.T, f *fabricsim.Fabric, k, priority int, conf ...string) *foreignSM {
	t.Helper()
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	env, guid := f.SMEnv(k)
	dir := t.TempDir()
	for i, line := range env {
		if name, _, _ := strings.Cut(line, "="); name == "OSM_CACHE_DIR" || name == "OSM_TMP_DIR" {
			env[i] = name + "=" + dir
		}
	}
	partitions, confFile := filepath.Join(dir, "partitions.conf"), filepath.Join(dir, "opensm.conf")
	for path, text := range map[string]string{
		partitions: "Default=0x7fff,ipoib : ALL=limited, SELF=full ;\n",
		confFile: fmt.Sprintf("log_flags 0x03\nforce_log_flush TRUE\nsweep_interval 1\nsm_priority %d\n", priority) +
			strings.Join(append(conf, ""), "\n"),
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sm := &foreignSM{guid: guid, log: filepath.Join(dir, "opensm.log")}
	sm.cmd = exec.Command(opensm, "-F", confFile, "-g", guid.String(), "-P", partitions, "-f", sm.log, "-d", "2",
		"--dump_files_dir", dir)
	sm.cmd.Dir = dir
	sm.cmd.Env = append(os.Environ(), env...)
	if err := sm.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sm.stop)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(sm.log)
			t.Logf("the second OpenSM's log:\n%s", log)
		}
	})
	return sm
}

func (sm *foreignSM) stop() {
	if sm.cmd.ProcessState == nil {
		sm.cmd.Process.Kill()
		sm.cmd.Wait()
	}
}

func (sm *foreignSM) says(what string) func() bool {
	return func() bool {
		log, _ := os.ReadFile(sm.log)
		return strings.Contains(string(log), what)
	}
}

// TestSecondSubnetManagerHoldsJobs: a second OpenSM of a higher priority
// takes the subnet over and programs its own partitions; the manager names it
// and completes nothing; once it is stopped and the manager's OpenSM is
// master again, the recorded state is applied again and the job completes,
// its pkey back in the port's table.
func TestSecondSubnetManagerHoldsJobs(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 2, SMs: 2}, settings{})
	m.confirmSwitches()
	h1, h2 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("5d2e8f1a-3c4b-4a6d-8e9f-0a1b2c3d4e5f", netID, vendorClientID(h2))), nil)

	foreign := startForeignSM(t, m.fabric, 2, 15)
	waitFor(t, "the second OpenSM to become master", foreign.says("Entering MASTER state"))
	// It programs its own partitions: H2 loses the tenant's pkey.
	waitFor(t, "the second OpenSM to take H2 out of the tenant's partition", func() bool {
		return !slices.Contains(m.pkeys(h2), 0x8065)
	})
	// Detected within a check interval, with no job to hold.
	waitFor(t, "--status to name the second SM", func() bool {
		out, _ := m.tryOperator("--status") // exit status 3: jobs do not complete
		return strings.Contains(out, foreign.guid.String())
	})
	job := m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1)))
	j := m.waitDescription(job, "Second subnet manager: port "+foreign.guid.String()+" (priority 15, MASTER)")
	m.waitStatusAgrees(job)
	if j.Status != "Running" {
		t.Errorf("job %s is %s while the second SM is master; want Running", job, j.Status)
	}
	var s struct {
		NotCompleting []string `json:"not_completing"`
	}
	out, _ := m.tryOperator("--status", "--json")
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(s.NotCompleting, func(r string) bool { return strings.Contains(r, foreign.guid.String()) }) {
		t.Errorf("--status --json not_completing = %q; want the second SM's port %s", s.NotCompleting, foreign.guid)
	}
	if log := m.log(); !strings.Contains(log, "second subnet manager") || !strings.Contains(log, foreign.guid.String()) {
		t.Errorf("the manager's log does not name the second SM %s", foreign.guid)
	}

	foreign.stop()
	m.waitCompleted(job, nil)
	for _, port := range []fabric.GUID{h1, h2} {
		if got := m.pkeys(port); !slices.Contains(got, 0x8065) {
			t.Errorf("port %s's table is %s after the job completed; want the tenant's pkey 0x8065", port, hex(got))
		}
	}
	if out, _ := m.tryOperator("--status"); strings.Contains(out, foreign.guid.String()) {
		t.Errorf("--status still names the stopped SM %s:\n%s", foreign.guid, out)
	}
}

// TestSecondSMVerdictSurvivesManagerRestart: the second SM's verdict lives in
// the database. A manager restarted while a second OpenSM of a higher priority
// is master starts from the recorded verdict (it says so, and a job posted
// then waits naming the SM) rather than from nothing; once the SM is stopped,
// the job completes only after the manager restarted its OpenSM, and the
// record is cleared.
func TestSecondSMVerdictSurvivesManagerRestart(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 2, SMs: 2}, settings{})
	m.confirmSwitches()
	h1 := m.fabric.Host("H1").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)

	foreign := startForeignSM(t, m.fabric, 2, 15)
	waitFor(t, "the second OpenSM to become master", foreign.says("Entering MASTER state"))
	waitFor(t, "--status to name the second SM", func() bool {
		out, _ := m.tryOperator("--status")
		return strings.Contains(out, "Second subnet manager: port "+foreign.guid.String())
	})

	m.stop()
	m.start()
	waitFor(t, "the restarted manager to restore the recorded second SM", func() bool {
		return strings.Contains(m.log(), "second subnet manager recorded by a previous term")
	})
	job := m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1)))
	m.waitDescription(job, "Second subnet manager: port "+foreign.guid.String())

	foreign.stop()
	var atCompletion string
	m.waitCompleted(job, func() { atCompletion = m.log() })
	restarted := strings.Index(atCompletion, "second subnet manager gone: this manager's OpenSM is master again; restarting it")
	if restarted < 0 {
		t.Fatalf("job completed before the manager restarted its OpenSM for the second SM gone")
	}
	if !slices.ContainsFunc(strings.Split(atCompletion[restarted:], "\n"), func(l string) bool {
		return strings.Contains(l, `"partitions applied"`) && strings.Contains(l, `"jobs_completed":1`)
	}) {
		t.Errorf("no sweep after the restart completed the job")
	}
	if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
		t.Errorf("port %s's table is %s after the job completed; want the tenant's pkey 0x8065", h1, hex(got))
	}
	if out, _ := m.tryOperator("--status"); strings.Contains(out, foreign.guid.String()) {
		t.Errorf("--status still names the stopped SM %s:\n%s", foreign.guid, out)
	}
}

// TestSecondSMGoneBeforeFinishCompletesAfterTheRestart opens the window
// where the look before a sweep completes jobs (finish's) is the one that
// sees a second SM gone: the manager restarts its OpenSM then, and the jobs
// of that sweep must complete only on a sweep of the restarted OpenSM, not
// on the one from before, which another SM's tables may have outlived.
//
// The apply must be under way while a second SM is master, and its sweep
// end right after that SM goes: the loop applies nothing while a second SM
// is known, and the simulated fabric stops for every SM while one of them is
// stopped (SIGSTOP), so neither can be used. H1's P_KeyTable MADs are
// dropped before its port is sent: the manager's OpenSM, master, sweeps
// again and again with errors while the apply follows. A second OpenSM of a
// higher priority takes the subnet over (the manager's goes STANDBY: the
// apply signals it again and follows on, sweep_timeout 60 s), and the
// manager's periodic look names it in the waiting job. Right after that look
// H1 is healed and the second SM stopped: the manager's OpenSM takes the
// subnet back within about 4 s (sminfo_polling_timeout 1 s, 2 retries) with
// a heavy sweep that ends cleanly, and finish looks before the next periodic
// look (check_interval 15 s). The job must complete after a SIGHUP sent
// after the restart, on the restarted OpenSM's sweep.
func TestSecondSMGoneBeforeFinishCompletesAfterTheRestart(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 2, SMs: 2},
		settings{OpenSMConf: []string{"sminfo_polling_timeout = 1000", "polling_retry_number = 2"}})
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(m.dir, "opensm", "opensm.log"))
			t.Logf("the manager's OpenSM's log:\n%s", log)
		}
	})
	m.confirmSwitches()
	m.stop()
	conf, err := os.ReadFile(m.conf)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(conf), "sweep_timeout = 20", "sweep_timeout = 60", 1)
	text = strings.Replace(text, "check_interval = 2", "check_interval = 15", 1)
	if err := os.WriteFile(m.conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	m.debug = true // the manager logs each SIGHUP it sends and each sweep's end
	m.start()
	h1 := m.fabric.Host("H1").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)

	if _, err := m.fabric.Sim(t.Context(), `Error "H1"[1] 100 22`); err != nil {
		t.Fatal(err)
	}
	foreignHCA := fabricsim.SMName(2)
	if err := m.fabric.Unlink(t.Context(), foreignHCA); err != nil {
		t.Fatal(err)
	}
	from := len(m.log())
	job := m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1)))
	waitFor(t, "the manager to signal its OpenSM", func() bool {
		return strings.Contains(m.log()[from:], "SIGHUP sent; waiting for the heavy sweep")
	})
	// Its HCA is cabled once it has bound its port: the simulator hands a
	// MAD for a port to the process attached to it, and neither answers nor
	// times out one that arrives after that OpenSM attached and before it
	// registered its agents; a sweep of the manager's OpenSM that met it
	// half started would wait on that MAD for half a minute.
	foreign := startForeignSM(t, m.fabric, 2, 15)
	waitFor(t, "the second OpenSM to find its port down", foreign.says("SM port is down"))
	if err := m.fabric.Relink(t.Context(), foreignHCA); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second OpenSM to become master", foreign.says("Entering MASTER state"))
	m.waitDescription(job, "Second subnet manager: port "+foreign.guid.String())
	if j := m.job(job); j.Status != "Running" {
		t.Fatalf("job while the second SM is master: %+v; want Running", j)
	}
	heal(t, m, "H1")
	foreign.stop()

	var atCompletion string
	m.waitCompleted(job, func() { atCompletion = m.log()[from:] })
	restarted := strings.Index(atCompletion, "second subnet manager gone: this manager's OpenSM is master again; restarting it")
	if restarted < 0 {
		t.Fatalf("job completed, and the manager never restarted its OpenSM for the second SM gone:\n%s", atCompletion)
	}
	// The window: a sweep of the job's apply ended cleanly, and finish
	// looked, before the restart (not a periodic look first).
	if !slices.ContainsFunc(strings.Split(atCompletion[:restarted], "\n"), func(l string) bool {
		return strings.Contains(l, `"msg":"heavy sweep ended"`) && strings.Contains(l, `"outcome":"applied"`)
	}) {
		t.Fatalf("the restart came before the apply's sweep ended cleanly (a periodic look saw the SM gone first): "+
			"the window is not opened:\n%s", atCompletion)
	}
	if !strings.Contains(atCompletion[restarted:], "SIGHUP sent; waiting for the heavy sweep") {
		t.Errorf("the job completed on the sweep from before the restart: no SIGHUP to the restarted OpenSM "+
			"before its completion:\n%s", atCompletion[restarted:])
	}
	if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
		t.Errorf("port %s's table is %s after the job completed; want the tenant's pkey 0x8065", h1, hex(got))
	}
}

// TestSecondSMStartedSinceTheLastLook: a tenant's stock OpenSM (another
// SM_Key, priority 0: this OpenSM stays master and sweeps beside it) starts
// and programs its own partitions between two of the manager's full looks
// (check_interval is ten minutes here: none runs during the test). The look
// before the next change's job completes is the short one unless OpenSM's
// sweep logged the other SM (it does, at every heavy sweep while that SM
// runs); either way the job waits, naming the second SM. (With priority 15
// this OpenSM may be made to stop sweeping, and nothing completes at all.)
func TestSecondSMStartedSinceTheLastLook(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 2, SMs: 2}, settings{
		BeforeStart: func(m *manager) {
			conf, err := os.ReadFile(m.conf)
			if err != nil {
				t.Fatal(err)
			}
			m.writeConf(strings.Replace(string(conf), "check_interval = 2\n", "check_interval = 600\n", 1))
		}})
	m.confirmSwitches()
	h1, h2 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("5d2e8f1a-3c4b-4a6d-8e9f-0a1b2c3d4e5f", netID, vendorClientID(h2))), nil)

	foreign := startForeignSM(t, m.fabric, 2, 0)
	waitFor(t, "the second OpenSM to become master", foreign.says("Entering MASTER state"))
	waitFor(t, "the second OpenSM to take H2 out of the tenant's partition", func() bool {
		return !slices.Contains(m.pkeys(h2), 0x8065)
	})
	job := m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1)))
	m.waitDescription(job, "Second subnet manager: port "+foreign.guid.String()+" (priority 0, MASTER)")
}

// TestSMAppearingAfterTheLookHoldsTheJob: a tenant's stock OpenSM starts
// after finish's second-SM look read the ports and before the sweep's jobs
// complete. That window is a few milliseconds wide; the manager's test hook
// (AFM_TEST_HOOK_PAUSE_AFTER_SM_LOOK) holds finish in it while the tenant's
// OpenSM starts and the manager's OpenSM logs it (the trap 144 of its port,
// or the other SM_Key its heavy sweep met). No look of that finish saw the
// SM; the entry, read inside the jobs' transaction, holds the job. The
// periodic look is ten minutes away: none runs during the test.
func TestSMAppearingAfterTheLookHoldsTheJob(t *testing.T) {
	hook := t.TempDir()
	t.Setenv("AFM_TEST_HOOK_PAUSE_AFTER_SM_LOOK", hook) // the manager inherits the environment
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 2, SMs: 2}, settings{
		BeforeStart: func(m *manager) {
			conf, err := os.ReadFile(m.conf)
			if err != nil {
				t.Fatal(err)
			}
			m.writeConf(strings.Replace(string(conf), "check_interval = 2\n", "check_interval = 600\n", 1))
		}})
	m.confirmSwitches()
	h1 := m.fabric.Host("H1").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)

	pause, paused := filepath.Join(hook, "pause"), filepath.Join(hook, "paused")
	if err := os.WriteFile(pause, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(pause)
	job := m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1)))
	var revision string
	waitFor(t, "finish to pause after its look", func() bool {
		b, err := os.ReadFile(paused)
		revision = string(b)
		return err == nil && revision != ""
	})
	openSMLog := filepath.Join(m.dir, "opensm", "opensm.log")
	before, err := os.ReadFile(openSMLog)
	if err != nil {
		t.Fatal(err)
	}
	foreign := startForeignSM(t, m.fabric, 2, 0)
	waitFor(t, "the manager's OpenSM to log the tenant's SM", func() bool {
		log, _ := os.ReadFile(openSMLog)
		since := string(log[min(len(before), len(log)):])
		return strings.Contains(since, " num:144 ") || strings.Contains(since, "Found remote SM")
	})
	if j := m.job(job); j.Status == "Completed" {
		t.Fatalf("job completed while finish was paused: %+v", j)
	}
	from := len(m.log())
	if err := os.Remove(pause); err != nil {
		t.Fatal(err)
	}
	held := func(l string) bool {
		return strings.Contains(l, `"msg":"jobs wait for the gates"`) && strings.Contains(l, `"revision":`+revision+`,`) &&
			strings.Contains(l, "OpenSM logged another subnet manager after the look")
	}
	waitFor(t, "the paused sweep's jobs held for the SM logged after the look", func() bool {
		if j := m.job(job); j.Status == "Completed" {
			t.Fatalf("job completed on the sweep whose look came before the tenant's SM: %+v\n%s", j, m.log()[from:])
		}
		return slices.ContainsFunc(strings.Split(m.log()[from:], "\n"), held)
	})
	// What holds it next is the next finish's (the other SM rewrote H1's
	// table: the read-back waits for it); it is not completed.
	if j := m.job(job); j.Status != "Running" {
		t.Fatalf("job after the sweep held for the SM logged after the look: %+v; want Running", j)
	}
	foreign.stop()
}
