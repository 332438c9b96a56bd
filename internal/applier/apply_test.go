package applier

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// scriptedOpenSM is a fake Supervisor for the apply tests: an OpenSM that
// is always ready, whose Reload (a SIGHUP) logs the heavy sweep the test
// scripts (fakeOpenSM, in fakesm_test.go, drives the term's state machine). The sweep it logs is sweep's; the real
// OpenSM on the simulated fabric is driven by the end-to-end suite.
type scriptedOpenSM struct {
	log   string
	sweep func() string // the log text of the sweep a Reload causes

	mu      sync.Mutex
	reloads int
}

func (f *scriptedOpenSM) Start(int64) error                   { return nil }
func (f *scriptedOpenSM) WaitReady(ctx context.Context) error { return nil }
func (f *scriptedOpenSM) Restarts() int                       { return 0 }

func (f *scriptedOpenSM) Reload(ctx context.Context) error {
	if err := opensmtest.Append(f.log, f.sweep()); err != nil {
		return err
	}
	f.mu.Lock()
	f.reloads++
	f.mu.Unlock()
	return nil
}

func (f *scriptedOpenSM) Reloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloads
}

// logLine is a header line in OpenSM's format.
func logLine(level byte, message string) string {
	return fmt.Sprintf("Nov 29 19:22:53 251392 [8507C6C0] 0x%02x -> %s\n", level, message)
}

func logBox(function, title string) string {
	stars := strings.Repeat("*", 66)
	pad := (66 - len(title) - 2) / 2
	line := strings.Repeat("*", pad) + " " + title + " " + strings.Repeat("*", 66-pad-len(title)-2)
	return logLine(0x04, function+":") + "\n\n" + stars + "\n" + line + "\n" + stars + "\n\n\n"
}

// heavySweep is the log of a heavy sweep that applies the file, with middle
// logged between its start and its end.
func heavySweep(middle string) string {
	return logBox("state_mgr_sweep_hop_0", "INITIATING HEAVY SWEEP") + middle +
		logLine(0x02, "osm_pkey_mgr: PKEY setup completed - STARTING SM LID CONFIG") +
		logLine(0x80, "SUBNET UP")
}

type applyRig struct {
	t      testing.TB
	st     *store.Store
	places *previousRelease // the term's Store
	sm     *scriptedOpenSM
	term   *term
	dump   string
	netID  string
}

// newApplyRig is a term of an applier on a real SQLite store and a fake
// OpenSM, with the switches of the subnet dump confirmed unless unconfirmed.
func newApplyRig(t testing.TB, confirmed bool, sweep func() string) *applyRig {
	return newApplyRigOn(t, config.EngineSQLite, confirmed, sweep)
}

// newApplyRigOn is newApplyRig on engine's store.
func newApplyRigOn(t testing.TB, engine string, confirmed bool, sweep func() string) *applyRig {
	dir := t.TempDir()
	st := storetest.Open(t, engine)
	ctx := t.Context()
	dump := copySubnetDump(t, dir)
	r := &applyRig{t: t, st: st, dump: dump, netID: "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"}
	if confirmed {
		r.confirm()
	}
	r.sm = &scriptedOpenSM{log: filepath.Join(dir, "opensm.log"), sweep: sweep}
	a := &Applier{Store: st, SM: r.sm, Log: slog.New(slog.DiscardHandler), Cfg: Config{
		PartitionsFile:   filepath.Join(dir, "partitions.conf"),
		LogFile:          r.sm.log,
		DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
		FlatPKey:         store.DefaultFlatPKey,
		SweepTimeout:     20 * time.Second,
		CheckInterval:    time.Hour,
		PollInterval:     time.Hour,
		SubnetDump:       dump,
	}}
	r.places = &previousRelease{Store: st, jobs: map[int64]bool{}}
	a.Store = r.places
	r.term = &term{Applier: a, id: 1, applied: -1}
	if _, err := st.NewTerm(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if err := r.term.startLog(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.term.tail.Close() })
	return r
}

// copySubnetDump writes the subnet dump of a five-host, two-switch fabric
// (topology's testdata) into dir, where OpenSM would, and returns its path.
func copySubnetDump(t testing.TB, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "topology", "testdata", "good", "ibsim-5-hosts-2-switches.lst"))
	if err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(dir, "opensm-subnet.lst")
	if err := os.WriteFile(dump, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dump
}

