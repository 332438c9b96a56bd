package applier

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// The gates fail closed: a sweep that proves revision R applied completes the
// jobs up to R only when internal/verdict's Judge finds no reason to hold
// them. It judges
//
//   - an operator has confirmed the fabric's switches (--confirm-switches),
//   - every confirmed switch is in OpenSM's subnet dump (opensm-subnet.lst, which
//     OpenSM rewrites at every SUBNET UP): a switch that dropped out of the
//     fabric may come back without the pkeys of its ports,
//   - every switch of that dump was confirmed: a host answering as a switch
//     makes the switch port facing it an inter-switch link, unenforced,
//   - no switch port is recorded as having had its enforcement cleared: the
//     host behind it can reach every partition,
//   - the last audit found no breach (audit.go),
//   - no GUID is recorded as found twice (duplicates.go), and none of the
//     partitions is behind another switch port than its recorded one
//     (moved.go),
//   - no freeze (freeze.go), and
//   - no second SM is master over ports (secondsm.go),
//
// from the switches and enforcement errors that the completing transaction
// reads, and what the term holds of the rest (termEvidence).
//
// While a gate is closed the open jobs up to R say why in their description,
// and the gates are evaluated again at every poll. Once they open, the state
// is applied again, and the jobs complete after that new sweep passes the same
// checks: the one that held them is older than whatever reopened the gates.

// The gates' kinds, reasons and texts are the verdict package's, the one
// author of why jobs are held; the applier's callers name them so.
type (
	GateKind   = verdict.Kind
	GateReason = verdict.Reason
	// Gates reads the gates' evidence and judges it (verdict.Source).
	Gates = verdict.Source
	// GateReader is what evaluating the gates reads from the database.
	GateReader = verdict.Reader
)

const (
	GateNoExpectedSwitches = verdict.NoExpectedSwitches
	GateSwitchMissing      = verdict.SwitchMissing
	GateSwitchesUnchecked  = verdict.SwitchesUnchecked
	GateEnforcementCleared = verdict.EnforcementCleared
	GateFrozen             = verdict.Frozen
	GateIsolationBreach    = verdict.IsolationBreach
	GateSwitchNotEnforcing = verdict.SwitchNotEnforcing
	GateSecondSM           = verdict.SecondSM
	GateUnconfirmedSwitch  = verdict.UnconfirmedSwitch
	GateDuplicateGUID      = verdict.DuplicateGUID

	NoExpectedSwitches = verdict.NoExpectedSwitchesText
	EnforcementCleared = verdict.EnforcementClearedText
	SwitchesUnchecked  = verdict.SwitchesUncheckedText
)

// GateTexts are the reasons' texts, as the jobs, the log and --status say them.
func GateTexts(reasons []GateReason) []string { return verdict.Texts(reasons) }

// GateStore is what the applier's gates need of the database.
type GateStore interface {
	GateReader
	RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error
	DuplicateStore
	PlaceStore // moved.go
	DescribeOpenJobs(ctx context.Context, term, revision int64, description string) (int64, error)
	// DescribeJob is DescribeOpenJobs for one job (readback.go).
	DescribeJob(ctx context.Context, term, id int64, description string) (int64, error)
}

// dumpRead is one read of OpenSM's subnet dump: what Load returned.
type dumpRead struct {
	topo *topology.Topology
	err  error
}

// errNoDump is the read of a subnet dump that is not configured: the
// capacity check finds nothing, the gates say so.
var errNoDump = fmt.Errorf("OpenSM's subnet dump is not configured: %w", fs.ErrNotExist)

// readDump reads the subnet dump once for an apply: the capacity check and
// the gates judge the same content, and the 1 MB file of a large fabric,
// which OpenSM has just rewritten, is compared with the last content once.
func (t *term) readDump() dumpRead {
	if t.Cfg.SubnetDump == "" && t.Cfg.Dump == nil {
		return dumpRead{err: errNoDump}
	}
	topo, err := t.subnetDump().Load()
	return dumpRead{topo: topo, err: err}
}

// gatekeeper is a term's state of the gates.
type gatekeeper struct {
	enforcement enforcementLog
	duplicates  duplicateLog // duplicates.go
	places      placeWatch   // moved.go
	blocked     int64        // revision proven applied whose jobs wait for the gates; 0: none
	said        string       // the reasons last logged and written into the jobs
	// reopened: the gates opened while jobs waited; the next apply's sweep
	// completes them.
	reopened bool
}

