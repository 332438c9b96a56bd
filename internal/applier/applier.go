// Package applier brings OpenSM to the recorded state, and completes jobs only
// once the fabric has been seen holding it.
//
// One apply of revision R (apply: prepare, publish, await, settle): snapshot
// the state at R, render the partitions file and check it with the strict
// parser (Render), write it atomically, note the log position, SIGHUP, follow
// the log to the end of a heavy sweep that started after the position. Then,
// with verify = tables, read back the P_Key tables of the places the open jobs
// recorded with their changes, and of the switch ports facing them
// (readback.go): a job whose places do not show its change waits, and fails
// after the verify timeout. Last, finish: the second-SM look before the jobs
// complete (secondsm.go), and one write fenced by the leadership term that
// records the apply and, when internal/verdict's Judge finds no reason to hold
// them (gates.go), completes the proven jobs with revision <= R. Changes that
// arrive during a sweep ride the next one, so a burst of requests costs a few
// sweeps, not one per request.
//
// Nothing of an apply survives the manager: a manager killed at any step leaves
// jobs Pending or Running, never Completed, and the next term starts with a full
// apply. A sweep that rejected the file fails the jobs it carried, with
// OpenSM's lines as the reason, and the state is applied again; pkey errors
// fail the jobs of the ports they name (attribution.go), and with verify =
// tables a sweep that ended with errors during initialization fails none:
// every job is judged by its own ports' tables (readback.go).
//
// Beside the loop, the term's services (services.go) audit the fabric
// (audit.go) and every check interval repair drift (drift.go: an OpenSM the
// supervisor had to restart, and a partitions file that is not what this
// term wrote or not what the recorded state renders to, make it apply again),
// each in the loop's idle turn, which the loop lends them; and the retention
// (retention.go) deletes the finished jobs older than the retention, and the
// applies no kept job needs.
//
// # The term's state machine
//
// A term (one leadership term's loop, LeadTerm) is in one of these states,
// kept in its core fields, which only the transitions of state.go write:
//
//   - due (applied < 0): nothing this term applied counts as proven; the
//     loop's next turn applies the newest revision. A term starts due.
//   - applied R (applied = R): OpenSM was seen applying R, or R can never be
//     applied and its jobs failed; the loop applies again when the revision
//     moves past R.
//   - held R (gate.blocked = R): R's sweep was proven, and the verdict
//     (internal/verdict's Judge) holds its jobs; every poll judges again.
//   - forgotten (reapply): "apply everything again" was asked for while a
//     sweep may be in flight: that sweep completes nothing, and the loop's
//     next turn makes the term due.
//
// Beside them, the last audit's verdict (audit.judged) holds the jobs of
// ports whose own tables lie.
//
// The transitions: forget(why) (any state to forgotten: OpenSM restarted,
// the file drifted, the database restored, the gates reopened, the audit
// found ports cut off, a completion failed, a freeze lifted, a second SM
// gone), takeForgotten (forgotten to due, at the loop's turn and when an
// apply starts: that apply is the one the forget asked for), markApplied
// and keepApplied (the end of an apply), holdRevision and releaseHold (the
// verdict on a proven sweep), gatesReopened (held to forgotten) and setAudit.
// Only the loop's goroutine takes them. The background services (the freeze
// watch, the second-SM look, the drift repair, the audit, the retention:
// services.go) run beside it, each with Start and a Stop that waits for it;
// they never touch the term's fields, and report through findings (a forget
// the loop takes at its next turn, and the jobs described with the whole
// verdict's text) or, the drift repair and the audit, through the idle turn
// they borrowed: the loop takes their forgets and the audit's verdict when
// they give it back (takeTurn).
package applier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Store is what the applier needs of the database.
type Store interface {
	Revision(ctx context.Context) (int64, error)
	Snapshot(ctx context.Context) (store.Snapshot, error)
	// ReadSnapshot is Snapshot reading only what changed since the state c
	// holds (a term's: each term starts with a full read).
	ReadSnapshot(ctx context.Context, c *store.SnapshotCache) (store.Snapshot, error)
	MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error)
	// FinishApply records an applied sweep and completes its jobs in one
	// transaction if open says the gates are (gates.go, finish).
	FinishApply(ctx context.Context, a store.Apply, open func(store.GateState) bool) (store.Finished, error)
	// FinishApplyProven is FinishApply completing only the jobs the
	// read-back proof showed, while others wait for theirs (readback.go).
	FinishApplyProven(ctx context.Context, a store.Apply, p store.Proven, open func(store.GateState) bool) (store.Finished, error)
	FailJobs(ctx context.Context, term, revision int64, reason string) (int64, error)
	FailJob(ctx context.Context, term, id int64, reason string) (int64, error) // attribution.go
	OpenJobs(ctx context.Context, revision int64) ([]store.OpenJob, error)     // attribution.go
	GetJob(ctx context.Context, id int64) (store.Job, error)                   // capacity.go
	RecordApply(ctx context.Context, a store.Apply) (bool, error)
	Wake(ctx context.Context) <-chan struct{}
	DeleteExpiredJobs(ctx context.Context, term int64, retention time.Duration) (int64, error)
	DeleteExpiredApplies(ctx context.Context, term int64, retention time.Duration) (int64, error)
	GateStore       // gates.go
	SetFailureStore // setfailures.go
}

// Supervisor is what runs OpenSM, as the applier drives it
// (opensm.Supervisor): it supervises OpenSM for the manager's life, not a
// term's, so a database outage that ends a term leaves OpenSM running with the
// last applied file.
type Supervisor interface {
	// Start starts OpenSM for the term unless it runs already, and returns at
	// once. It fails when OpenSM can never be started as configured, and with
	// opensm.ErrTermStopped when the term's stop has run: with the HA lease
	// the stop comes from the lease's renewal, concurrently with the term's
	// work, and must be final (opensm.TermLatch).
	Start(term int64) error
	// WaitReady waits until OpenSM may be signalled; it fails at once when
	// OpenSM is not running and is not about to (stopped, or its last start
	// failed).
	WaitReady(ctx context.Context) error
	Reload(ctx context.Context) error
	// Restarts counts the times OpenSM was started again after it exited: its
	// fabric state may then be what its first sweep made of the file, which
	// no one watched.
	Restarts() int
}

