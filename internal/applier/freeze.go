package applier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The freeze (HA only, docs/ha.md): a new leader starts its OpenSM once the
// previous lease expired or was released. If that OpenSM goes STANDBY instead
// of becoming master, another SM is master on the fabric: most likely the
// previous leader's OpenSM, still running because its manager hung (SIGSTOP, a
// stuck host) or lost the database, with its own idea of the partitions. No
// job completes then, since nothing proves the fabric holds what this term
// applies; the freeze names the manager to check (the suspect). An operator
// makes sure that OpenSM is gone and runs --unfreeze; the leader lifts the
// freeze once its own OpenSM is master, and applies everything again.
//
// A lease that merely expired is not a freeze: a manager killed with -9 took
// its OpenSM with it (the driver's parent-death signal), and the new leader's
// OpenSM becomes master by itself.

// LeaseStore is what the freeze needs of the HA lease.
type LeaseStore interface {
	ReadLease(ctx context.Context) (store.Lease, error)
	SetFreeze(ctx context.Context, term int64, reason string) (bool, error)
	LiftFreeze(ctx context.Context, term int64) (bool, error)
}

// Frozen starts the reason given to waiting jobs during a freeze.
const Frozen = "Frozen"

var (
	enteringMaster  = regexp.MustCompile(`^Entering MASTER state$`)
	enteringStandby = regexp.MustCompile(`^Entering (STANDBY|NOTACTIVE) state$`)
)

// freezeWatch follows this term's OpenSM's state in its log.
type freezeWatch struct {
	leases  LeaseStore
	suspect string // the manager to check, from the take
	path    string
	timeout time.Duration // of each database call
	mu      sync.Mutex    // detect runs beside the term's loop
	pos     opensm.Position
	// f is the file being read: across a rotation, the old one until it is
	// read to its end, so that a STANDBY line logged just before logrotate
	// renamed it is not missed.
	f       *os.File
	master  bool   // OpenSM's last state line said MASTER
	frozen  string // the freeze's reason; "" when none
	pending bool   // an --unfreeze waits for this OpenSM to be master
}

// newFreezeWatch returns a watch of the log at path from pos, its file open
// already: a rotation before the first scan does not hide what the file held
// after pos. A file that cannot be opened now is opened at the first scan
// (the error says why).
func newFreezeWatch(leases LeaseStore, suspect, path string, pos opensm.Position, timeout time.Duration) (*freezeWatch, error) {
	w := &freezeWatch{leases: leases, suspect: suspect, path: path, pos: pos, timeout: timeout}
	return w, w.open()
}

// close releases the open log file.
func (w *freezeWatch) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// open opens the file at path, if there is one. A file other than the
// position's is new: all of it is read.
func (w *freezeWatch) open() error {
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
	if inode := inodeOf(fi); inode != w.pos.Inode {
		w.pos = opensm.Position{Inode: inode}
	}
	w.f = f
	return nil
}

// scanState reads the state lines OpenSM logged since the last scan. Across
// a rotation by renaming, once the path names a new file that OpenSM writes
// to, the old file is read to its end (its last line too, newline or not)
// before the new one from its beginning; a file truncated in place is read
// from its beginning (what it held past the last scan is gone).
func (w *freezeWatch) scanState() (standby bool, err error) {
	if w.f == nil {
		if err := w.open(); err != nil || w.f == nil {
			return false, err
		}
	}
	for {
		// Looked for before reading: a new file with data means OpenSM
		// writes there, so the old one is whole once read to its end.
		next, err := w.rotated()
		if err != nil {
			return standby, err
		}
		if next == nil {
			seen, _, err := w.readState(false)
			return standby || seen, err
		}
		for {
			seen, progressed, err := w.readState(true)
			standby = standby || seen
			if err != nil {
				next.Close()
				return standby, err
			}
			if !progressed {
				break
			}
		}
		fi, err := next.Stat()
		if err != nil {
			next.Close()
			return standby, err
		}
		w.f.Close()
		w.f, w.pos = next, opensm.Position{Inode: inodeOf(fi)}
	}
}