// startLog opens the term's tail of OpenSM's log from its current end, with
// the readers of what it says besides the applies' sweeps: the gates'
// enforcement recorder and, with the HA lease, the freeze watch (suspect is
// the manager it names). OpenSM starts after this; it repeats a cleared
// enforcement at every heavy sweep while the condition lasts, and its first
// state line is this term's.
func (t *term) startLog(suspect string) error {
	pos, err := opensm.LogPosition(t.Cfg.LogFile)
	if err != nil {
		return fmt.Errorf("OpenSM log: %w", err)
	}
	t.gate = &gatekeeper{}
	handlers := []func(opensm.Entry){t.gate.enforcement.observe, t.gate.duplicates.observe, t.smEvents.observe}
	if t.Lease != nil {
		t.freeze = newFreezeWatch(t.Lease, suspect)
		handlers = append(handlers, t.freeze.observe)
	}
	if t.tail, err = opensm.OpenTail(t.Cfg.LogFile, pos, handlers...); err != nil {
		t.Log.Error("read OpenSM's log", "error", err) // read at the next pump
	}
	t.smEvents.tail = t.tail
	if t.freeze != nil {
		t.freeze.tail = t.tail
	}
	return nil
}

// finish ends an apply that OpenSM applied (a, of state st): it records a
// and, if the gates are open, completes the jobs up to its revision in the
// same transaction (store.FinishApply), so that every Completed job has an
// applied row of its revision or a later one, committed with it. The subnet
// dump is read once, for the capacity check and the gates' switches alike;
// the gates' rows are read inside the transaction. While a gate is closed
// the apply is recorded all the same and the jobs say why they wait; every
// poll looks at the gates again (pollGates). recorded is false when the
// apply is not in the database (it could not be written, or a newer term
// began): then nothing completed either. A non-nil proven completes only the
// jobs it names (readback.go): the others wait for their ports' tables.
func (t *term) finish(ctx context.Context, st partitions.State, a store.Apply, proven *store.Proven) (completed int64, recorded bool) {
	return t.finishPrepared(ctx, a, proven, t.prepareFinish(ctx, st, t.readDump(), t.proof.takeRead()))
}

// finishPrep is what finish reads and records before its transaction: the
// dump, the capacity check's and the GUIDs' places' records, and the
// second-SM look of the ports read (read), which reads the fabric while the
// records are written: one after the other they cost a change both waits.
type finishPrep struct {
	dump       dumpRead
	capErr     error             // the capacity check's findings not recorded
	places     []store.GUIDPlace // the places the gate judges
	placesErr  error             // the places not recorded
	lookFailed string            // the look's error (confirm); "": it read the fabric
}

// prepareFinish is finish's work before its transaction, for the apply of
// st. It may run beside the read-back's reads (settleApplied): it writes
// only what it owns (the enforcement and duplicate logs, the capacity
// findings, the places and the look's verdict, each fenced by the term),
// and reads nothing of the proof's.
func (t *term) prepareFinish(ctx context.Context, st partitions.State, dump dumpRead, read []fabric.GUID) finishPrep {
	p := finishPrep{dump: dump}
	// The look runs here, the records beside it: the look's answer from
	// this OpenSM's own SM (its SMInfo) comes last of every read after the
	// sweep, and a goroutine started for it, behind the log's scan, began
	// it up to a few hundred microseconds later on a busy machine. The look
	// reads the log's SM entries itself (settle). The records are waited
	// for on every path.
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		t.scanEnforcement(ctx)
		if p.capErr = t.recordOverCapacity(ctx, st, dump); p.capErr == nil {
			p.places, p.placesErr = t.recordPlaces(ctx, st, dump)
		}
	}()
	p.lookFailed = t.secondSM.confirm(ctx, t.watchEnv(), dump.topo, read) // secondsm.go
	<-recorded
	// A test hook (none in production) may pause here, in the window
	// between the look and the jobs' transaction.
	t.secondSM.afterLook(ctx, st.Revision)
	return p
}

// finishPrepared is finish's transaction, after prepareFinish (p).
func (t *term) finishPrepared(ctx context.Context, a store.Apply, proven *store.Proven, p finishPrep) (completed int64, recorded bool) {
	j, ok := t.judgeFinish(ctx, a, p)
	if !ok {
		return 0, false
	}
	var f store.Finished
	var err error
	if proven == nil {
		f, err = t.Store.FinishApply(ctx, a, j.open)
	} else {
		f, err = t.Store.FinishApplyProven(ctx, a, *proven, j.open)
	}
	return t.finished(ctx, a, j, f, err)
}

// finishJudge is the gates' judgement of an apply's jobs in the making: the
// evidence read before the jobs' transaction, completed by what open is
// given inside it.
type finishJudge struct {
	t       *term
	ev      verdict.Evidence
	places  []store.GUIDPlace
	reapply bool
	v       verdict.Verdict // open's
}