// Config is what the applier is told by [opensm] and [database].
type Config struct {
	PartitionsFile string
	// QoSPolicyFile is OpenSM's qos_policy_file, written beside the
	// partitions file before each SIGHUP while some pkey's QoS is set; "":
	// the manager does not own qos (no pkeys client), none is written.
	QoSPolicyFile string
	// SetQoS turns OpenSM's qos on or off in opensm.conf, which OpenSM reads
	// again at the heavy sweep a SIGHUP starts; nil: nothing to turn.
	SetQoS           func(ctx context.Context, on bool) error
	LogFile          string // OpenSM's log, where the sweep's end is read
	DefaultPartition string
	FlatPKey         fabric.PKey          // [opensm] flat_pkey, the flat networks' partition
	Template         *partitions.Template // nil: the built-in one
	Rules            partitions.Rules     // what the check accepts
	SweepTimeout     time.Duration
	CheckInterval    time.Duration // drift repair
	PollInterval     time.Duration // how often the revision is read without a wake-up
	// BatchWindow is the least time between the starts of two applies while
	// changes keep arriving during applies (see waitBatch); 0: none.
	BatchWindow  time.Duration
	JobRetention time.Duration // finished jobs are deleted after this; 0: never
	// DBTimeout bounds every database call; 0: DefaultDBTimeout.
	DBTimeout  time.Duration
	SubnetDump string // OpenSM's opensm-subnet.lst, which the gates read
	// Dump reads SubnetDump, parsing it again only when OpenSM wrote another
	// content (shared with the API's PortLimit); nil: the term keeps one of
	// its own.
	Dump *topology.Dump
	// PortLimit finds host ports whose pkeys fill their switch port's table
	// (topology.PortLimit); nil: none is looked for.
	PortLimit CapacityChecker
	// Readback reads the ports' P_Key tables back from the fabric ([opensm]
	// verify = tables): a sweep's jobs complete only once the tables of the
	// ports their changes touch show them (readback.go). nil: OpenSM's log
	// alone proves a sweep (verify = log).
	Readback *pkeyread.Reader
	// KeysAhead, when set, starts a read of the M_Keys that the read-back's
	// and the second-SM look's SMPs carry (their MKeys), which then give
	// what it read until release: an apply reads them beside its sweep, not
	// twice on every change's path after it. nil: each read reads them.
	KeysAhead func(ctx context.Context) (release func())
	// VerifyTimeout is how long a job whose ports' tables do not show its
	// change waits before it fails; 0: DefaultVerifyTimeout.
	VerifyTimeout time.Duration
	// Audit is the continuous audit (audit.go).
	Audit AuditConfig

	// OnlyManagerStartsOpenSM says that no OpenSM ever starts from the
	// partitions file before the manager has written it, synced, since the
	// machine's start: OpenSM is the manager's child (driver process) or in
	// a container the manager starts (managed), and the manager writes the
	// recorded state at its start and at each term's, before OpenSM starts.
	// An apply's write then syncs the file during the sweep, not before the
	// rename (ReplaceFileSyncLate). false (driver docker: someone else starts
	// OpenSM, at a boot for one): the file is synced before the rename.
	OnlyManagerStartsOpenSM bool
}

// Applier applies while its manager holds the applier lock.
type Applier struct {
	Store Store
	SM    Supervisor
	Cfg   Config
	Log   *slog.Logger
	// Lease is the HA lease, for the freeze (freeze.go); nil without HA.
	Lease LeaseStore
	// Observer is told of every apply and of every turn of the loop
	// (metrics and liveness); nil: nobody is.
	Observer Observer
	// SecondSM reads which subnet manager is master (secondsm.go); nil: no
	// second SM is looked for.
	SecondSM *SecondSMCheck
}

// Observer is told what the applier does (metrics.Metrics with a liveness
// beat).
type Observer interface {
	// ApplyFinished is called once per apply with its outcome as recorded in
	// the applies table.
	ApplyFinished(outcome string, took time.Duration)
	// Applied is called when OpenSM applied revision cleanly, with the jobs
	// completed and the time of each phase: "render", "write", "sweep" and
	// "complete", as the "partitions applied" log line splits them.
	Applied(revision, jobs int64, phases map[string]time.Duration)
	// Alive is called at every turn of the loop: a loop that stops calling it
	// is wedged.
	Alive()
}

// nobody is the Observer of an Applier without one.
type nobody struct{}

func (nobody) ApplyFinished(string, time.Duration)            {}
func (nobody) Applied(int64, int64, map[string]time.Duration) {}
func (nobody) Alive()                                         {}

func (a *Applier) observer() Observer {
	if a.Observer == nil {
		return nobody{}
	}
	return a.Observer
}

// Outcomes recorded in the applies table besides opensm's.
const (
	outcomeCheckFailed = "check-failed"
	outcomeWriteFailed = "write-failed"
	outcomePKeyErrors  = "pkey-errors"
)

// term is the state of one leadership term.
type term struct {
	*Applier
	id       int64
	applied  int64  // revision OpenSM was last seen applying; -1: none yet this term
	written  []byte // what this term last wrote to the partitions file
	gate     *gatekeeper
	tail     *opensm.Tail   // the one reader of OpenSM's log (startLog)
	dump     *topology.Dump // Cfg.Dump, or the term's own
	freeze   *freezeWatch   // nil without HA
	secondSM *secondSMWatch // nil without a SecondSM check
	smEvents smEventLog     // OpenSM's entries naming another SM (secondsm.go)
	reapply  bool           // a lifted freeze: apply everything again
	// snapshots is the state as last read: each read reads what changed.
	snapshots store.SnapshotCache
	// rendered is the recorded state the apply in progress rendered: the
	// state the last apply's file holds.
	rendered store.Snapshot
	// proof is the read-back proof's state: the jobs that wait for their
	// ports' tables (readback.go).
	proof proofState
	// readTables, when set, reads the tables in place of Cfg.Readback: a
	// fake for the tests of fabrics larger than the simulator's.
	readTables tableReader
	audit      auditState  // audit.go
	sets       setFailures // setfailures.go
	// dumpOnce chooses dump, envOnce builds env (services.go): once, as
	// the loop and the services ask for them concurrently.
	dumpOnce, envOnce sync.Once
	env               *watchEnv
	inbox             inbox // what the services asked of the loop (services.go)
	// replaced are the adopted partitions' flag changes this term logged
	// (logReplacedFlags): each is said once, when it first shows.
	replaced map[partitions.FlagsReplaced]bool
	turns    turnDesk // where the drift repair and the audit ask for the loop's idle turn

	// writtenQoS is what this term last wrote to the QoS policy file (nil:
	// none, qos off); qosSet says whether opensm.conf's qos was written
	// this term.
	writtenQoS []byte
	qosSet     bool
	// nextFile replaces the partitions file with OnlyManagerStartsOpenSM,
	// the next apply's file made ahead (replacePartitions); nil until the
	// term's first apply.
	nextFile *opensm.Replacer
}

// applyResult says what the loop does after an apply.
type applyResult int

const (
	applyDone        applyResult = iota // OpenSM has the revision, or it can never be applied
	applyRetry                          // try again after a back-off
	applyRetryAtOnce                    // try again now (once; then as applyRetry)
)

// Lead applies until ctx ends (the term is over), starting OpenSM if it does
// not run yet; it never stops OpenSM, which keeps the last applied file when
// the term ends. A new term starts with a full apply, whatever the previous
// one did.
func (a *Applier) Lead(ctx context.Context, termID int64) error {
	return a.LeadTerm(ctx, termID, "")
}