// confirmDumpSwitches confirms the two switches of copySubnetDump's fabric.
func confirmDumpSwitches(t testing.TB, st *store.Store) {
	t.Helper()
	if err := st.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"},
		{GUID: 0x0002c90300f00002, Description: "S2"}}); err != nil {
		t.Fatal(err)
	}
}

func (r *applyRig) confirm() { confirmDumpSwitches(r.t, r.st) }

// network records a VLAN network and returns its job.
func (r *applyRig) network(vlan int64) store.Job {
	r.t.Helper()
	j, err := r.st.RecordNetwork(r.t.Context(), store.NetworkChange{Operation: store.OpCreateNetwork,
		Network: store.NetworkSpec{ID: r.netID, Name: "n", Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &vlan}})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *applyRig) job(id int64) store.Job {
	r.t.Helper()
	j, err := r.st.GetJob(r.t.Context(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// Fail closed at any log size: a sweep that logs more than any one read of
// the log takes (here 5 MiB of VERBOSE lines), with an ERR 0507 at its very
// end, completes no job.
func TestBigSweepWithEnforcementErrorCompletesNothing(t *testing.T) {
	filler := strings.Repeat(logLine(0x04, "osm_pkey_mgr: pkey_mgr_update_port: updating pkey table of node 0x0002c90300000100 port 1 (H1)"),
		5<<20/100)
	err0507 := logLine(0x01, "pkey_mgr_update_peer_port: ERR 0507: Not enough pkey entries (60 <= 60) on switch 0x0002c90300f00001 port 2 (S1). Clearing Enforcement bit")
	r := newApplyRig(t, true, func() string { return heavySweep(filler + err0507) })
	job := r.network(101)

	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if j := r.job(job.ID); j.Status == store.StatusCompleted {
		t.Fatalf("job completed although the sweep's last line cleared an enforcement bit: %+v", j)
	}
	if got := recorded(t, r.st); len(got) != 1 || !strings.HasPrefix(got[0], "0x0002c90300f00001:2") {
		t.Errorf("enforcement errors recorded: %q, want S1 port 2", got)
	}
	r.term.pollGates(t.Context())
	if j := r.job(job.ID); j.Status == store.StatusCompleted || !strings.Contains(j.Description, EnforcementCleared) {
		t.Errorf("after a poll the job is %+v, want it open and saying why", j)
	}
	// The watch, reading the same log later (4 MiB a poll), does not count the
	// line again.
	r.term.pollGates(t.Context())
	if got := recorded(t, r.st); len(got) != 1 || got[0] != "0x0002c90300f00001:2 xI" {
		t.Errorf("enforcement errors after the watch read the log: %q, want S1 port 2 seen once", got)
	}
}

// A gate that reopens needs fresh proof: jobs held by a closed gate complete
// only after a sweep that started after the gate opened, not on the strength
// of the sweep that ran while it was closed.
func TestReopenedGateCompletesAfterANewSweep(t *testing.T) {
	r := newApplyRig(t, false, func() string { return heavySweep("") })
	job := r.network(101)
	ctx := t.Context()
	if res := r.term.apply(ctx); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if j := r.job(job.ID); j.Status == store.StatusCompleted || !strings.Contains(j.Description, NoExpectedSwitches) {
		t.Fatalf("no switches confirmed: job %+v, want it open, saying why", j)
	}
	sweeps := r.sm.Reloads()

	r.confirm()
	r.term.pollGates(ctx)
	if j := r.job(job.ID); j.Status == store.StatusCompleted {
		t.Fatalf("job completed when the gate opened, with no sweep since: %+v", j)
	} else if !strings.Contains(j.Description, "a new sweep must show the change applied") {
		t.Errorf("job's description %q does not say it waits for a new sweep", j.Description)
	}
	if r.term.applied != -1 {
		t.Fatalf("the term does not apply again after the gate opened (applied = %d)", r.term.applied)
	}
	if res := r.term.apply(ctx); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if r.sm.Reloads() != sweeps+1 {
		t.Errorf("%d sweeps after the gate opened, want 1", r.sm.Reloads()-sweeps)
	}
	if j := r.job(job.ID); j.Status != store.StatusCompleted {
		t.Errorf("after a sweep with the gates open the job is %+v, want Completed", j)
	}
}

// sweep_timeout ends the wait for a sweep, as the sample configuration says:
// the jobs keep waiting, their description says why (naming sweep_timeout and
// what was missing), and the state is applied again.
func TestSweepTimeoutKeepsJobsWaitingAndSaysWhy(t *testing.T) {
	r := newApplyRig(t, true, func() string { return "" }) // SIGHUP received, no sweep
	r.term.Cfg.SweepTimeout = 300 * time.Millisecond
	job := r.network(101)
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Errorf("apply: %v, want a retry", res)
	}
	j := r.job(job.ID)
	if j.Status != store.StatusRunning || !strings.Contains(j.Description, "\nWaiting: OpenSM did not show this change applied within sweep_timeout (300ms)") ||
		!strings.Contains(j.Description, "no heavy sweep started") {
		t.Errorf("job after sweep_timeout: %+v; want Running, saying it waits past sweep_timeout and what was missing", j)
	}
	if r.term.applied == 1 {
		t.Errorf("the revision counts as applied after a timeout")
	}
	// A later apply that is proven completes it, and drops the reason.
	r.sm.sweep = func() string { return heavySweep("") }
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if j := r.job(job.ID); j.Status != store.StatusCompleted || strings.Contains(j.Description, "Waiting") {
		t.Errorf("job after a proven apply: %+v; want Completed, without the reason it waited", j)
	}
}

// A heavy sweep longer than sweep_timeout (a large fabric under load, or an
// OpenSM stopped mid-sweep): the apply follows the sweep that started after
// its SIGHUP, saying so in the waiting jobs, and completes them at its end,
// with one SIGHUP: no rewrite and signal at each timeout, each of which would
// queue another sweep behind the running one.
func TestSweepLongerThanSweepTimeoutIsFollowedNotSignalledAgain(t *testing.T) {
	r := newApplyRig(t, true, func() string { return logBox("state_mgr_sweep_hop_0", "INITIATING HEAVY SWEEP") })
	r.term.Cfg.SweepTimeout = 200 * time.Millisecond
	job := r.network(101)
	done := make(chan applyResult, 1)
	go func() { done <- r.term.apply(t.Context()) }()
	// At least one sweep_timeout passes with the sweep running: the job says
	// it is followed.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.job(job.ID).Description, "still running after") {
		select {
		case res := <-done:
			t.Fatalf("apply returned %v while the sweep ran; want it to follow the sweep", res)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %+v never said the sweep is followed", r.job(job.ID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	opensmtest.AppendLog(t, r.sm.log, logLine(0x02, "osm_pkey_mgr: PKEY setup completed - STARTING SM LID CONFIG")+logLine(0x80, "SUBNET UP"))
	if res := <-done; res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if j := r.job(job.ID); j.Status != store.StatusCompleted {
		t.Errorf("job %+v, want Completed", j)
	}
	if n := r.sm.Reloads(); n != 1 {
		t.Errorf("%d SIGHUPs, want 1", n)
	}
}

// The follow is bounded: a sweep that never ends is given up after
// maxSweepFollow sweep_timeouts, and the state is applied again.
func TestSweepThatNeverEndsIsGivenUp(t *testing.T) {
	r := newApplyRig(t, true, func() string { return logBox("state_mgr_sweep_hop_0", "INITIATING HEAVY SWEEP") })
	r.term.Cfg.SweepTimeout = 20 * time.Millisecond
	job := r.network(101)
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Fatalf("apply: %v, want a retry", res)
	}
	j := r.job(job.ID)
	if j.Status != store.StatusRunning || !strings.Contains(j.Description, "a heavy sweep started but did not end within 200ms") {
		t.Errorf("job %+v: want Running, saying the sweep did not end within %d sweep_timeouts", j, maxSweepFollow)
	}
}

// A sweep is not followed while another SM is master (the HA freeze): a
// STANDBY OpenSM's sweep never ends, and an --unfreeze waits for the loop.
// The apply gives up at the first sweep_timeout.
func TestSweepNotFollowedWhileFrozen(t *testing.T) {
	r := newApplyRig(t, true, func() string { return logBox("state_mgr_sweep_hop_0", "INITIATING HEAVY SWEEP") })
	r.term.Cfg.SweepTimeout = 20 * time.Millisecond
	r.term.freeze = newFreezeWatch(nil, "the previous leader")
	r.term.freeze.frozen = "another SM is master"
	job := r.network(101)
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Fatalf("apply: %v, want a retry", res)
	}
	j := r.job(job.ID)
	if strings.Contains(j.Description, "still running after") || !strings.Contains(j.Description, "did not end within 20ms") {
		t.Errorf("job %+v: want the sweep given up at the first sweep_timeout, not followed", j)
	}
}

// A proof broken before the deadline (the log rotated under the follower)
// fails nothing: the jobs wait, saying why, and the state is applied again
// at once.
func TestBrokenProofKeepsJobsWaiting(t *testing.T) {
	var r *applyRig
	r = newApplyRig(t, true, func() string {
		// logrotate's rename, then OpenSM reopening its log (SIGUSR1) and
		// logging there.
		if err := os.Rename(r.sm.log, r.sm.log+".1"); err != nil {
			t.Error(err)
		}
		return logLine(0x02, "after the rotation")
	})
	r.term.Cfg.SweepTimeout = 10 * time.Second
	opensmtest.AppendLog(t, r.sm.log, logLine(0x02, "before the apply"))
	job := r.network(101)
	if res := r.term.apply(t.Context()); res != applyRetryAtOnce {
		t.Errorf("apply: %v, want a retry at once", res)
	}
	j := r.job(job.ID)
	if j.Status != store.StatusRunning || !strings.Contains(j.Description, "\nWaiting: proof broken") {
		t.Errorf("job after a broken proof: %+v; want Running, saying why it waits", j)
	}
}

// port records a port of the rig's network holding guid and returns its job.
func (r *applyRig) port(id string, guid uint64) store.Job {
	r.t.Helper()
	g := fabric.GUID(guid)
	j, err := r.st.RecordPort(r.t.Context(), store.PortChange{Operation: store.OpAddPort,
		Port: store.Port{ID: id, NetworkID: r.netID, GUID: &g, Host: "h"}})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// applied runs one apply of the rig's term and stops the test unless it is
// done; what names the apply in the message.
func (r *applyRig) applied(what string) {
	r.t.Helper()
	if res := r.term.apply(r.t.Context()); res != applyDone {
		r.t.Fatalf("%s: %v, want done", what, res)
	}
}

// h1H2Applied records the rig's network on VLAN 101 with H1's and H2's ports
// in it and applies them; it returns the three jobs.
func (r *applyRig) h1H2Applied(what string) (nw, h1, h2 store.Job) {
	r.t.Helper()
	nw = r.network(101)
	h1 = r.port("port-h1", uint64(hostPort(1)))
	h2 = r.port("port-h2", uint64(hostPort(2)))
	r.applied(what)
	return nw, h1, h2
}

// jobWant is a job and the status a test wants of it; name says whose job.
type jobWant struct {
	name string
	job  store.Job
	want string
}

// Failures stay local: an ERR 0512 that names H1's port fails H1's job, and
// the job of the network whose partition H1 is a member of (OpenSM did not
// give it its pkey); H2's job, in the same sweep, completes. A line that names
// no port cannot be attributed, and fails every job of the sweep.
func TestPKeyErrorsFailOnlyTheJobsTheyName(t *testing.T) {
	const h1Full = "pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8065 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)"
	const s1Port0 = "pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x0300 because Pkey table is full for node 0x0002c90300f00001 port 0 (S1)"
	const unplaced = "osm_pkey_mgr_process: ERR 0510: osm_prtn_make_partitions() failed"
	tests := []struct {
		name       string
		lines      []string
		h1, h2, nw string // the jobs' statuses after the apply
	}{
		// The network, created before its ports joined, promised no place.
		{"H1's table full", []string{h1Full, s1Port0}, store.StatusFailed, store.StatusCompleted, store.StatusCompleted},
		{"unattributable", []string{h1Full, unplaced}, store.StatusFailed, store.StatusFailed, store.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var middle string
			for _, l := range tt.lines {
				middle += logLine(0x01, l)
			}
			r := newApplyRig(t, true, func() string { return heavySweep(middle) })
			nw, h1, h2 := r.h1H2Applied("apply")
			for _, c := range []jobWant{{"H1's", h1, tt.h1}, {"H2's", h2, tt.h2}, {"the network's", nw, tt.nw}} {
				j := r.job(c.job.ID)
				if j.Status != c.want {
					t.Errorf("%s job: %s (%s), want %s", c.name, j.Status, j.Error, c.want)
				}
				if j.Status == store.StatusFailed && !strings.Contains(j.Error, "ERR 0512") {
					t.Errorf("%s job failed without saying why: %q", c.name, j.Error)
				}
			}
		})
	}
}

// A Kubernetes pkey's job fails when a pkey error names one of its pkey's
// ports, and completes otherwise, as a port's does.
func TestPKeyErrorsFailTheKubernetesJobsTheyName(t *testing.T) {
	const h1Full = "pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x9005 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)"
	r := newApplyRig(t, true, func() string { return heavySweep(logLine(0x01, h1Full)) })
	add := r.kubeAdd
	nw := r.network(101)
	h3 := r.port("port-h3", 0x0002c90300000301)
	onH1 := add(0x1005, 0x0002c90300000101)
	onH2 := add(0x1006, 0x0002c90300000201)
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	for _, c := range []struct {
		name string
		job  store.Job
		want string
	}{{"0x1005's (H1)", onH1, store.StatusFailed}, {"0x1006's (H2)", onH2, store.StatusCompleted},
		{"H3's port", h3, store.StatusCompleted}, {"the network's", nw, store.StatusCompleted}} {
		j := r.job(c.job.ID)
		if j.Status != c.want || (j.Status == store.StatusFailed && !strings.Contains(j.Error, "ERR 0512")) {
			t.Errorf("%s job: %s (%s), want %s", c.name, j.Status, j.Error, c.want)
		}
	}
}

// A network-level change completes only once OpenSM programmed its partition
// on every member: a VLAN move (the members' pkey changes), a move to the
// flat partition fail when a pkey error names one of their members for
// the partition's pkey, saying which port and pkey; a network none of whose
// members a line names completes in the same sweep.
func TestPKeyErrorsFailNetworkJobs(t *testing.T) {
	full := func(pkey uint16) string { // H1's table full for pkey
		return logLine(0x01, fmt.Sprintf("pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x%04x because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x8000|pkey))
	}
	const other = "6c1e2a4f-0b7d-4e9a-8f3c-2d5b7a9e1c04" // a network H1 is no member of
	vlan := func(r *applyRig, id string, seg int64) store.Job {
		j, err := r.st.RecordNetwork(t.Context(), store.NetworkChange{Operation: store.OpUpdateNetwork,
			Network: store.NetworkSpec{ID: id, Name: "n", Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &seg}})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	tests := []struct {
		name string
		// change records the network-level change after H1 and H2 joined the
		// rig's network on VLAN 101 (0x0065) and that was applied cleanly;
		// sweep is the log of the sweep that applies it.
		change func(r *applyRig) store.Job
		sweep  string
		pkey   string // the partition's pkey, which the reason names
	}{
		{"VLAN move", func(r *applyRig) store.Job { return vlan(r, r.netID, 102) }, full(0x0066), "0x0066"},
		{"moved to the flat partition", func(r *applyRig) store.Job {
			j, err := r.st.RecordNetwork(t.Context(), store.NetworkChange{Operation: store.OpCreateNetwork,
				Network: store.NetworkSpec{ID: r.netID, Name: "n", Type: store.TypeFlat, PhysicalNetwork: "ib"}})
			if err != nil {
				t.Fatal(err)
			}
			return j
		}, full(uint16(store.DefaultFlatPKey)), store.DefaultFlatPKey.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sweep := ""
			r := newApplyRig(t, true, func() string { return heavySweep(sweep) })
			r.network(101)
			r.port("port-h1", 0x0002c90300000101)
			r.port("port-h2", 0x0002c90300000201)
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("first apply: %v, want done", res)
			}
			job := tt.change(r)
			unrelated := vlan(r, other, 103)
			sweep = logLine(0x01, "pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8300 because Pkey table is full for node 0x0002c90300f00001 port 0 (S1)") + tt.sweep
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("apply: %v, want done", res)
			}
			j := r.job(job.ID)
			if j.Status != store.StatusFailed || !strings.Contains(j.Error, "ERR 0512") ||
				!strings.Contains(j.Error, "node 0x0002c90300000100 port 1") ||
				!strings.Contains(j.Error, "host port 0x0002c90300000101, pkey "+tt.pkey) {
				t.Errorf("the network's job: %s (%s); want Failed, naming H1's port, pkey %s and OpenSM's line", j.Status, j.Error, tt.pkey)
			}
			if j := r.job(unrelated.ID); j.Status != store.StatusCompleted {
				t.Errorf("the job of a network without H1: %s (%s); want Completed", j.Status, j.Error)
			}
		})
	}
}

// Attribution is by port and pkey: H1's table full for one pkey (the line
// comes back at every sweep while it lasts) fails the changes to that pkey's
// partition, which has H1 as a member, and not the later changes to the
// other pkeys H1 is in, nor a change of H1's own to another pkey in the same
// sweep. A line that names a port but no pkey (a table block not sent) fails
// the changes of that port's memberships in the sweep, to any pkey (H4 to
// 0x1008), and no other, even when the port's node description reads like a
// line that names another port's pkey.
func TestPKeyErrorsAttributedByPortAndPKey(t *testing.T) {
	full := func(node uint64, pkey uint16) string {
		return fmt.Sprintf("pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x%04x because Pkey table is full for node 0x%016x port 1 (H)", pkey, node)
	}
	const h4Block = "pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300000400 port 1 (H4)"
	const h4Disguised = "pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300000400 port 1 (ERR 0512: Failed to set PKey 0x9006 because)"
	const (
		h1, h1Node = fabric.GUID(0x0002c90300000101), 0x0002c90300000100
		h2         = fabric.GUID(0x0002c90300000201)
		h3, h3Node = fabric.GUID(0x0002c90300000301), 0x0002c90300000300
		h4         = fabric.GUID(0x0002c90300000401)
	)
	F, C := store.StatusFailed, store.StatusCompleted
	tests := []struct {
		name string
		line string
		// the statuses of the jobs that add H1 to 0x1006, H2 to 0x1005 and
		// H2 to 0x1007 (Kubernetes), H3's port to the network (0x0065), and
		// H4 to 0x1008
		h1To1006, h2To1005, h2To1007, h3Port, h4To1008 string
	}{
		{"H1 full for 0x1005", full(h1Node, 0x9005), C, C, C, C, C}, // H2's change promised nothing of H1
		{"H1 full for 0x1006", full(h1Node, 0x9006), F, C, C, C, C},
		{"H1 full for the default partition", full(h1Node, 0xffff), C, C, C, C, C},
		{"H3 full for the network's pkey", full(h3Node, 0x8065), C, C, C, F, C},
		{"H3 full for 0x1005", full(h3Node, 0x9005), C, C, C, C, C},
		{"H4's table block not sent", h4Block, C, C, C, C, F},
		{"H4's node description names a pkey", h4Disguised, C, C, C, C, F},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sweep := ""
			r := newApplyRig(t, true, func() string { return heavySweep(sweep) })
			add := r.kubeAdd
			// Applied before the line appears: H1 in 0x1005 and 0x1007, the
			// network.
			r.network(101)
			add(0x1005, h1)
			add(0x1007, h1)
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("first apply: %v, want done", res)
			}
			jobs := []struct {
				name string
				job  store.Job
				want string
			}{
				{"H1 to 0x1006", add(0x1006, h1), tt.h1To1006},
				{"H2 to 0x1005", add(0x1005, h2), tt.h2To1005},
				{"H2 to 0x1007", add(0x1007, h2), tt.h2To1007},
				{"H3's port", r.port("port-h3", uint64(h3)), tt.h3Port},
				{"H4 to 0x1008", add(0x1008, h4), tt.h4To1008},
			}
			sweep = logLine(0x01, tt.line)
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("apply: %v, want done", res)
			}
			for _, c := range jobs {
				j := r.job(c.job.ID)
				if j.Status != c.want {
					t.Errorf("the job of %s: %s (%s), want %s", c.name, j.Status, j.Error, c.want)
				}
				if j.Status == store.StatusFailed && !strings.Contains(j.Error, tt.line) {
					t.Errorf("the job of %s failed without OpenSM's line: %q", c.name, j.Error)
				}
			}
		})
	}
}