// judgeFinish is finishPrepared's work before its transaction: false when
// nothing may complete (logged; the apply is retried).
func (t *term) judgeFinish(ctx context.Context, a store.Apply, p finishPrep) (*finishJudge, bool) {
	log := t.Log.With("revision", a.Revision, "term", t.id)
	if p.capErr != nil {
		// OpenSM says nothing of these ports: once the apply is recorded
		// nothing else would. Nothing completes; the apply is retried.
		log.Error("jobs wait: the capacity check's findings could not be recorded", "error", p.capErr)
		t.observer().ApplyFinished(a.Outcome, time.Since(a.StartedAt))
		return nil, false
	}
	t.takeReports() // a second SM gone: this sweep completes nothing (forget)
	if p.placesErr != nil {
		// A GUID moved since the last record would go unjudged: nothing
		// completes; the apply is retried.
		log.Error("jobs wait: the GUIDs' switch ports could not be recorded", "error", p.placesErr)
		t.observer().ApplyFinished(a.Outcome, time.Since(a.StartedAt))
		return nil, false
	}
	frozen := t.pollFreeze(ctx)
	j := &finishJudge{t: t, places: p.places, reapply: t.reapply} // a lifted freeze: the full apply that follows completes them
	j.ev = verdict.Evidence{SubnetDump: t.Cfg.SubnetDump, Dump: verdict.Dump{Topo: p.dump.topo, Err: p.dump.err},
		Duplicates: t.gate.duplicates.view()}
	t.termEvidence(&j.ev, frozen, j.reapply)
	if j.ev.SecondSM.LookFailed == "" {
		j.ev.SecondSM.LookFailed = p.lookFailed // a look the term's end cut short holds this sweep's jobs alone
	}
	return j, true
}

// open is the jobs' transaction's open: the verdict on what it read.
func (j *finishJudge) open(gs store.GateState) bool {
	j.ev.Expected, j.ev.EnforcementErrors, j.ev.Places = gs.Expected, gs.Errors, j.places
	// The last moment before the jobs complete: an SM OpenSM named since
	// the look holds them (secondsm.go).
	j.ev.SecondSM.Appeared = j.t.secondSM.appeared(j.t.watchEnv())
	j.v = verdict.Judge(j.ev)
	return !j.reapply && j.v.Open()
}

// finished is finishPrepared's work after its transaction (f, err), judged
// by j.
func (t *term) finished(ctx context.Context, a store.Apply, j *finishJudge, f store.Finished, err error) (completed int64, recorded bool) {
	log := t.Log.With("revision", a.Revision, "term", t.id)
	t.observer().ApplyFinished(a.Outcome, time.Since(a.StartedAt))
	switch {
	case err != nil:
		log.Error("record the apply and complete its jobs; nothing completed", "outcome", a.Outcome, "error", err)
		return 0, false
	case f.Restored:
		// The file holds changes the restore took back, and new jobs may
		// carry its revision: none completes, the restored state is applied.
		log.Warn("apply not recorded: the database no longer holds the state applied (restored from a backup?); applying it again",
			"newest_job", a.NewestJob)
		t.forget("the database no longer holds the state applied")
		return 0, false
	case !f.Recorded:
		log.Warn("apply not recorded: a newer term has started")
		return 0, false
	case f.Open:
		if t.gate.reopened {
			t.Log.Info("waiting jobs completed by a sweep after the gates opened", "revision", a.Revision,
				"jobs_completed", f.Completed)
		}
		t.releaseHold()
		return f.Completed, true
	case j.reapply:
		return 0, true // forget released the hold: the full apply that follows judges the jobs
	}
	t.holdJobs(ctx, a.Revision, j.v.Reasons)
	return 0, true
}

// gatesOpen evaluates the gates for the jobs up to rev. While one is closed
// the jobs say why, and rev is kept for pollGates.
func (t *term) gatesOpen(ctx context.Context, rev int64) bool {
	ev, err := Gates{Store: t.Store, SubnetDump: t.Cfg.SubnetDump, Dump: t.subnetDump()}.Evidence(ctx)
	if err != nil {
		t.Log.Error("evaluate the gates; jobs wait", "revision", rev, "error", err)
		t.holdRevision(rev)
		return false
	}
	frozen := t.pollFreeze(ctx)
	if t.reapply {
		return false // forget released the hold: the full apply that follows completes them
	}
	t.termEvidence(&ev, frozen, false)
	v := verdict.Judge(ev)
	if v.Open() {
		return true
	}
	t.holdJobs(ctx, rev, v.Reasons)
	return false
}

// termEvidence adds to ev what the term holds of the evidence: the last
// audit as it recorded or restored it, the second SM as its watch sees it,
// and the freeze (frozen, pollFreeze's) unless it was just lifted: the
// full apply that follows (reapply) completes the jobs then.
func (t *term) termEvidence(ev *verdict.Evidence, frozen string, reapply bool) {
	ev.Audit = t.audit.last
	ev.SecondSM = t.secondSM.evidence()
	if frozen != "" && !reapply {
		ev.Freeze = frozen
	}
}