// LeadTerm is Lead for a term of the HA lease: suspect is the manager whose
// OpenSM may still be master (store.Lease.Suspect), named by a freeze.
func (a *Applier) LeadTerm(ctx context.Context, termID int64, suspect string) error {
	t := &term{Applier: a.withDeadlines(), id: termID, applied: -1}
	drift := t.newDriftRepair() // OpenSM's restarts count from the term's start
	// OpenSM must never start with a file that is not the recorded state: its
	// first sweep reads it. An OpenSM that runs already keeps what it has
	// until the full apply below.
	if err := t.writeCurrent(ctx); err != nil {
		return err
	}
	// From before OpenSM starts: its first lines are this term's.
	if err := t.startLog(suspect); err != nil {
		return err
	}
	defer t.tail.Close()
	defer t.closeNextFile()
	defer t.closeConns() // readback.go: after the services ended (deferred below)
	// The term may be over already (its context cancelled, its OpenSM
	// stopped by the lease): the supervisor then refuses, whatever this term did
	// not notice.
	if err := a.SM.Start(termID); err != nil {
		return fmt.Errorf("start OpenSM: %w", err)
	}
	t.newSecondSMWatch(ctx)             // secondsm.go
	defer t.startServices(ctx, drift)() // services.go: waited for when the term ends

	return a.loop(ctx, t)
}

// loop is the term's loop, until ctx ends: apply each new revision (a burst
// in one sweep, a failure with a back-off), and between them poll the gates
// and the read-back proof, repair drift and run the audit when due. It reads
// the revision and waits for changes on a.Store, the store without the
// term's deadlines.
func (a *Applier) loop(ctx context.Context, t *term) error {
	wake := a.Store.Wake(ctx)
	poll := time.NewTicker(a.Cfg.PollInterval)
	defer poll.Stop()
	auditTurns, driftTurns := t.turns.desks()
	t.loadRecorded(ctx)
	var st loopState
	for {
		a.observer().Alive()
		rev, err := t.revision(ctx)
		if err == nil && rev == t.applied {
			t.checkRestored(ctx)
		}
		t.takeReports()   // services.go
		t.takeForgotten() // state.go
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			a.Log.Error("read revision", "error", err)
		case rev != t.applied && !t.freeze.isFrozen() && !t.secondSM.holds():
			switch t.applyPending(ctx, rev, &st, driftTurns) {
			case stepEnd:
				return nil
			case stepAgain:
				continue
			}
		}
		t.pollGates(ctx)
		t.pollProof(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-poll.C:
		case req := <-driftTurns:
			t.lendTurn(ctx, req, wake)
		case req := <-auditTurns:
			t.lendTurn(ctx, req, wake)
		}
	}
}

// revision is the revision the loop decides on: the newest one this
// process's own changes committed since the loop last asked, when it is
// newer than the one applied (the change that woke the loop: no round trip
// to read what the change's commit already said), otherwise the one read.
// Either is only what decides whether to apply: the apply renders the
// revision its snapshot reads, committed, whichever that is.
func (t *term) revision(ctx context.Context) (int64, error) {
	if c, ok := t.Store.(committedTaker); ok {
		if rev, ok := c.TakeCommitted(); ok && rev > t.applied && t.applied >= 0 {
			return rev, nil
		}
	}
	return t.Store.Revision(ctx)
}

// committedTaker is a Store that knows the revisions this process's changes
// committed (store.Store.TakeCommitted).
type committedTaker interface {
	TakeCommitted() (int64, bool)
}

// loadRecorded reads, once a term, what earlier terms recorded and the loop
// keeps in memory (the retention service prunes old jobs meanwhile).
func (t *term) loadRecorded(ctx context.Context) {
	t.loadAudit(ctx)       // audit.go
	t.loadSetFailures(ctx) // setfailures.go
	if err := t.gate.duplicates.load(ctx, t.Store); err != nil {
		t.Log.Error("read the duplicated GUIDs recorded; the log's next entries record them again", "error", err)
	}
}

// loopState is what the loop remembers from one apply to the next.
type loopState struct {
	retry         time.Duration // the back-off after the last failed apply
	retriedAtOnce bool          // the last apply asked to be retried at once, and was
	lastStart     time.Time     // of the last apply
}

// loopStep says what the loop does after applyPending.
type loopStep int

const (
	stepSettled loopStep = iota // applied: poll the gates, then wait for the next change
	stepAgain                   // read the revision again at once
	stepEnd                     // the term's context ended
)

// applyPending applies revision rev, which OpenSM does not have yet: after a
// wait that lets a burst share one sweep, and with a back-off (during which
// the drift repair still gets its turn, driftTurns) after a failure, so that
// a fabric that keeps failing is not swept in a loop.
func (t *term) applyPending(ctx context.Context, rev int64, st *loopState, driftTurns <-chan turnRequest) loopStep {
	// Several changes waiting: a burst; one change is applied at once.
	if rev-t.applied > 1 && !t.waitBatch(ctx, st.lastStart, rev) {
		return stepEnd
	}
	st.lastStart = time.Now()
	res := t.apply(ctx)
	if res == applyRetryAtOnce && !st.retriedAtOnce {
		st.retriedAtOnce = true
		return stepAgain
	}
	if res == applyDone {
		st.retry, st.retriedAtOnce = 0, false
		return stepSettled
	}
	st.retry = min(max(2*st.retry, time.Second), 30*time.Second)
	select {
	case <-ctx.Done():
		return stepEnd
	case req := <-driftTurns:
		t.lendTurn(ctx, req, nil)
	case <-time.After(st.retry):
	}
	return stepAgain
}

// checkRestored makes the loop apply again when the database no longer holds
// the state last applied: restored from a backup since, and new changes took
// the revision back to the applied one (store/history.go), so that the
// revision alone says nothing is to be done while the new changes' jobs wait.
// The state applied is the last one rendered (an apply renders, then sets
// applied).
func (t *term) checkRestored(ctx context.Context) {
	newest := t.rendered.NewestJob
	if t.applied < 0 || newest <= 0 {
		return
	}
	_, err := t.Store.GetJob(ctx, newest)
	switch {
	case errors.Is(err, store.ErrNotFound):
		t.Log.Warn("the database no longer holds the state last applied (restored from a backup?); applying it again",
			"revision", t.applied, "newest_job", newest)
		t.forget("the database no longer holds the state last applied")
	case err != nil:
		t.Log.Error("read the newest job of the state last applied", "error", err)
	}
}

