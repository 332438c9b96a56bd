package applier

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

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

// freezeWatch follows this term's OpenSM's state in its log, as the term's
// tail hands out its entries (observe).
type freezeWatch struct {
	leases  LeaseStore   // the term's, each call with its deadline (deadlineStore)
	suspect string       // the manager to check, from the take
	tail    *opensm.Tail // the term's: scanState pumps it
	mu      sync.Mutex   // detect runs beside the term's loop
	frozen  string       // the freeze's reason; "" when none
	pending bool         // an --unfreeze waits for this OpenSM to be master
	// seen is what the state lines said, kept by observe, which runs in
	// whichever goroutine pumps the tail: apart from mu, which is held
	// across database calls.
	seen struct {
		sync.Mutex
		master  bool // OpenSM's last state line said MASTER
		standby bool // a STANDBY line since the last scanState
	}
}

// newFreezeWatch returns a watch; the term's tail is set once opened with
// its observe.
func newFreezeWatch(leases LeaseStore, suspect string) *freezeWatch {
	return &freezeWatch{leases: leases, suspect: suspect}
}

// observe is the tail's handler: it keeps what a state line says.
func (w *freezeWatch) observe(e opensm.Entry) {
	if !strings.HasPrefix(e.Message, "Entering ") {
		return // most entries: no regular expression for them
	}
	w.seen.Lock()
	defer w.seen.Unlock()
	switch {
	case enteringMaster.MatchString(e.Message):
		w.seen.master = true
	case enteringStandby.MatchString(e.Message):
		w.seen.master, w.seen.standby = false, true
	}
}

// scanState reads what OpenSM logged since the last look (the tail follows
// rotation and truncation) and says whether a STANDBY state line was among
// it, or came since the last scan through another reader of the tail.
func (w *freezeWatch) scanState() (standby bool, err error) {
	err = w.tail.Pump()
	w.seen.Lock()
	defer w.seen.Unlock()
	standby, w.seen.standby = w.seen.standby, false
	return standby, err
}

// standbySeen says whether a STANDBY state line waits for the next look
// (detect), which records a freeze.
func (w *freezeWatch) standbySeen() bool {
	if w == nil {
		return false
	}
	w.seen.Lock()
	defer w.seen.Unlock()
	return w.seen.standby
}

// isMaster says whether OpenSM's last state line said MASTER.
func (w *freezeWatch) isMaster() bool {
	w.seen.Lock()
	defer w.seen.Unlock()
	return w.seen.master
}

// detect records a freeze when OpenSM went STANDBY since the last look. It
// runs beside the term's loop too (the freeze watch service), since an apply
// can wait a whole sweep timeout for a sweep a STANDBY OpenSM never makes.
// While frozen, every open job (those sent since too) says why it waits, in
// the words of the whole verdict.
func (w *freezeWatch) detect(ctx context.Context, t *watchEnv) {
	if w.detectLocked(ctx, t) {
		t.report.describeHeld(ctx) // outside mu: the description reads the freeze's reason
	}
}

// detectLocked is detect's look and record, under mu; frozen says whether
// the term is frozen.
func (w *freezeWatch) detectLocked(ctx context.Context, t *watchEnv) (frozen bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	standby, err := w.scanState()
	if err != nil {
		t.Log.Error("read OpenSM's log for its SM state", "error", err)
	}
	if !standby {
		return w.frozen != "" // the jobs sent since are described
	}
	reason := fmt.Sprintf("%s: this manager's OpenSM went STANDBY instead of master, so another SM is master on the fabric; "+
		"make sure the OpenSM of %s is stopped, then run --unfreeze (docs/ha.md)", Frozen, suspectName(w.suspect))
	if w.frozen == "" {
		t.Log.Error("freeze: this manager's OpenSM went STANDBY: another SM is master; no job completes until --unfreeze",
			"suspect", w.suspect)
	}
	w.frozen = reason
	if _, err := w.leases.SetFreeze(ctx, t.id, reason); err != nil {
		t.Log.Error("record the freeze", "error", err)
	}
	return true
}

// reason is the freeze's reason, the verdict's evidence; "" when not frozen.
func (w *freezeWatch) reason() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.frozen
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

// pollFreeze updates the freeze: it freezes when OpenSM went STANDBY, and
// lifts a freeze an operator asked to lift once OpenSM is master. It returns
// the reason jobs may not complete now, "" when they may. The jobs of a term
// whose freeze was just lifted wait for the full apply that follows.
func (t *term) pollFreeze(ctx context.Context) string {
	w := t.freeze
	if w == nil {
		return ""
	}
	w.detect(ctx, t.watchEnv())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.frozen == "" {
		return ""
	}
	lease, err := w.leases.ReadLease(ctx)
	if err != nil {
		t.Log.Error("read the lease for an unfreeze", "error", err)
		return w.frozen
	}
	if !lease.UnfreezeRequested {
		return w.frozen
	}
	if !w.isMaster() {
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
	t.forget("the freeze was lifted")
	return "the freeze was lifted: applying the recorded state again"
}

func suspectName(s string) string {
	if s == "" {
		return "the previous leader (or any other SM on the fabric)"
	}
	return s
}