// holdJobs keeps the jobs up to rev waiting for the gates, saying why, and
// rev for pollGates.
func (t *term) holdJobs(ctx context.Context, rev int64, reasons []GateReason) {
	t.holdRevision(rev)
	texts := GateTexts(reasons)
	said := "Not completing: " + strings.Join(texts, "; ")
	if said != t.gate.said {
		t.Log.Warn("jobs wait for the gates", "revision", rev, "reasons", texts)
	}
	if _, err := t.Store.DescribeOpenJobs(ctx, t.id, rev, said); err != nil {
		t.Log.Error("describe waiting jobs", "revision", rev, "error", err)
		return
	}
	t.gate.said = said
}

// pollGates records the enforcement lines OpenSM logged since the last poll
// and looks at the gates again for the jobs they hold. Once the gates open,
// the sweep that held them proves nothing: while a gate was closed the fabric
// may have changed (a switch came back without its ports' pkeys, a port
// stopped enforcing), so the state is applied again, and the jobs complete
// only once a sweep that started after the gates opened has shown it applied
// and passed the same checks.
func (t *term) pollGates(ctx context.Context) {
	t.scanEnforcement(ctx)
	if t.gate.blocked == 0 {
		t.pollFreeze(ctx) // recorded as soon as seen, for --status
	}
	rev := t.gate.blocked
	if rev == 0 || !t.gatesOpen(ctx, rev) {
		return
	}
	t.Log.Info("gates open; applying again, the waiting jobs complete after that sweep", "revision", rev)
	const said = "Waiting: the gates opened; a new sweep must show the change applied"
	if _, err := t.Store.DescribeOpenJobs(ctx, t.id, rev, said); err != nil {
		t.Log.Error("describe waiting jobs", "revision", rev, "error", err)
	}
	t.gatesReopened(rev, said) // the loop applies again
}

// recordEnforcement records the cleared enforcement the tail has handed out
// so far.
func (t *term) recordEnforcement(ctx context.Context) error {
	return t.gate.enforcement.record(ctx, t.id, t.Store, t.Log)
}

// scanEnforcement reads what OpenSM logged since the last read and records
// the cleared enforcement in it.
func (t *term) scanEnforcement(ctx context.Context) {
	if err := t.tail.Pump(); err != nil {
		t.Log.Error("read OpenSM's log for cleared enforcement", "error", err)
	}
	if err := t.recordEnforcement(ctx); err != nil {
		t.Log.Error("record cleared enforcement", "error", err)
	}
	t.recordDuplicates(ctx)
}

// EnforcementRecorder records what the log said.
type EnforcementRecorder interface {
	RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error
}

// enforcementLog keeps the lines of OpenSM's log saying a switch port's
// enforcement was cleared, as the term's tail hands them out (observe), until
// they are recorded. The tail reads each byte of the log once, so each line
// is recorded once, whether a sweep's wait or a poll read it.
type enforcementLog struct {
	mu    sync.Mutex // observe runs in whichever goroutine pumps the tail
	found []opensm.EnforcementError
	// writes counts the term's records of enforcement errors, begun and
	// ended (the log's and the capacity check's): a jobs' transaction that
	// read the gates beside them (early.go) knows whether its read may have
	// missed one.
	writes struct{ begun, ended atomic.Int64 }
}

// write runs rec, one record of enforcement errors, counted.
func (l *enforcementLog) write(rec func() error) error {
	l.writes.begun.Add(1)
	defer l.writes.ended.Add(1)
	return rec()
}

// pending says whether the tail handed out lines not recorded yet.
func (l *enforcementLog) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.found) > 0
}

// observe is the tail's handler.
func (l *enforcementLog) observe(e opensm.Entry) {
	if ee, ok := opensm.ParseEnforcementError(e); ok {
		l.mu.Lock()
		l.found = append(l.found, ee)
		l.mu.Unlock()
	}
}

// record records what was found since the last record, and logs it. What
// could not be recorded is kept for the next call.
func (l *enforcementLog) record(ctx context.Context, term int64, rec EnforcementRecorder, log *slog.Logger) error {
	l.mu.Lock()
	found := l.found
	l.found = nil
	l.mu.Unlock()
	if len(found) == 0 {
		return nil
	}
	seen := make([]store.EnforcementSighting, len(found))
	for i, e := range found {
		seen[i] = store.EnforcementSighting{Switch: e.Switch, Port: e.Port, Line: e.Line}
	}
	if err := l.write(func() error { return rec.RecordEnforcementErrors(ctx, term, seen) }); err != nil {
		l.mu.Lock()
		l.found = append(found, l.found...)
		l.mu.Unlock()
		return err
	}
	for _, e := range found {
		log.Error(EnforcementCleared, "switch_port", e.String(), "line", e.Line)
	}
	return nil
}