// waitBatch waits, during a burst of changes, so that the changes arriving
// meanwhile share one sweep: a cloud booting hundreds of nodes sends thousands
// of ports in seconds, and a sweep per apply would make OpenSM sweep back to
// back. It waits until no change has arrived for batchQuiet (the burst is
// over), or until BatchWindow after the last apply started, whichever comes
// first: a long burst then costs a sweep a second. A burst is several changes
// waiting when an apply could start; a lone change (networking-mlnx creating a
// network, then its first port once that completed) goes at once. rev is the
// revision just read. False when ctx ended.
func (t *term) waitBatch(ctx context.Context, lastStart time.Time, rev int64) bool {
	deadline := lastStart.Add(t.Cfg.BatchWindow)
	if !time.Now().Before(deadline) {
		return true
	}
	tick := time.NewTicker(batchQuiet / 4)
	defer tick.Stop()
	lastChange := time.Now()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		t.observer().Alive()
		now := time.Now()
		if r, err := t.Store.Revision(ctx); err == nil && r != rev {
			rev, lastChange = r, now
		}
		if !now.Before(deadline) || now.Sub(lastChange) >= batchQuiet {
			return true
		}
	}
}

// batchQuiet is how long without a new change ends a burst (see waitBatch):
// a burst's requests arrive milliseconds apart.
const batchQuiet = 100 * time.Millisecond

// apply brings OpenSM to the newest revision, in four steps: prepare reads
// and renders the recorded state, publish puts the file in place and signals
// OpenSM, await follows OpenSM's log to the end of the sweep, and settle
// completes or fails the jobs as the sweep says.
func (t *term) apply(ctx context.Context) applyResult {
	t.takeForgotten() // this apply is the one a forget asked for (state.go)
	run, res, ok := t.prepare(ctx)
	if !ok {
		return res
	}
	watch, synced, ok := t.publish(ctx, run)
	if !ok {
		return applyRetry
	}
	defer watch.Close()
	// The term's first full second-SM look, beside the sweep (secondsm.go).
	defer t.secondSM.besideSweep(ctx, t.watchEnv())()
	if t.Cfg.Readback != nil { // the read-back's connection, beside the sweep
		defer dialAhead(ctx, t.Cfg.Readback.Dialer)()
	}
	if t.Cfg.KeysAhead != nil { // the M_Keys of the reads after the sweep, beside it
		defer t.Cfg.KeysAhead(ctx)()
	}
	t.readWantsDuringSweep(ctx, run) // readback.go
	sweep, ok := t.await(ctx, run, watch, synced)
	run.waitWants()
	if !ok {
		return applyRetry
	}
	return t.settle(ctx, run, sweep)
}

// applyRun is one apply in progress: the state it renders, the file, and
// when each step began, for the "partitions applied" line.
type applyRun struct {
	st        partitions.State
	rev       int64
	text      []byte
	qosPolicy []byte // the QoS policy file written with text
	log       *slog.Logger
	started   time.Time // UTC, as recorded
	rendered  time.Time
	signalled time.Time
	swept     time.Time
	// snap is the recorded state the file renders (withheld from): what the
	// read-back proof finds each job's ports in.
	snap     store.Snapshot
	verified time.Time // when the ports' tables showed every change (readback.go)
	// detail is the applied row's detail when its jobs complete: "SUBNET
	// UP", or what else the sweep logged (pkey errors, dropped Sets).
	detail string
	// clean: the sweep ended without errors; only then does its jobs'
	// transaction begin beside the read-back (early.go).
	clean bool
	// reported: the apply's figures are logged and observed, by its first
	// completion; the jobs its proof held complete later, each alone.
	reported bool
	// marked delivers the result of marking the jobs Running, which runs
	// beside OpenSM's sweep (markRunning); await waits for it before any job
	// can complete.
	marked <-chan error
	// wantsRead delivers the open jobs and their wants read during the
	// sweep (readWantsDuringSweep), wants once it did; nil: none.
	wantsRead chan openWants
	wants     openWants
}

// waitWants waits for the read of the wants during the sweep, if any.
func (run *applyRun) waitWants() {
	if run.wantsRead != nil {
		run.wants, run.wantsRead = <-run.wantsRead, nil
	}
}

// takeWants is the read of the wants during the sweep, once.
func (run *applyRun) takeWants() openWants {
	w := run.wants
	run.wants = openWants{}
	return w
}

// row is the apply's row in the applies table, finished now.
func (t *term) row(run *applyRun, outcome, detail string) store.Apply {
	sum := sha256.Sum256(run.text)
	return store.Apply{Revision: run.rev, SHA256: hex.EncodeToString(sum[:]), Term: t.id, Outcome: outcome,
		Detail: detail, StartedAt: run.started, FinishedAt: time.Now().UTC(), NewestJob: run.snap.NewestJob}
}

// record records an apply that completes no job, fenced by the term like
// every applier write; an apply that does goes through finish.
func (t *term) record(ctx context.Context, run *applyRun, outcome, detail string) bool {
	ok, err := t.Store.RecordApply(context.WithoutCancel(ctx), t.row(run, outcome, detail))
	t.observer().ApplyFinished(outcome, time.Since(run.started))
	if err != nil {
		run.log.Error("record apply", "outcome", outcome, "error", err)
		return false
	}
	if !ok {
		run.log.Warn("apply not recorded: a newer term has started")
	}
	return ok
}

// prepare reads and renders the newest state. ok is false when the apply
// ends here, with res: the state could not be read, what the file leaves out
// could not be failed, or the file fails the check.
func (t *term) prepare(ctx context.Context) (run *applyRun, res applyResult, ok bool) {
	started := time.Now().UTC()
	r, left, err := t.render(ctx)
	if err != nil {
		t.Log.Error("read recorded state", "error", err)
		return nil, applyRetry, false
	}
	run = &applyRun{st: r.State, rev: r.State.Revision, text: r.Text, qosPolicy: r.QoSPolicy, started: started, rendered: time.Now(),
		log: t.Log.With("revision", r.State.Revision, "term", t.id), snap: t.rendered, detail: "SUBNET UP"}
	t.proof.run = nil // this apply's proof replaces any earlier one's: its jobs are this one's too
	if len(left) > 0 && !t.failWithheld(ctx, run.rev, left) {
		return nil, applyRetry, false
	}
	if r.Problems != nil {
		// Never written: OpenSM would make every port a full member of the
		// default partition. The change stays recorded; a later apply that
		// passes the check applies it.
		run.log.Error("rendered partitions file fails the check; not written", "error", r.Problems)
		t.failJobs(ctx, run.rev, "the partitions file for this change fails the check: "+r.Problems.Error())
		t.record(ctx, run, outcomeCheckFailed, r.Problems.Error())
		t.markApplied(run.rev)
		return nil, applyDone, false
	}
	return run, 0, true
}

