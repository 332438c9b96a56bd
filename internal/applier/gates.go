package applier

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The gates fail closed: a sweep that proves revision R applied completes the
// jobs up to R only when
//
//   - an operator has confirmed the fabric's switches (--confirm-switches),
//   - every confirmed switch is in OpenSM's subnet dump (opensm-subnet.lst, which
//     OpenSM rewrites at every SUBNET UP): a switch that dropped out of the
//     fabric may come back without the pkeys of its ports,
//   - every switch of that dump was confirmed: a host answering as a switch
//     makes the switch port facing it an inter-switch link, unenforced,
//   - no switch port is recorded as having had its enforcement cleared: the
//     host behind it can reach every partition, and
//   - no GUID is recorded as found twice (duplicates.go).
//
// While a gate is closed the open jobs up to R say why in their description,
// and the gates are evaluated again at every poll. Once they open, the state
// is applied again, and the jobs complete after that new sweep passes the same
// checks: the one that held them is older than whatever reopened the gates.

// NoExpectedSwitches is the reason given while no switch has been confirmed.
const NoExpectedSwitches = "No expected switches: once OpenSM has swept, record the fabric's switches with --confirm-switches"

// EnforcementCleared starts the reason given while enforcement errors are recorded.
const EnforcementCleared = "OpenSM cleared a switch port's enforcement"

// GateKind is the kind of a reason jobs do not complete: a word for alerts and
// dashboards to select on without matching the reason's text, which names
// switches and ports.
type GateKind string

const (
	GateNoExpectedSwitches GateKind = "no_expected_switches" // none confirmed yet (NoExpectedSwitches)
	// GateSwitchMissing: a confirmed switch is missing from OpenSM's last
	// sweep, or the subnet dump cannot prove it present.
	GateSwitchMissing GateKind = "switch_missing"
	// GateSwitchesUnchecked: the subnet dump cannot be read (SwitchesUnchecked).
	GateSwitchesUnchecked  GateKind = "switches_unchecked"
	GateEnforcementCleared GateKind = "enforcement_cleared" // enforcement errors are recorded (EnforcementCleared)
	GateFrozen             GateKind = "frozen"              // the HA freeze (freeze.go)
	// GateIsolationBreach: the last audit found a port holding a pkey it is
	// not recorded in, or a full membership where the state says limited
	// (audit.go).
	GateIsolationBreach GateKind = "isolation_breach"
	// GateSwitchNotEnforcing: the last audit found a switch port facing a
	// host that does not enforce partitions (audit.go).
	GateSwitchNotEnforcing GateKind = "switch_not_enforcing"
	GateSecondSM           GateKind = "second_subnet_manager" // another SM is master (secondsm.go)
	// GateUnconfirmedSwitch: OpenSM's last sweep found a switch that was
	// not confirmed: a host answering NodeInfo as a switch turns the switch
	// port facing it into an inter-switch link, where no partition is
	// enforced and nothing is audited.
	GateUnconfirmedSwitch GateKind = "unconfirmed_switch"
	// GateDuplicateGUID: OpenSM found a GUID twice on the fabric, a host
	// presenting another's (duplicates.go).
	GateDuplicateGUID GateKind = "duplicate_guid"
)

// GateReason is one reason jobs do not complete now.
type GateReason struct {
	Kind GateKind
	Text string // for operators: what is wrong, and what to do
}

func (r GateReason) String() string { return r.Text }

// GateTexts are the reasons' texts, as the jobs, the log and --status say them.
func GateTexts(reasons []GateReason) []string {
	texts := make([]string, len(reasons))
	for i, r := range reasons {
		texts[i] = r.Text
	}
	return texts
}

// SwitchesUnchecked starts the reason given while the subnet dump cannot be
// read: --status tells a dump this host cannot read from a closed gate.
const SwitchesUnchecked = "the expected switches cannot be checked"

// GateReader is what evaluating the gates reads from the database.
type GateReader interface {
	ExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error)
	EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error)
	DuplicateGUIDs(ctx context.Context) ([]store.DuplicateGUID, error) // duplicates.go
}

// GateStore is what the applier's gates need of the database.
type GateStore interface {
	GateReader
	RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error
	DuplicateStore
	DescribeOpenJobs(ctx context.Context, term, revision int64, description string) (int64, error)
	// DescribeJob is DescribeOpenJobs for one job (readback.go).
	DescribeJob(ctx context.Context, term, id int64, description string) (int64, error)
}

