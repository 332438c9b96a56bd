package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// The term's state machine, driven by a fake OpenSM (fakesm_test.go) on a real
// SQLite store: terms that follow each other, driver errors, retries and a
// term that ends mid-apply.

type leadRig struct {
	t    *testing.T
	st   *store.Store
	sm   *fakeOpenSM
	app  *Applier
	logs *testenv.SyncBuffer
}

func newLeadRig(t *testing.T) *leadRig {
	return newLeadRigOn(t, storetest.NewDatabase(t, config.EngineSQLite))
}

// newLeadRigOn is newLeadRig on a SQLite database of the caller's.
func newLeadRigOn(t *testing.T, db storetest.Database) *leadRig {
	st := storetest.OpenDatabase(t, db).WithRules(store.Rules{PhysicalNetworks: []string{"ibnet"},
		FlatPKey: store.DefaultFlatPKey})
	dir := t.TempDir()
	dumpFile := copySubnetDump(t, dir)
	confirmDumpSwitches(t, st)
	sm := newFakeOpenSM(t, dir)
	logs := &testenv.SyncBuffer{}
	app := &Applier{Store: st, SM: sm, Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Cfg: Config{
			PartitionsFile:   sm.pFile,
			LogFile:          sm.logFile,
			DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
			FlatPKey:         store.DefaultFlatPKey,
			SweepTimeout:     2 * time.Second,
			CheckInterval:    100 * time.Millisecond,
			PollInterval:     20 * time.Millisecond,
			SubnetDump:       dumpFile,
		}}
	return &leadRig{t: t, st: st, sm: sm, app: app, logs: logs}
}

// lead runs a new term until the returned function ends it, which returns
// what Lead returned.
func (r *leadRig) lead() (term int64, end func() error) {
	r.t.Helper()
	term, err := r.st.NewTerm(r.t.Context(), "test")
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.app.Lead(ctx, term) }()
	var once sync.Once
	var leadErr error
	end = func() error {
		once.Do(func() {
			cancel()
			select {
			case leadErr = <-done:
			case <-time.After(10 * time.Second):
				leadErr = errors.New("Lead did not return within 10 s of its term's end")
			}
		})
		return leadErr
	}
	r.t.Cleanup(func() { _ = end() })
	return term, end
}