// publish puts the file in place, takes the log's position, signals OpenSM
// and marks the jobs Running. synced delivers the result of the syncs that
// make the file durable, which run during the sweep, and run.marked the
// marking's, which runs beside the sweep. ok is false when the apply is to
// be retried.
func (t *term) publish(ctx context.Context, run *applyRun) (watch *opensm.SweepWatch, synced <-chan error, ok bool) {
	log := run.log
	if err := t.SM.WaitReady(ctx); err != nil {
		if ctx.Err() == nil {
			log.Error("OpenSM is not ready; will retry", "error", err)
		}
		return nil, nil, false
	}
	// The QoS policy goes first: the sweep SIGHUP starts reads both, and
	// the partitions file's directory sync below makes both renames durable.
	if err := t.writeQoSPolicy(ctx, run.qosPolicy); err != nil {
		log.Error("write QoS policy file", "error", err)
		t.record(ctx, run, outcomeWriteFailed, err.Error())
		return nil, nil, false
	}
	durable, err := t.replacePartitions(run.text)
	if err != nil {
		log.Error("write partitions file", "error", err)
		t.record(ctx, run, outcomeWriteFailed, err.Error())
		return nil, nil, false
	}
	t.written = run.text
	log.Debug("partitions file in place", "file", t.Cfg.PartitionsFile)
	// The position is taken after the rename: a heavy sweep whose start is
	// logged after it began after the rename, so it parses the new file.
	watch, pos, err := t.tail.WatchSweep()
	if err != nil {
		log.Error("OpenSM log position", "error", err)
		t.syncNow(run, durable)
		return nil, nil, false
	}
	if err := t.SM.Reload(ctx); err != nil {
		log.Warn("signal OpenSM", "error", err)
		watch.Close()
		t.syncNow(run, durable)
		return nil, nil, false
	}
	run.signalled = time.Now()
	log.Debug("SIGHUP sent; waiting for the heavy sweep", "log_offset", pos.Offset)
	t.markRunning(ctx, run)
	// The syncs that make the file survive a crash (the directory's, and the
	// file's own with OnlyManagerStartsOpenSM) run during the sweep: OpenSM
	// reads the file from the page cache either way, and no job completes
	// before they are done. A crash before them leaves the old file or the
	// new one, whole, or (the file's sync late) an empty or partial one that
	// no OpenSM reads: the manager writes the recorded state, synced, at its
	// start and at each term's before OpenSM starts (replacePartitions).
	done := make(chan error, 1)
	go func() {
		err := durable()
		t.readyNextFile(log) // before done: the next apply's Replace follows it
		done <- err
	}()
	return watch, done, true
}

// markRunning marks the jobs up to run's revision Running, during the sweep
// the SIGHUP started; run.marked delivers the result, which await waits for
// before any job can complete. The mark waits for the database's commit (an
// fsync), and OpenSM needs nothing of it: before the SIGHUP it only delayed
// the file's write (its file system journal's commit held the temporary
// file's creation). Running says no more than Pending to anyone (every
// reader of the open jobs takes both): an apply that ends before the SIGHUP
// leaves its jobs Pending, and a crash after it, unmarked, leaves them open
// for the next term, as after a mark. A mark that fails makes the apply
// retried, its jobs still open, as a sweep that failed would: OpenSM may
// then have swept the revision once more than needed. A deposed term's mark
// changes nothing and is no error.
func (t *term) markRunning(ctx context.Context, run *applyRun) {
	marked := make(chan error, 1)
	run.marked = marked
	go func() {
		_, err := t.Store.MarkJobsRunning(ctx, t.id, run.rev)
		marked <- err
	}()
}

// replacePartitions puts text in place as the partitions file for an apply's
// SIGHUP; durable syncs it. The file's own sync waits for durable only where
// no OpenSM can start from the file before the manager writes it again
// (Config.OnlyManagerStartsOpenSM): a file a crash left empty or partial
// would make OpenSM put every port in the default partition as a full
// member. Everywhere else, and for the file a term starts OpenSM with
// (writeCurrent), it is synced before the rename.
//
// With the file's sync late, the temporary file the new text goes to is
// made ahead, during the apply before's sweep (readyNextFile): creating it
// was most of the write's time on the path from a change to the SIGHUP.
func (t *term) replacePartitions(text []byte) (durable func() error, err error) {
	if t.Cfg.OnlyManagerStartsOpenSM {
		if t.nextFile == nil {
			t.nextFile = opensm.NewReplacer(t.Cfg.PartitionsFile)
		}
		return t.nextFile.Replace(text, 0o644)
	}
	return opensm.ReplaceFile(t.Cfg.PartitionsFile, text, 0o644)
}

// readyNextFile makes the next apply's partitions file ahead, during this
// apply's sweep, after its file's syncs: the manager only waits for OpenSM
// then. Made once the jobs were settled instead, it took a core from the
// client's read of its job and the next change's POST, and the own
// overhead (afm-bench (8a)) gained nothing; OpenSM's sweep was no longer
// beside it, within the noise of 3 interleaved pairs. A failure costs
// only the time: the next apply creates its file itself.
func (t *term) readyNextFile(log *slog.Logger) {
	if t.nextFile == nil {
		return
	}
	if err := t.nextFile.Ready(); err != nil {
		log.Warn("make the next partitions file ahead", "error", err)
	}
}

// closeNextFile removes the file made ahead when the term ends.
func (t *term) closeNextFile() {
	if t.nextFile == nil {
		return
	}
	if err := t.nextFile.Close(); err != nil {
		t.Log.Warn("remove the partitions file made ahead", "error", err)
	}
}

// syncNow runs durable for an apply that ends before the SIGHUP: the file
// is in place, and a late sync must not be left undone (nor its file open).
func (t *term) syncNow(run *applyRun, durable func() error) {
	if err := durable(); err != nil {
		run.log.Error("sync the partitions file", "error", err)
	}
}

// await follows OpenSM's log to the end of the sweep (waitSweep), then
// records the cleared enforcement the log showed up to there. ok is false
// when the apply is to be retried: the log could not be followed, the file's
// sync or the jobs' marking failed, or the enforcement could not be
// recorded.
func (t *term) await(ctx context.Context, run *applyRun, watch *opensm.SweepWatch, synced <-chan error) (opensm.SweepResult, bool) {
	log := run.log
	res, err := t.waitSweep(ctx, watch, run.rev, log)
	if markErr := <-run.marked; markErr != nil {
		if ctx.Err() == nil {
			log.Error("mark jobs running; the revision is applied again", "error", markErr)
		}
		<-synced
		return res, false
	}
	if syncErr := <-synced; syncErr != nil && err == nil {
		log.Error("sync the partitions file", "error", syncErr)
		t.record(ctx, run, outcomeWriteFailed, syncErr.Error())
		return res, false
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Error("follow OpenSM's log to the end of the sweep", "error", err)
		}
		return res, false
	}
	run.swept = time.Now()
	log.Debug("heavy sweep ended", "outcome", res.Outcome, "pkey_errors", len(res.PKeyErrors))
	// Every cleared enforcement of the log up to the sweep's end is recorded
	// before any job can complete: the gates then hold them. The tail handed
	// each to the recorder before the sweep's watch saw the sweep end.
	if err := t.recordEnforcement(ctx); err != nil {
		log.Error("record cleared enforcement; jobs wait", "error", err)
		return res, false
	}
	// And the duplicated GUIDs, or their clearing by a sweep that came up
	// without one: finish's gate reads what was recorded.
	t.recordDuplicates(ctx)
	return res, true
}