// rotated returns the file the path names now when it is not the one being
// read and holds data (OpenSM reopened its log there); nil otherwise.
func (w *freezeWatch) rotated() (*os.File, error) {
	cur, err := os.Stat(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // moved away, no new file yet: the old one may still grow
	}
	if err != nil {
		return nil, err
	}
	if inodeOf(cur) == w.pos.Inode || cur.Size() == 0 {
		return nil, nil
	}
	f, err := os.Open(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return f, err
}

// readState reads the open file past the position, at most maxScan bytes,
// and reports a STANDBY state line in it. It reads whole lines only, unless
// whole says the file no longer grows. progressed says the position moved.
func (w *freezeWatch) readState(whole bool) (standby, progressed bool, err error) {
	fi, err := w.f.Stat()
	if err != nil {
		return false, false, err
	}
	from := w.pos.Offset
	if fi.Size() < from {
		from = 0 // truncated in place (copytruncate, log_max_size)
	}
	n := min(fi.Size()-from, maxScan)
	if n <= 0 {
		w.pos.Offset = from
		return false, false, nil
	}
	buf := make([]byte, n)
	if _, err := w.f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return false, false, err
	}
	end := bytes.LastIndexByte(buf, '\n') + 1
	if whole && from+n == fi.Size() {
		end = len(buf) // the old file's last line, which nothing will finish
	}
	if end == 0 && n < maxScan {
		return false, false, nil
	}
	if end == 0 {
		end = len(buf)
	}
	w.pos.Offset = from + int64(end)
	if !bytes.Contains(buf[:end], []byte(" state")) {
		return false, true, nil
	}
	entries, err := opensm.ParseLog(bytes.NewReader(buf[:end]))
	if err != nil {
		return false, true, err
	}
	for _, e := range entries {
		switch {
		case enteringMaster.MatchString(e.Message):
			w.master = true
		case enteringStandby.MatchString(e.Message):
			w.master, standby = false, true
		}
	}
	return standby, true, nil
}

// detect records a freeze when OpenSM went STANDBY since the last look. It
// runs beside the term's loop too (watchFreeze), since an apply can wait a
// whole sweep timeout for a sweep a STANDBY OpenSM never makes.
func (w *freezeWatch) detect(ctx context.Context, t *term) {
	w.mu.Lock()
	defer w.mu.Unlock()
	standby, err := w.scanState()
	if err != nil {
		t.Log.Error("read OpenSM's log for its SM state", "error", err)
	}
	if !standby {
		if w.frozen != "" {
			w.describe(ctx, t) // the jobs sent since
		}
		return
	}
	reason := fmt.Sprintf("%s: this manager's OpenSM went STANDBY instead of master, so another SM is master on the fabric; "+
		"make sure the OpenSM of %s is stopped, then run --unfreeze (docs/ha.md)", Frozen, suspectName(w.suspect))
	if w.frozen == "" {
		t.Log.Error("freeze: this manager's OpenSM went STANDBY: another SM is master; no job completes until --unfreeze",
			"suspect", w.suspect)
	}
	w.frozen = reason
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if _, err := w.leases.SetFreeze(ctx, t.id, reason); err != nil {
		t.Log.Error("record the freeze", "error", err)
	}
	w.describe(ctx, t)
}

// describe tells every open job why it waits (networking-mlnx and DBAs read
// it there), fenced by the term.
func (w *freezeWatch) describe(ctx context.Context, t *term) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if _, err := t.Store.DescribeOpenJobs(ctx, t.id, math.MaxInt64, "Not completing: "+w.frozen); err != nil {
		t.Log.Error("describe the jobs waiting for the freeze", "error", err)
	}
}

// isFrozen says whether the term is frozen: it applies nothing then, since
// its OpenSM, STANDBY, would not sweep.
func (w *freezeWatch) isFrozen() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.frozen != ""
}

// watchFreeze runs detect every interval until ctx ends.
func (w *freezeWatch) watchFreeze(ctx context.Context, t *term, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.detect(ctx, t)
		}
	}
}

// pollFreeze updates the freeze: it freezes when OpenSM went STANDBY, and
// lifts a freeze an operator asked to lift once OpenSM is master. It returns
// the reason jobs may not complete now, "" when they may. The jobs of a term
// whose freeze was just lifted wait for the full apply that follows.
func (t *term) pollFreeze(ctx context.Context) string {
	w := t.freeze
	if w == nil {
		return ""
	}
	w.detect(ctx, t)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.frozen == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	lease, err := w.leases.ReadLease(ctx)
	if err != nil {
		t.Log.Error("read the lease for an unfreeze", "error", err)
		return w.frozen
	}
	if !lease.UnfreezeRequested {
		return w.frozen
	}
	if !w.master {
		if !w.pending {
			t.Log.Warn("unfreeze pending: this manager's OpenSM is not master yet", "suspect", w.suspect)
		}
		w.pending = true
		return w.frozen
	}
	lifted, err := w.leases.LiftFreeze(ctx, t.id)
	if err != nil || !lifted {
		if err != nil {
			t.Log.Error("lift the freeze", "error", err)
		}
		return w.frozen
	}
	t.Log.Info("freeze lifted: this manager's OpenSM is master; applying the recorded state again")
	w.frozen, w.pending, w.suspect = "", false, ""
	// Whatever the other SM left, this OpenSM now sweeps the recorded state,
	// and the jobs wait for that sweep, not for one seen while frozen.
	t.reapply = true
	t.gate.blocked, t.gate.said = 0, ""
	return "the freeze was lifted: applying the recorded state again"
}

func suspectName(s string) string {
	if s == "" {
		return "the previous leader (or any other SM on the fabric)"
	}
	return s
}