func (r *leadRig) network(id string, vlan int64) store.Job {
	r.t.Helper()
	j, err := r.st.RecordNetwork(r.t.Context(), store.NetworkChange{Network: store.NetworkSpec{ID: id, Name: "net",
		Type: "vlan", PhysicalNetwork: "ibnet", SegmentationID: &vlan}, Operation: store.OpCreateNetwork,
		CreatedBy: "test", Request: `{}`})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *leadRig) port(id, network string, g fabric.GUID) store.Job {
	r.t.Helper()
	j, err := r.st.RecordPort(r.t.Context(), store.PortChange{Port: store.Port{ID: id, NetworkID: network, GUID: &g, Host: "h"},
		Operation: store.OpAddPort, CreatedBy: "test", Request: `{}`})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// wait polls the job until it has status; the deadline only keeps a broken
// loop from hanging the test.
func (r *leadRig) wait(j store.Job, status string) store.Job {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := r.st.GetJob(r.t.Context(), j.ID)
		if err != nil {
			r.t.Fatal(err)
		}
		if got.Status == status {
			return got
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("job %d is %s (%s), want %s\nlog:\n%s", j.ID, got.Status, got.Description, status, r.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *leadRig) job(j store.Job) store.Job {
	r.t.Helper()
	got, err := r.st.GetJob(r.t.Context(), j.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}

const (
	netA  = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	netB  = "0c4e2a1d-1111-4a7b-8c9d-0e1f2a3b4c5d"
	guidA = fabric.GUID(0x0002c90300000101)
)

// A second term of the same process finds OpenSM running (never stopped by
// the first), starts with a full apply without a new change, and completes
// what arrives after.
func TestLeadSecondTermKeepsOpenSM(t *testing.T) {
	r := newLeadRig(t)
	_, end := r.lead()
	r.wait(r.network(netA, 101), store.StatusCompleted)
	if err := end(); err != nil {
		t.Fatalf("first term: %v", err)
	}
	launches, stops, reloads := r.sm.state()
	if launches != 1 || stops != 0 {
		t.Fatalf("after the first term: %d OpenSMs started, %d stops; want 1 and 0", launches, stops)
	}

	_, end = r.lead()
	// The full apply: a SIGHUP with the same state, before any new change.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, now := r.sm.state()
		if len(now) > len(reloads) {
			if now[len(now)-1] != reloads[len(reloads)-1] {
				t.Errorf("the second term's first apply wrote\n%s\nwant the state the first left\n%s", now[len(now)-1], reloads[len(reloads)-1])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second term applied nothing\nlog:\n%s", r.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	j := r.wait(r.port("p1", netA, guidA), store.StatusCompleted)
	_, _, reloads = r.sm.state()
	if last := reloads[len(reloads)-1]; !strings.Contains(last, guidA.String()) {
		t.Errorf("the port's job %d Completed, but the last file OpenSM read lacks its GUID:\n%s", j.ID, last)
	}
	if err := end(); err != nil {
		t.Fatalf("second term: %v", err)
	}
	if launches, stops, _ := r.sm.state(); launches != 1 || stops != 0 {
		t.Errorf("after two terms: %d OpenSMs started, %d stops; want 1 and 0", launches, stops)
	}
}

// Driver errors are logged when they happen and the apply is retried until
// OpenSM takes it: a start that fails, then SIGHUPs refused.
func TestLeadRetriesDriverErrors(t *testing.T) {
	r := newLeadRig(t)
	r.sm.startErr = errors.New("fork/exec /usr/sbin/opensm: no such file or directory")
	r.sm.reloadErrs = []error{errors.New("opensm: still starting; no SIGHUP sent")}
	_, end := r.lead()
	j := r.network(netA, 101)
	waitLog(t, r.logs, "OpenSM is not ready; will retry", "no such file or directory")
	if got := r.job(j); got.Status == store.StatusCompleted {
		t.Fatalf("job Completed while OpenSM could not start")
	}
	r.sm.heal()
	waitLog(t, r.logs, "signal OpenSM", "still starting")
	r.wait(j, store.StatusCompleted)
	if err := end(); err != nil {
		t.Fatal(err)
	}
}

// A sweep that rejected the file fails its jobs with OpenSM's reason and is
// applied again at once; an OpenSM that crashed and was restarted is given the
// state again at the next check, without a new change.
func TestLeadRetriesRejectedAndRestarted(t *testing.T) {
	r := newLeadRig(t)
	r.sm.sweeps = []string{"applied", "rejected"} // the term's first apply, then the change's
	_, end := r.lead()
	waitLog(t, r.logs, "partitions applied", `"revision":0,`)
	j := r.wait(r.network(netA, 101), store.StatusFailed)
	if !strings.Contains(j.Error, "OpenSM did not apply the partitions file") {
		t.Errorf("rejected job's error %q does not say OpenSM did not apply it", j.Error)
	}
	// Applied again at once (OpenSM now runs its fallback): a third SIGHUP.
	deadline := time.Now().Add(10 * time.Second)
	for _, _, reloads := r.sm.state(); len(reloads) < 3; _, _, reloads = r.sm.state() {
		if time.Now().After(deadline) {
			t.Fatalf("no apply after the rejection: %d SIGHUPs\nlog:\n%s", len(reloads), r.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.wait(r.port("p1", netA, guidA), store.StatusCompleted)

	_, _, before := r.sm.state()
	r.sm.crash()
	waitLog(t, r.logs, "OpenSM was restarted; applying the recorded state again")
	deadline = time.Now().Add(10 * time.Second)
	for _, _, reloads := r.sm.state(); len(reloads) <= len(before); _, _, reloads = r.sm.state() {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted OpenSM was not given the state\nlog:\n%s", r.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
}

// midSweep is a rig whose term applied the empty state and now waits for the
// sweep of a network's job (revision 1), which OpenSM has not ended; it
// returns the job and the function that ends the term.
func midSweep(t *testing.T) (r *leadRig, j store.Job, end func() error) {
	r = newLeadRig(t)
	r.sm.sweeps = []string{"applied", "none"}
	_, end = r.lead()
	waitLog(t, r.logs, "partitions applied", `"revision":0,`)
	j = r.network(netA, 101)
	waitLog(t, r.logs, "SIGHUP sent; waiting for the heavy sweep", `"revision":1,`)
	return r, j, end
}

// A term that ends while OpenSM sweeps (leadership lost) returns at once,
// completes nothing and leaves OpenSM running; the job completes in the next
// term, whose writes the old term's could not have overtaken.
func TestLeadLostLeadershipMidSweep(t *testing.T) {
	r, j, end := midSweep(t)
	started := time.Now()
	if err := end(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Errorf("Lead took %s to return after its term ended mid-sweep", took)
	}
	if got := r.job(j); got.Status == store.StatusCompleted {
		t.Fatal("a job Completed by a term that ended before its sweep did")
	}
	if _, stops, _ := r.sm.state(); stops != 0 {
		t.Errorf("the applier stopped OpenSM %d times", stops)
	}
	_, end = r.lead()
	r.wait(j, store.StatusCompleted)
	if err := end(); err != nil {
		t.Fatal(err)
	}
}

// An old term's writes are fenced: once a newer term started, the old one
// completes nothing, even though its OpenSM applied the change.
func TestLeadFencedByNewerTerm(t *testing.T) {
	r, j, end := midSweep(t)
	defer end()
	// Another manager wins a newer term while this one sweeps.
	if _, err := r.st.NewTerm(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	r.sm.appendLog(sweepLines(t, "applied.log")) // the hanging sweep ends
	waitLog(t, r.logs, "partitions applied", `"jobs_completed":0`)
	if got := r.job(j); got.Status == store.StatusCompleted {
		t.Fatal("a fenced term completed a job")
	}
}

// waitLog waits for a log line holding every part.
func waitLog(t *testing.T, logs *testenv.SyncBuffer, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, l := range strings.Split(logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q\nlog:\n%s", parts, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recordFailingStore fails the transaction that records an applied sweep
// while fails is positive, as a database that went away between OpenSM's
// sweep and the apply's row.
type recordFailingStore struct {
	Store
	fails atomic.Int32
}

func (s *recordFailingStore) FinishApply(ctx context.Context, a store.Apply, open func(store.GateState) bool) (store.Finished, error) {
	if s.fails.Add(-1) >= 0 {
		return store.Finished{}, fmt.Errorf("finish apply: %w", syscall.ECONNREFUSED)
	}
	return s.Store.FinishApply(ctx, a, open)
}

// A job completes only once its apply is recorded: an apply whose row could
// not be written completes nothing, and is done again.
func TestLeadCompletesOnlyRecordedApplies(t *testing.T) {
	r := newLeadRig(t)
	failing := &recordFailingStore{Store: r.st}
	r.app.Store = failing
	_, end := r.lead()
	defer end()
	waitLog(t, r.logs, "partitions applied", `"revision":0,`)
	failing.fails.Store(1)
	j := r.network(netA, 101)
	waitLog(t, r.logs, "record the apply and complete its jobs", "connection refused")
	if got := r.job(j); got.Status == store.StatusCompleted {
		t.Fatal("job Completed although its apply was not recorded")
	}
	r.wait(j, store.StatusCompleted)
	a, err := r.st.LastApply(t.Context())
	if err != nil || a.Revision < j.Revision || a.Outcome != "applied" {
		t.Errorf("last apply %+v, %v; want an applied row of revision %d or later", a, err, j.Revision)
	}
}

// What OpenSM logged since the last scan (a heavy sweep of another cause, a
// line per port on a large fabric) is read during the apply's sweep, not
// after it: the cleared enforcement line logged before the SIGHUP is
// recorded while the sweep still runs, and it still holds the jobs once the
// sweep ends. The polls are an hour apart, so that only the apply reads the
// log.
func TestLeadReadsTheLogBeforeItsPositionDuringTheSweep(t *testing.T) {
	r := newLeadRig(t)
	r.app.Cfg.PollInterval, r.app.Cfg.CheckInterval = time.Hour, time.Hour
	r.sm.sweeps = []string{"applied", "none"}
	_, end := r.lead()
	defer end()
	waitLog(t, r.logs, "partitions applied", `"revision":0,`)
	r.sm.appendLog(verboseFiller(256<<10) + clearedLine("09") + verboseFiller(256<<10))
	j := r.network(netA, 101)
	waitLog(t, r.logs, "SIGHUP sent; waiting for the heavy sweep", `"revision":1,`)
	deadline := time.Now().Add(15 * time.Second)
	for len(recorded(t, r.st)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the line logged before the apply's position was not recorded during its sweep")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if strings.Contains(r.logs.String(), `"msg":"jobs wait for the gates"`) || r.job(j).Status == store.StatusCompleted {
		t.Fatal("the sweep had ended before the line was recorded")
	}
	r.sm.appendLog(sweepLines(t, "applied.log")) // the sweep ends
	waitLog(t, r.logs, "jobs wait for the gates", EnforcementCleared)
	if got := r.job(j); got.Status == store.StatusCompleted {
		t.Errorf("job %s with a cleared enforcement recorded", got.Status)
	}
	if got := recorded(t, r.st); len(got) != 1 || got[0] != "0x0002c90300f00001:2 xI" {
		t.Errorf("recorded %q; want S1 port 2 once", got)
	}
}