// settle completes or fails the jobs up to the revision as the sweep says,
// and says what the loop does next.
func (t *term) settle(ctx context.Context, run *applyRun, res opensm.SweepResult) applyResult {
	log := run.log
	if res.Outcome == opensm.Applied || (res.Outcome == opensm.Failed && t.Cfg.Readback == nil) {
		t.noteSweepSets(ctx, res, nil) // setfailures.go; with verify = tables, settleDropped
	}
	switch {
	case res.Outcome == opensm.Applied && len(res.PKeyErrors) == 0:
		run.clean = true
		return t.settleApplied(ctx, run)
	case res.Outcome == opensm.Applied:
		return t.settlePKeyErrors(ctx, run, res.PKeyErrors)
	case res.Outcome == opensm.Rejected:
		// The fabric now runs OpenSM's fallback, every port a full member of
		// the default partition: no tenant is isolated. Apply again at once.
		log.Error("OpenSM rejected the partitions file and fell back to every port a full member of the default partition; re-applying",
			"detail", res.Detail)
		t.failJobs(ctx, run.rev, "OpenSM did not apply the partitions file with this change: "+res.Detail)
		t.record(ctx, run, string(res.Outcome), res.Detail)
		return applyRetryAtOnce
	case res.Outcome == opensm.QoSRejected:
		// The partitions are in place, but OpenSM dropped the QoS policy:
		// the Kubernetes pkeys' paths are not limited as recorded. Fail
		// closed: no job of this sweep completes; apply again after a
		// back-off (the policy comes from checked values, so a rejection
		// is OpenSM's or the file's, not the request's).
		log.Error("OpenSM rejected the QoS policy file; will retry", "file", t.Cfg.QoSPolicyFile, "detail", res.Detail)
		t.failJobs(ctx, run.rev, "OpenSM did not apply the QoS policy with this change: "+res.Detail)
		t.record(ctx, run, string(res.Outcome), res.Detail)
		return applyRetry
	case res.Outcome == opensm.Failed && t.Cfg.Readback != nil:
		return t.settleDropped(ctx, run, res)
	case res.Outcome == opensm.Failed:
		// OpenSM retried the sweep until the deadline without success: the
		// change is not in the fabric. The driver re-sends failed jobs; the
		// state is applied again meanwhile.
		reason := "OpenSM's sweep with this change failed: " + res.Detail
		if len(res.PKeyErrors) > 0 {
			reason += ": " + strings.Join(res.PKeyErrors, "; ")
		}
		log.Error("partitions not applied: the sweep ended with errors; will retry", "detail", res.Detail,
			"errors", res.PKeyErrors)
		t.failJobs(ctx, run.rev, reason)
		t.record(ctx, run, string(res.Outcome), reason)
		return applyRetry
	case res.TimedOut:
		// sweep_timeout: nothing proved the change applied, and nothing proved
		// it was not: OpenSM may be restarting, not yet master, or slow on a
		// large fabric. Failing the jobs would only make the driver re-send the
		// same state; they keep waiting instead, saying why, and complete as
		// soon as a later apply is proven. The state is applied again after a
		// back-off.
		said := fmt.Sprintf("Waiting: OpenSM did not show this change applied within sweep_timeout (%s): %s; applying again",
			t.Cfg.SweepTimeout, res.Detail)
		log.Warn("partitions not proven applied within sweep_timeout; applying again", "outcome", res.Outcome,
			"detail", res.Detail)
		t.describeWaiting(ctx, run.rev, said)
		t.record(ctx, run, string(res.Outcome), res.Detail)
		return applyRetry
	}
	// The proof was broken before the deadline (the log was truncated under
	// the tail, another SM became master): nothing says the change is not
	// applied, so the jobs keep waiting, saying why, and the state is applied
	// again at once.
	log.Warn("partitions not proven applied; applying again", "outcome", res.Outcome, "detail", res.Detail)
	t.describeWaiting(ctx, run.rev, "Waiting: "+res.Detail+"; applying again")
	t.record(ctx, run, string(res.Outcome), res.Detail)
	return applyRetryAtOnce
}

// settleApplied completes the jobs of a sweep that applied the file cleanly,
// each once its ports' own tables show its change (readback.go).
//
// With verify = tables, finish's work before its transaction
// (prepareFinish: the second-SM look of the ports read, the capacity check's
// and the places' records) runs beside the read-back's reads, which it
// would otherwise follow: each waits for the fabric or the database, and
// neither reads what the other writes. The look is still taken after the
// sweep's end and before the jobs' transaction, of the same ports (the
// wants' ports are known before they are read), and a look that fails still
// holds them; an SM OpenSM logs after the look, during the reads, holds them
// at the transaction (appeared), as one logged after it always did. Should
// the reads prove no job, the prepared records are kept (they record the
// fabric as the sweep left it) and the look's verdict stands; the jobs wait
// for pollProof, whose finish looks again.
func (t *term) settleApplied(ctx context.Context, run *applyRun) applyResult {
	if t.Cfg.Readback == nil {
		return t.complete(ctx, run, nil, nil)
	}
	jobs, byJob, ok := t.proofWants(ctx, run)
	if !ok {
		// The jobs wait, saying why; pollProof reads their ports again.
		t.markApplied(run.rev)
		return applyDone
	}
	dump := t.readDump() // one read for the proof, the records and the gates
	prepared := make(chan finishPrep, 1)
	go func() { prepared <- t.prepareFinish(ctx, run.st, dump, wantPorts(byJob)) }()
	early := t.beginEarly(ctx, run) // early.go
	proven, ok := t.proveWants(ctx, run, jobs, byJob, dump)
	p := <-prepared // waited for on every path: nothing of the apply outlives it
	t.proof.takeRead()
	if early != nil {
		if res, settled := t.endEarly(ctx, run, early, proven, ok, p); settled {
			return res
		}
	}
	if !ok {
		t.markApplied(run.rev)
		return applyDone
	}
	return t.complete(ctx, run, proven, &p)
}

// complete completes the jobs of a sweep that applied the file cleanly
// whose changes the ports' tables show (or verify = log): every open job up
// to its revision when proven is nil, else only the ones it names, the
// others waiting for their proof (pollProof). p, when given, is finish's
// work before its transaction, done already (settleApplied).
func (t *term) complete(ctx context.Context, run *applyRun, proven *store.Proven, p *finishPrep) applyResult {
	// The apply is recorded in the transaction that completes the jobs (if
	// the gates are open): every Completed job has an applied row of its
	// revision or a later one, finished before it, wherever the manager is
	// killed. Not recorded (the database is away, or a newer term began),
	// nothing completes.
	var n int64
	var ok bool
	if p == nil {
		n, ok = t.finish(ctx, run.st, t.row(run, string(opensm.Applied), run.detail), proven)
	} else {
		// What OpenSM logged during the reads is recorded before the
		// transaction reads the gates, as finish's own scan would have.
		t.scanEnforcement(ctx)
		n, ok = t.finishPrepared(ctx, t.row(run, string(opensm.Applied), run.detail), proven, *p)
	}
	return t.completed(run, n, ok)
}