// Gates evaluates the gates; --status uses it too, so that it reports what the
// applier decides.
type Gates struct {
	Store      GateReader
	SubnetDump string // <dump_files_dir>/opensm-subnet.lst
	// Dump reads SubnetDump, parsing it only when its content changed (the
	// applier evaluates the gates after every sweep); nil: read it whole at
	// every evaluation.
	Dump *topology.Dump
}

// Closed returns why jobs may not complete now; none when every gate is open.
// An error (the database could not be read) means the gates are closed too.
func (g Gates) Closed(ctx context.Context) ([]GateReason, error) {
	expected, err := g.Store.ExpectedSwitches(ctx)
	if err != nil {
		return nil, err
	}
	errs, err := g.Store.EnforcementErrors(ctx)
	if err != nil {
		return nil, err
	}
	dups, err := g.Store.DuplicateGUIDs(ctx)
	if err != nil {
		return nil, err
	}
	var dump dumpRead
	if len(expected) > 0 && g.SubnetDump != "" {
		dump = g.read()
	}
	return append(g.reasons(store.GateState{Expected: expected, Errors: errs}, dump), duplicateReasons(dups)...), nil
}

// read reads the subnet dump, through Dump when there is one.
func (g Gates) read() dumpRead {
	if g.Dump != nil {
		topo, err := g.Dump.Load()
		return dumpRead{topo: topo, err: err}
	}
	topo, err := topology.Load(g.SubnetDump)
	return dumpRead{topo: topo, err: err}
}

// reasons says why the gates hold jobs, given what the database holds of
// them and a read of the subnet dump (looked at only when switches are
// confirmed); none when every gate is open. It does no I/O: the applier
// evaluates it inside the transaction that completes the jobs.
func (g Gates) reasons(st store.GateState, dump dumpRead) []GateReason {
	var reasons []GateReason
	if len(st.Expected) == 0 {
		reasons = append(reasons, GateReason{GateNoExpectedSwitches, NoExpectedSwitches})
	} else {
		reasons = append(reasons, g.missingSwitches(st.Expected, dump)...)
	}
	if len(st.Errors) > 0 {
		ports := make([]string, len(st.Errors))
		for i, e := range st.Errors {
			ports[i] = e.SwitchPort()
		}
		reasons = append(reasons, GateReason{GateEnforcementCleared, fmt.Sprintf(
			"%s: %s (see --show-enforcement-errors; --clear-enforcement-errors once dealt with)",
			EnforcementCleared, strings.Join(ports, ", "))})
	}
	return reasons
}

// missingSwitches compares the confirmed switches with OpenSM's last dump. A
// dump that cannot be read proves nothing: that closes the gate as well (OpenSM
// rewrites the file in place, so a read can catch it half written; the next
// poll reads it again).
func (g Gates) missingSwitches(expected []store.ExpectedSwitch, dump dumpRead) []GateReason {
	if g.SubnetDump == "" {
		return []GateReason{{GateSwitchMissing, "OpenSM's subnet dump is not configured: the expected switches cannot be checked"}}
	}
	if dump.err != nil || dump.topo == nil {
		err := dump.err
		if err == nil {
			err = errors.New("not read")
		}
		return []GateReason{{GateSwitchesUnchecked, fmt.Sprintf("%s: %v", SwitchesUnchecked, err)}}
	}
	present := map[string]bool{}
	for _, sw := range dump.topo.Switches() {
		present[sw.GUID.String()] = true
	}
	confirmed := map[string]bool{}
	var reasons []GateReason
	for _, sw := range expected {
		confirmed[sw.GUID.String()] = true
		if !present[sw.GUID.String()] {
			reasons = append(reasons, GateReason{GateSwitchMissing, fmt.Sprintf(
				"expected switch %s (%s) is missing from OpenSM's last sweep", sw.GUID, sw.Description)})
		}
	}
	return append(reasons, unconfirmedSwitches(dump.topo, confirmed)...)
}

