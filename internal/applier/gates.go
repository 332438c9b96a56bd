package applier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
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
//     fabric may come back without the pkeys of its ports, and
//   - no switch port is recorded as having had its enforcement cleared: the
//     host behind it can reach every partition.
//
// While a gate is closed the open jobs up to R say why in their description,
// and the gates are evaluated again at every poll. Once they open, the state
// is applied again, and the jobs complete after that new sweep passes the same
// checks: the one that held them is older than whatever reopened the gates.

// NoExpectedSwitches is the reason given while no switch has been confirmed.
const NoExpectedSwitches = "No expected switches: once OpenSM has swept, record the fabric's switches with --confirm-switches"

// EnforcementCleared starts the reason given while enforcement errors are recorded.
const EnforcementCleared = "OpenSM cleared a switch port's enforcement"

// SwitchesUnchecked starts the reason given while the subnet dump cannot be
// read: --status tells a dump this host cannot read from a closed gate.
const SwitchesUnchecked = "the expected switches cannot be checked"

// GateReader is what evaluating the gates reads from the database.
type GateReader interface {
	ExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error)
	EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error)
}

// GateStore is what the applier's gates need of the database.
type GateStore interface {
	GateReader
	RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error
	DescribeOpenJobs(ctx context.Context, term, revision int64, description string) (int64, error)
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
func (g Gates) Closed(ctx context.Context) ([]string, error) {
	expected, err := g.Store.ExpectedSwitches(ctx)
	if err != nil {
		return nil, err
	}
	errs, err := g.Store.EnforcementErrors(ctx)
	if err != nil {
		return nil, err
	}
	var dump dumpRead
	if len(expected) > 0 && g.SubnetDump != "" {
		dump = g.read()
	}
	return g.reasons(store.GateState{Expected: expected, Errors: errs}, dump), nil
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
func (g Gates) reasons(st store.GateState, dump dumpRead) []string {
	var reasons []string
	if len(st.Expected) == 0 {
		reasons = append(reasons, NoExpectedSwitches)
	} else {
		reasons = append(reasons, g.missingSwitches(st.Expected, dump)...)
	}
	if len(st.Errors) > 0 {
		ports := make([]string, len(st.Errors))
		for i, e := range st.Errors {
			ports[i] = e.SwitchPort()
		}
		reasons = append(reasons, fmt.Sprintf("%s: %s (see --show-enforcement-errors; --clear-enforcement-errors once dealt with)",
			EnforcementCleared, strings.Join(ports, ", ")))
	}
	return reasons
}

// missingSwitches compares the confirmed switches with OpenSM's last dump. A
// dump that cannot be read proves nothing: that closes the gate as well (OpenSM
// rewrites the file in place, so a read can catch it half written; the next
// poll reads it again).
func (g Gates) missingSwitches(expected []store.ExpectedSwitch, dump dumpRead) []string {
	if g.SubnetDump == "" {
		return []string{"OpenSM's subnet dump is not configured: the expected switches cannot be checked"}
	}
	if dump.err != nil || dump.topo == nil {
		err := dump.err
		if err == nil {
			err = errors.New("not read")
		}
		return []string{fmt.Sprintf("%s: %v", SwitchesUnchecked, err)}
	}
	present := map[string]bool{}
	for _, sw := range dump.topo.Switches() {
		present[sw.GUID.String()] = true
	}
	var reasons []string
	for _, sw := range expected {
		if !present[sw.GUID.String()] {
			reasons = append(reasons, fmt.Sprintf("expected switch %s (%s) is missing from OpenSM's last sweep",
				sw.GUID, sw.Description))
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
	watch   enforcementWatch
	blocked int64  // revision proven applied whose jobs wait for the gates; 0: none
	said    string // the reasons last logged and written into the jobs
	// reopened: the gates opened while jobs waited; the next apply's sweep
	// completes them.
	reopened bool
}

// startGates begins watching OpenSM's log for cleared enforcement, from its
// current end: OpenSM starts after this, and repeats the line at every heavy
// sweep while the condition lasts.
func (t *term) startGates() error {
	pos, err := opensm.LogPosition(t.Cfg.LogFile)
	if err != nil {
		return fmt.Errorf("OpenSM log: %w", err)
	}
	t.gate = &gatekeeper{watch: enforcementWatch{path: t.Cfg.LogFile, pos: pos}}
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
// began): then nothing completed either.
func (t *term) finish(ctx context.Context, st partitions.State, a store.Apply) (completed int64, recorded bool) {
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
	frozen := t.pollFreeze(ctx)
	reapply := t.reapply // a lifted freeze: the full apply that follows completes them
	gates := Gates{SubnetDump: t.Cfg.SubnetDump}
	var reasons []string
	f, err := t.Store.FinishApply(ctx, a, func(gs store.GateState) bool {
		reasons = gates.reasons(gs, dump)
		if frozen != "" && !reapply {
			reasons = append(reasons, frozen)
		}
		return !reapply && len(reasons) == 0
	})
	t.observer().ApplyFinished(a.Outcome, time.Since(a.StartedAt))
	switch {
	case err != nil:
		log.Error("record the apply and complete its jobs; nothing completed", "outcome", a.Outcome, "error", err)
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
	if frozen := t.pollFreeze(ctx); t.reapply {
		t.gate.blocked = 0 // the full apply that follows completes them
		return false
	} else if frozen != "" {
		reasons = append(reasons, frozen)
	}
	if len(reasons) == 0 {
		return true
	}
	t.holdJobs(ctx, rev, reasons)
	return false
}

// holdJobs keeps the jobs up to rev waiting for the gates, saying why, and
// rev for pollGates.
func (t *term) holdJobs(ctx context.Context, rev int64, reasons []string) {
	t.gate.blocked = rev
	said := "Not completing: " + strings.Join(reasons, "; ")
	if said != t.gate.said {
		t.Log.Warn("jobs wait for the gates", "revision", rev, "reasons", reasons)
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

// recordEnforcement records the cleared enforcement an apply's sweep logged.
func (t *term) recordEnforcement(ctx context.Context, found []opensm.EnforcementError) error {
	if len(found) == 0 {
		return nil
	}
	seen := make([]store.EnforcementSighting, len(found))
	for i, e := range found {
		seen[i] = store.EnforcementSighting{Switch: e.Switch, Port: e.Port, Line: e.Line}
	}
	if err := t.Store.RecordEnforcementErrors(ctx, t.id, seen); err != nil {
		return err
	}
	if t.gate.watch.seenInSweep == nil {
		t.gate.watch.seenInSweep = map[string]struct{}{}
	}
	for _, e := range found {
		t.gate.watch.seenInSweep[e.Line] = struct{}{}
	}
	for _, e := range found {
		t.Log.Error(EnforcementCleared, "switch_port", e.String(), "line", e.Line)
	}
	return nil
}

func (t *term) scanEnforcement(ctx context.Context) {
	if err := t.gate.watch.scan(ctx, t.id, t.Store, t.Log); err != nil {
		t.Log.Error("read OpenSM's log for cleared enforcement", "error", err)
	}
}

// maxScan bounds what one scan reads; the rest is read at the next poll.
const maxScan = 4 << 20

// enforcementWatch reads OpenSM's log from where it stopped and records every
// line saying a switch port's enforcement was cleared. It reads whole lines
// only, so an entry is never split between two scans.
type enforcementWatch struct {
	path string
	pos  opensm.Position
	f    *os.File // the file being read; across a rotation, the old one until it is read to its end
	// seenInSweep holds the lines an apply's sweep already recorded (see
	// recordEnforcement), so that the watch does not count them again.
	seenInSweep map[string]struct{}
	read        int64 // bytes of log read, for tests
}

// EnforcementRecorder records what the log said.
type EnforcementRecorder interface {
	RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error
}

func (w *enforcementWatch) scan(ctx context.Context, term int64, rec EnforcementRecorder, log *slog.Logger) error {
	if err := w.follow(ctx, term, rec, log); err != nil || w.f == nil {
		return err
	}
	_, err := w.readChunk(ctx, term, rec, log, -1)
	return err
}

// handOff moves the watch past span, a stretch of the log that an apply's
// sweep has read whole for cleared enforcement and whose lines are recorded
// (opensm.SweepResult.Scanned): the watch reads the log up to span.From
// itself, then goes on from span.To, so that the sweep's lines, one per port
// on a large fabric, are read once. Nothing is skipped: when the watch is not
// in span's file (a rotation), or cannot read up to span.From (the log
// shrank), it stays where it is and reads everything itself.
func (w *enforcementWatch) handOff(ctx context.Context, term int64, rec EnforcementRecorder, log *slog.Logger, span opensm.Span) error {
	if err := w.readUpTo(ctx, term, rec, log, opensm.Position{Inode: span.Inode, Offset: span.From}); err != nil || w.f == nil {
		return err
	}
	if w.pos.Inode != span.Inode || w.pos.Offset != span.From || span.To < span.From {
		return nil
	}
	// A file shorter than the span was truncated since the sweep read it:
	// what it holds now is new, and read from where the watch is.
	if fi, err := w.f.Stat(); err != nil || fi.Size() < span.To {
		return err
	}
	w.pos.Offset = span.To
	// The sweep's own lines were all in span: none is left for the watch to
	// meet again.
	w.seenInSweep = nil
	return nil
}

// readUpTo reads and records what the log holds from the watch's position up
// to to, when to is in the file the watch reads (otherwise, after a
// rotation, it only follows it as scan does); it stops early at a line still
// being written, or when the file was truncated in place: the rest is read
// from where it stopped.
func (w *enforcementWatch) readUpTo(ctx context.Context, term int64, rec EnforcementRecorder, log *slog.Logger, to opensm.Position) error {
	if err := w.follow(ctx, term, rec, log); err != nil || w.f == nil {
		return err
	}
	for w.pos.Inode == to.Inode && w.pos.Offset < to.Offset {
		before := w.pos.Offset
		progressed, err := w.readChunk(ctx, term, rec, log, to.Offset)
		if err != nil || !progressed || w.pos.Offset <= before {
			return err // no further, or truncated in place: read on from here
		}
	}
	return nil
}

// catchUp reads the log up to pos, the position an apply noted before its
// SIGHUP, in a goroutine of its own while the apply waits for OpenSM's
// sweep: what OpenSM logged since the last scan (on a large fabric, a heavy
// sweep of another cause logs a line per port) is then read during the
// sweep, not after it, when the jobs wait for it. The returned wait must be
// called before the watch is used again; it returns the reading's error.
// Nothing is skipped: what is left is read by handOff or the next scan.
func (w *enforcementWatch) catchUp(ctx context.Context, term int64, rec EnforcementRecorder, log *slog.Logger, pos opensm.Position) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- w.readUpTo(ctx, term, rec, log, pos) }()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { err = <-done })
		return err
	}
}

// follow opens the log, and follows a rotation by renaming: once the path
// names a new file that OpenSM writes to (it holds data: OpenSM reopened its
// log), the old file, still open, is read to its end first, so that no line
// logged before the rotation is missed.
func (w *enforcementWatch) follow(ctx context.Context, term int64, rec EnforcementRecorder, log *slog.Logger) error {
	cur, err := os.Stat(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // rotated away and not re-created yet: the old file may still grow
	}
	if err != nil {
		return err
	}
	inode := inodeOf(cur)
	if w.f != nil && (inode == w.pos.Inode || cur.Size() == 0) {
		return nil
	}
	if w.f != nil {
		for { // the old file's last lines
			progressed, err := w.readChunk(ctx, term, rec, log, -1)
			if err != nil {
				return err
			}
			if !progressed {
				break
			}
		}
		w.f.Close()
		w.f = nil
	}
	f, err := os.Open(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if inode = inodeOf(fi); w.pos.Inode != 0 && inode != w.pos.Inode {
		w.pos = opensm.Position{Inode: inode} // another file: all of it is new
	}
	w.pos.Inode, w.f = inode, f
	return nil
}

// close releases the open log file.
func (w *enforcementWatch) close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// readChunk reads and records what the open file holds past the position, at
// most maxScan bytes, and not past limit unless it is negative. progressed
// says the position moved.
func (w *enforcementWatch) readChunk(ctx context.Context, term int64, rec EnforcementRecorder, log *slog.Logger, limit int64) (progressed bool, err error) {
	f := w.f
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	inode := w.pos.Inode
	from := w.pos.Offset
	if fi.Size() < from {
		from = 0 // truncated in place (copytruncate, log_max_size): the whole file is new
	}
	n := min(fi.Size()-from, maxScan)
	if limit >= 0 {
		n = min(n, limit-from)
	}
	if n <= 0 {
		w.pos = opensm.Position{Inode: inode, Offset: from}
		return false, nil
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	w.read += n
	end := bytes.LastIndexByte(buf, '\n') + 1 // a line still being written waits
	if end == 0 && n < maxScan {
		return false, nil
	}
	if end == 0 {
		end = len(buf) // one enormous line: not OpenSM's, skip it
	}
	var found []opensm.EnforcementError
	if opensm.MayHoldEnforcementErrors(buf[:end]) { // most of the time, nothing to parse
		entries, err := opensm.ParseLog(bytes.NewReader(buf[:end]))
		if err != nil {
			return false, err
		}
		found = opensm.EnforcementErrors(entries)
	}
	kept := found[:0]
	for _, e := range found {
		if _, dup := w.seenInSweep[e.Line]; dup {
			delete(w.seenInSweep, e.Line)
			continue
		}
		kept = append(kept, e)
	}
	found = kept
	seen := make([]store.EnforcementSighting, len(found))
	for i, e := range found {
		seen[i] = store.EnforcementSighting{Switch: e.Switch, Port: e.Port, Line: e.Line}
	}
	if err := rec.RecordEnforcementErrors(ctx, term, seen); err != nil {
		return false, err // read again at the next poll
	}
	for _, e := range found {
		log.Error(EnforcementCleared, "switch_port", e.String(), "line", e.Line)
	}
	w.pos = opensm.Position{Inode: inode, Offset: from + int64(end)}
	return true, nil
}