// completed is complete's end, once its transaction completed n jobs (ok:
// the apply is recorded).
func (t *term) completed(run *applyRun, n int64, ok bool) applyResult {
	if !ok {
		return applyRetry
	}
	t.markApplied(run.rev)
	if run.reported {
		run.log.Info("jobs whose ports showed their change later completed", "jobs_completed", n)
		return applyDone
	}
	run.reported = true
	// Where the time went, for operators and docs/performance.md: reading
	// and rendering the state, marking and writing, OpenSM's sweep, and the
	// gates and job completion.
	phases := map[string]time.Duration{"render": run.rendered.Sub(run.started),
		"write": run.signalled.Sub(run.rendered), "sweep": run.swept.Sub(run.signalled), "complete": time.Since(run.swept)}
	if t.Cfg.Readback != nil {
		// Reading the tables back, until they showed the completed changes.
		phases["verify"], phases["complete"] = run.verified.Sub(run.swept), time.Since(run.verified)
	}
	run.log.Info("partitions applied", "jobs_completed", n, "took", time.Since(run.started),
		"render", phases["render"], "write", phases["write"], "sweep", phases["sweep"], "verify", phases["verify"],
		"complete", phases["complete"])
	t.observer().Applied(run.rev, n, phases)
	return applyDone
}

// settlePKeyErrors settles a sweep that applied the file while some ports did
// not get their pkeys (e.g. a full pkey table). The jobs whose places the
// errors name fail, saying which lines (attribution.go); every other job is
// judged as after a clean sweep: by its own places' tables with verify =
// tables, by the log with verify = log. Applying again would give the same
// result. Lines that cannot be placed on a port fail every job with verify =
// log, which has nothing else to go by; with verify = tables each job's own
// tables say whether OpenSM reached it.
func (t *term) settlePKeyErrors(ctx context.Context, run *applyRun, pkeyErrors []string) applyResult {
	log := run.log
	failed, attributed, err := t.failLocally(ctx, run, pkeyErrors)
	run.takeWants() // read before these jobs failed: the proof reads the open jobs again
	if err != nil {
		log.Error("fail the jobs the pkey errors name", "error", err)
		return applyRetry
	}
	if !attributed && t.Cfg.Readback == nil {
		// Errors that name no port: fail closed, every job of the sweep.
		reason := "OpenSM applied the partitions file with errors: " + strings.Join(pkeyErrors, "; ")
		log.Error("partitions applied with pkey errors", "errors", pkeyErrors)
		if _, err := t.Store.FailJobs(ctx, t.id, run.rev, reason); err != nil {
			log.Error("fail jobs", "error", err)
		}
		t.record(ctx, run, outcomePKeyErrors, reason)
		t.markApplied(run.rev)
		return applyDone
	}
	log.Error("partitions applied with pkey errors; failing the jobs they name, the others proven as after a clean sweep",
		"errors", pkeyErrors, "jobs_failed", failed, "attributed", attributed)
	run.detail = "SUBNET UP, with pkey errors: " + strings.Join(pkeyErrors, "; ")
	return t.settleApplied(ctx, run)
}

// settleDropped settles, with verify = tables, a sweep that ended with
// "Errors during initialization" until the deadline: a Set to some port was
// not answered (a host whose SMA drops OpenSM's MADs), and OpenSM's log
// names the MAD, not the port. OpenSM programmed every port it reached, so
// each job is judged by its own places' tables: the jobs whose ports read as
// promised complete, the others wait, their description naming the port and
// why, and fail after verify_timeout. The state is applied again after the
// back-off, as after any failed sweep; no job fails for another host's
// dropped Sets.
func (t *term) settleDropped(ctx context.Context, run *applyRun, res opensm.SweepResult) applyResult {
	reason := "OpenSM's sweep with this change failed: " + res.Detail
	if len(res.PKeyErrors) > 0 {
		reason += ": " + strings.Join(res.PKeyErrors, "; ")
	}
	run.log.Error("the sweep ended with errors; judging each job by its ports' P_Key tables", "detail", res.Detail,
		"errors", res.PKeyErrors)
	run.detail = reason + "; jobs completed as their ports' tables show them"
	before := t.applied
	t.proof.unset = nil
	proven, ok := t.proveTables(ctx, run)
	if ctx.Err() == nil {
		// The ports the read found not taking their Sets (setfailures.go).
		t.noteSweepSets(ctx, res, t.proof.unset)
	}
	switch {
	case ctx.Err() != nil:
		return applyRetry // the term is over: it writes nothing more
	case ok:
		if t.complete(ctx, run, proven, nil) != applyDone {
			t.keepApplied(before)
			return applyRetry
		}
	default:
		t.record(ctx, run, string(res.Outcome), reason)
	}
	// Not swept cleanly: the state is applied again after the back-off, as
	// after any failed sweep, whether jobs wait or not (the failing host
	// holds no job's place, or a place proven by its successor, and still
	// lacks what the file gives it).
	t.keepApplied(before)
	return applyRetry
}

// maxSweepFollow bounds how long an apply follows one heavy sweep that is
// still running, in sweep_timeouts: a sweep of a large fabric under load may
// take several, and signalling again only queues another sweep behind it
// (each SIGHUP during a sweep makes OpenSM sweep once more after it), whose
// start the next apply waits for. Past the bound (an OpenSM that hangs) the
// state is applied again, as after any timeout.
const maxSweepFollow = 10

// waitSweep follows OpenSM's log from the watch's position to the end of the
// first heavy sweep that started after it (opensm.SweepWatch). At each
// sweep_timeout at which a heavy sweep is still running (the one counted, or
// one that started before the position, behind which the SIGHUP waits) and OpenSM still runs, it says
// so in the waiting jobs and follows on, up to maxSweepFollow
// sweep_timeouts: the signal was received, and the sweep that proves the
// change is under way or next. Only a wait that saw no sweep at all (the
// signal lost, or OpenSM not master), an OpenSM no longer running, or one that
// another SM has made STANDBY (notMaster) ends with
// the timeout's result, after which the state is applied and signalled again.
func (t *term) waitSweep(ctx context.Context, watch *opensm.SweepWatch, rev int64, log *slog.Logger) (opensm.SweepResult, error) {
	for i := 1; ; i++ {
		res, err := watch.Wait(ctx, t.Cfg.SweepTimeout)
		if err != nil || !res.TimedOut || !res.InProgress || i >= maxSweepFollow || !t.smRunning() || t.notMaster() {
			return res, err
		}
		t.observer().Alive() // following a sweep is the loop turning
		waited := time.Duration(i) * t.Cfg.SweepTimeout
		log.Warn("OpenSM's heavy sweep is still running past sweep_timeout; following it rather than signalling again",
			"waited", waited, "detail", res.Detail)
		t.describeWaiting(ctx, rev, fmt.Sprintf("Waiting: OpenSM's heavy sweep is still running after %s "+
			"(sweep_timeout %s); following it, for at most %s", waited, t.Cfg.SweepTimeout, maxSweepFollow*t.Cfg.SweepTimeout))
	}
}