// unconfirmedSwitches names the switches of the dump that were not
// confirmed: a host that answers NodeInfo as a switch makes the switch port
// facing it an inter-switch link, which enforces nothing and is not audited,
// so its tenant could reach every partition. A switch really added closes the
// gate too, until an operator confirms the new set (--confirm-switches).
func unconfirmedSwitches(topo *topology.Topology, confirmed map[string]bool) []GateReason {
	var reasons []GateReason
	for _, sw := range topo.Switches() {
		if !confirmed[sw.GUID.String()] {
			reasons = append(reasons, GateReason{GateUnconfirmedSwitch, fmt.Sprintf(
				"switch %s (%s) is in OpenSM's last sweep but was not confirmed: a host answering as a switch, "+
					"or a switch added; check it, then --confirm-switches", sw.GUID, sw.Description)})
		}
	}
	return reasons
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
func (t *term) startLog(suspect string, dbTimeout time.Duration) error {
	pos, err := opensm.LogPosition(t.Cfg.LogFile)
	if err != nil {
		return fmt.Errorf("OpenSM log: %w", err)
	}
	t.gate = &gatekeeper{}
	handlers := []func(opensm.Entry){t.gate.enforcement.observe, t.gate.duplicates.observe, t.smEvents.observe}
	if t.Lease != nil {
		t.freeze = newFreezeWatch(t.Lease, suspect, dbTimeout)
		handlers = append(handlers, t.freeze.observe)
	}
	if t.tail, err = opensm.OpenTail(t.Cfg.LogFile, pos, handlers...); err != nil {
		t.Log.Error("read OpenSM's log", "error", err) // read at the next pump
	}
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
	log := t.Log.With("revision", a.Revision, "term", t.id)
	dump := t.readDump()
	if err := t.recordOverCapacity(ctx, st, dump); err != nil {
		// OpenSM says nothing of these ports: once the apply is recorded
		// nothing else would. Nothing completes; the apply is retried.
		log.Error("jobs wait: the capacity check's findings could not be recorded", "error", err)
		t.observer().ApplyFinished(a.Outcome, time.Since(a.StartedAt))
		return 0, false
	}
	t.scanEnforcement(ctx)
	lookReasons := t.secondSM.confirm(ctx, t, dump.topo, t.proof.takeRead()) // secondsm.go
	frozen := t.pollFreeze(ctx)
	reapply := t.reapply // a lifted freeze: the full apply that follows completes them
	gates := Gates{SubnetDump: t.Cfg.SubnetDump}
	var reasons []GateReason
	open := func(gs store.GateState) bool {
		reasons = gates.reasons(gs, dump)
		reasons = append(reasons, t.auditReasons()...) // audit.go
		reasons = append(reasons, t.duplicateReason()...)
		if frozen != "" && !reapply {
			reasons = append(reasons, GateReason{GateFrozen, frozen})
		}
		reasons = append(reasons, t.secondSM.reason()...)
		if len(lookReasons) > 0 && len(t.secondSM.reason()) == 0 {
			reasons = append(reasons, lookReasons...) // cut short by the term's end
		}
		return !reapply && len(reasons) == 0
	}
	var f store.Finished
	var err error
	if proven == nil {
		f, err = t.Store.FinishApply(ctx, a, open)
	} else {
		f, err = t.Store.FinishApplyProven(ctx, a, *proven, open)
	}
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
		t.applied = -1
		return 0, false
	case !f.Recorded:
		log.Warn("apply not recorded: a newer term has started")
		return 0, false
	case f.Open:
		if t.gate.reopened {
			t.Log.Info("waiting jobs completed by a sweep after the gates opened", "revision", a.Revision,
				"jobs_completed", f.Completed)
		}
		t.gate.blocked, t.gate.said, t.gate.reopened = 0, "", false
		return f.Completed, true
	case reapply:
		t.gate.blocked = 0
		return 0, true
	}
	t.holdJobs(ctx, a.Revision, reasons)
	return 0, true
}

// gatesOpen evaluates the gates for the jobs up to rev. While one is closed
// the jobs say why, and rev is kept for pollGates.
func (t *term) gatesOpen(ctx context.Context, rev int64) bool {
	reasons, err := Gates{Store: t.Store, SubnetDump: t.Cfg.SubnetDump, Dump: t.subnetDump()}.Closed(ctx)
	if err != nil {
		t.Log.Error("evaluate the gates; jobs wait", "revision", rev, "error", err)
		t.gate.blocked = rev
		return false
	}
	reasons = append(reasons, t.auditReasons()...) // audit.go
	if frozen := t.pollFreeze(ctx); t.reapply {
		t.gate.blocked = 0 // the full apply that follows completes them
		return false
	} else if frozen != "" {
		reasons = append(reasons, GateReason{GateFrozen, frozen})
	}
	reasons = append(reasons, t.secondSM.reason()...)
	if len(reasons) == 0 {
		return true
	}
	t.holdJobs(ctx, rev, reasons)
	return false
}

// holdJobs keeps the jobs up to rev waiting for the gates, saying why, and
// rev for pollGates.
func (t *term) holdJobs(ctx context.Context, rev int64, reasons []GateReason) {
	t.gate.blocked = rev
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
	t.gate.blocked, t.gate.said, t.gate.reopened = 0, said, true
	t.applied = -1 // the loop applies again
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
	if err := rec.RecordEnforcementErrors(ctx, term, seen); err != nil {
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