// The windows of pkey error attribution.
//   - a removal: the removal of H1's port from pkey 0x0065 completes beside
//     H1's error for another pkey, and fails on a line that names H1 and
//     0x0065, or H1 and no pkey (its table block not sent: the pkey it should
//     lose may still be there), though the state the sweep applied no longer
//     shows the port;
//   - a line of an earlier sweep, before the apply's position, fails nothing;
//   - the state moves on during the sweep (the network moves to another VLAN,
//     H1's port leaves): the jobs are judged on the state the sweep applied.
func TestPKeyErrorWindows(t *testing.T) {
	full := func(pkey uint16) string {
		return logLine(0x01, fmt.Sprintf("pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x%04x because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x8000|pkey))
	}
	// setup is the rig with H1's and H2's ports in the network on VLAN 101,
	// applied cleanly; the sweeps after it log what *sweep returns.
	setup := func(t *testing.T, sweep *func() string) *applyRig {
		r := newApplyRig(t, true, func() string { return (*sweep)() })
		*sweep = func() string { return heavySweep("") }
		r.h1H2Applied("first apply")
		return r
	}

	t.Run("removal", func(t *testing.T) {
		for _, c := range []struct {
			name, line, want string
		}{
			{"another pkey's error", full(0x0066), store.StatusCompleted},
			{"the error of the pkey it left", full(0x0065), store.StatusFailed},
			{"a table block not sent", blockNotSent(1), store.StatusFailed},
		} {
			t.Run(c.name, func(t *testing.T) {
				var sweep func() string
				r := setup(t, &sweep)
				job := r.removePort("port-h1")
				sweep = func() string { return heavySweep(c.line) }
				r.applied("apply")
				wantStatus(t, r, "the removal of H1's port", job, c.want)
			})
		}
	})

	t.Run("a line of an earlier sweep", func(t *testing.T) {
		var sweep func() string
		r := setup(t, &sweep)
		opensmtest.AppendLog(t, r.sm.log, heavySweep(full(0x0066))) // before the position
		job := r.vlan(r.netID, 102)
		r.applied("apply")
		wantStatus(t, r, "the VLAN move", job, store.StatusCompleted)
	})

	t.Run("the state moves on during the sweep", func(t *testing.T) {
		var sweep func() string
		r := setup(t, &sweep)
		move := r.vlan(r.netID, 102)
		var later []store.Job
		sweep = func() string {
			// Recorded after the apply read the state, before OpenSM's
			// sweep ends: the next apply's.
			later = append(later, r.vlan(r.netID, 103), r.removePort("port-h1"))
			return heavySweep(full(0x0066))
		}
		r.applied("apply")
		wantStatus(t, r, "the move to 102, which the sweep applied", move, store.StatusFailed)
		for _, j := range later {
			if got := r.job(j.ID); got.Status == store.StatusFailed || got.Status == store.StatusCompleted {
				t.Errorf("a change after the sweep's state finished with it: %+v", got)
			}
		}
	})
}

// A database write that fails while the jobs an error names are failed one by
// one completes nothing; the retry fails the rest, and completes the others.
func TestPKeyErrorsFailJobRefused(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep(blockNotSent(1)) })
	faulty := &faultyStore{Store: r.places, fails: map[string][]bool{"FailJob": {false, true}}}
	r.term.Store = faulty
	nw := r.network(101)
	h1 := r.port("port-h1", 0x0002c90300000101)
	h2 := r.port("port-h2", 0x0002c90300000201)
	// The network's VLAN move: H1's and H2's places, in the old pkey and
	// the new.
	k1 := r.vlan(r.netID, 102)
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Fatalf("apply with a refused write: %v, want a retry", res)
	}
	failed := 0
	for _, id := range []int64{nw.ID, h1.ID, h2.ID, k1.ID} {
		switch j := r.job(id); j.Status {
		case store.StatusCompleted:
			t.Errorf("job %d completed in an apply that could not fail every job its errors name", id)
		case store.StatusFailed:
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d jobs failed before the refused write, want 1", failed)
	}
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	for _, c := range []struct {
		job  store.Job
		want string
	}{{nw, store.StatusCompleted}, {h1, store.StatusFailed}, {k1, store.StatusFailed}, {h2, store.StatusCompleted}} {
		if j := r.job(c.job.ID); j.Status != c.want {
			t.Errorf("job %d after the retry: %s (%s), want %s", c.job.ID, j.Status, j.Error, c.want)
		}
	}
}