// notMaster says whether another SM is master (the HA freeze, a second
// subnet manager): a STANDBY OpenSM's sweep does not end, and following it
// would keep the loop from the freeze's and the gate's polls (an --unfreeze
// waits for them).
func (t *term) notMaster() bool { return t.freeze.isFrozen() || t.secondSM.holds() }

// smRunning says whether OpenSM runs now (it may be signalled): a sweep of an
// OpenSM that exited never ends, and its restart is applied to anew.
func (t *term) smRunning() bool {
	now, cancel := context.WithCancel(context.Background())
	cancel() // WaitReady answers at once from the supervisor's state
	return t.SM.WaitReady(now) == nil
}

// describeWaiting says in the open jobs up to rev why they still wait, and
// names the duplicated GUIDs OpenSM found meanwhile: while one lasts its
// sweeps never end (duplicates.go).
func (t *term) describeWaiting(ctx context.Context, rev int64, said string) {
	t.recordDuplicates(ctx)
	if dup := t.duplicateReason(); len(dup) > 0 {
		said += "; " + dup[0].Text
	}
	if _, err := t.Store.DescribeOpenJobs(ctx, t.id, rev, said); err != nil {
		t.Log.Error("describe waiting jobs", "revision", rev, "error", err)
	}
}

// failJobs fails the jobs up to rev that are still open.
func (t *term) failJobs(ctx context.Context, rev int64, reason string) {
	if _, err := t.Store.FailJobs(ctx, t.id, rev, reason); err != nil {
		t.Log.Error("fail jobs", "revision", rev, "error", err)
	}
}

// render reads the state and renders the file (Render); left is what the
// file leaves out (withhold).
func (t *term) render(ctx context.Context) (r Rendered, left []withheld, err error) {
	snap, err := t.Store.ReadSnapshot(ctx, &t.snapshots)
	if err != nil {
		return r, nil, err
	}
	in := t.Cfg.RenderInput()
	snap, left = withhold(snap, in.PortLimit)
	t.rendered = snap // what the file holds
	r, err = renderWithheld(ctx, snap, in)
	if err == nil && r.Problems == nil {
		t.logReplacedFlags(r)
	}
	return r, left, err
}

// logReplacedFlags warns, once a term, of each adopted partition whose
// owner's partition the file writes with other flags: the tenant's
// partition changes (an adopted mtu=4 dropped, say) when its owner arrives,
// and the operator must hear of it then, not find it later.
func (t *term) logReplacedFlags(r Rendered) {
	changes, err := partitions.OwnedFlagChanges(r.Text, r.State)
	if err != nil {
		t.Log.Error("compare the adopted partitions' flags with the file's", "revision", r.State.Revision, "error", err)
		return
	}
	for _, c := range changes {
		if t.replaced[c] {
			continue
		}
		if t.replaced == nil {
			t.replaced = map[partitions.FlagsReplaced]bool{}
		}
		t.replaced[c] = true
		t.Log.Warn("an owner's flags replace an adopted partition's", "pkey", c.PKey.String(), "adopted", c.Adopted,
			"partition", c.Owner, "flags", c.Change, "revision", r.State.Revision)
	}
}

// writeCurrent writes the file for the current state without signalling anyone,
// for an OpenSM about to start. A state that fails the check leaves the file
// as it is; the first apply reports it.
func (t *term) writeCurrent(ctx context.Context) error {
	r, _, err := t.render(ctx)
	if err != nil {
		return fmt.Errorf("read recorded state: %w", err)
	}
	if r.Problems != nil {
		return nil
	}
	if err := t.writeQoSPolicy(ctx, r.QoSPolicy); err != nil {
		return err
	}
	if err := opensm.WriteFileAtomic(t.Cfg.PartitionsFile, r.Text, 0o644); err != nil {
		return fmt.Errorf("write partitions file: %w", err)
	}
	t.written = r.Text
	return nil
}

// writeQoSPolicy puts the QoS policy file in place, whole (a temporary file,
// its fsync, the rename), and turns OpenSM's qos on; a nil policy (no
// pkey's QoS set) turns qos off and removes the file, so that the other
// partitions' paths are as without the manager's QoS. OpenSM reads both at
// the heavy sweep that reads the partitions file. Nothing is written
// without a QoSPolicyFile.
func (t *term) writeQoSPolicy(ctx context.Context, policy []byte) error {
	if t.Cfg.QoSPolicyFile == "" {
		return nil
	}
	on := policy != nil
	if on {
		if _, err := opensm.ReplaceFile(t.Cfg.QoSPolicyFile, policy, 0o644); err != nil {
			return fmt.Errorf("write QoS policy file: %w", err)
		}
	}
	if t.Cfg.SetQoS != nil && (!t.qosSet || (t.writtenQoS != nil) != on) {
		if err := t.Cfg.SetQoS(ctx, on); err != nil {
			return fmt.Errorf("turn OpenSM's qos %s: %w", map[bool]string{true: "on", false: "off"}[on], err)
		}
		t.qosSet = true
	}
	if !on {
		if err := os.Remove(t.Cfg.QoSPolicyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove QoS policy file: %w", err)
		}
	}
	t.writtenQoS = policy
	return nil
}

// State turns a snapshot into what the partitions file renders from: each VLAN
// network's partition, the flat partition (on flatPKey) whose members are the
// ports of every flat network, the Kubernetes partitions and the adopted ones.
func State(snap store.Snapshot, defaultPartition string, flatPKey fabric.PKey) partitions.State {
	members := map[string][]fabric.GUID{}
	for _, m := range snap.Members {
		members[m.NetworkID] = append(members[m.NetworkID], m.GUID)
	}
	st := partitions.State{Revision: snap.Revision, DefaultPartition: defaultPartition,
		Flat: partitions.FlatPartition{PKey: flatPKey}}
	for _, n := range snap.Networks {
		switch {
		case !n.Managed:
			continue // recorded, but has no partition
		case n.PKey == nil:
			st.Flat.Members = append(st.Flat.Members, members[n.ID]...)
		default:
			st.Networks = append(st.Networks, partitions.Network{ID: n.ID, PKey: *n.PKey, Members: members[n.ID]})
		}
	}
	slices.Sort(st.Flat.Members)
	for _, k := range snap.Kubernetes {
		part := partitions.KubernetesPartition{PKey: k.PKey, IPoIB: k.IPoIB, QoS: k.QoS}
		for _, m := range k.Members {
			part.Members = append(part.Members, partitions.KubernetesMember{GUID: m.GUID,
				Membership: partitions.Membership(m.Membership), Index0: m.Index0})
		}
		st.Kubernetes = append(st.Kubernetes, part)
	}
	for _, a := range snap.Adopted {
		st.Adopted = append(st.Adopted, a.Statement)
	}
	return st
}
