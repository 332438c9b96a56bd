package applier

import (
	"context"
	"errors"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The jobs' transaction of a clean sweep with verify = tables costs two
// round trips on PostgreSQL and MariaDB: the BEGIN, the apply's row and the
// gates' read, then the completions with the COMMIT. The first reads nothing
// of the proof, so it is sent while the read-back's SMPs are in flight
// (store.FinishApplyAwaiting), and only the second waits for the proof.
// What finish decides is decided as before, on what it read before: the
// transaction goes on only when the gates' read saw every enforcement
// record the term made before the proof, when nothing OpenSM logged during
// the reads waits to be recorded (finish would have recorded it first) and
// when nothing before the transaction would write to the database or hold
// the jobs otherwise (a capacity or places error, a freeze, a forget).
// Anything else, or a proof later than earlyFinishWait, rolls it back with
// nothing recorded, and the apply is finished as before, after the proof.
// SQLite's transaction would hold the one writer lock through the reads,
// every POST waiting behind it: there the apply is finished as before.

// earlyFinishWait bounds the transaction's wait for the proof: the reads
// of a port that does not answer take seconds, and on MariaDB the term's
// fence share-locks the lease's row meanwhile (its renewal waits for it).
const earlyFinishWait = 20 * time.Millisecond

// awaitingFinisher is a Store that can begin the jobs' transaction before
// the proof is known (store.Store).
type awaitingFinisher interface {
	FinishesBesideProof() bool
	FinishApplyAwaiting(ctx context.Context, a store.Apply, proof func(context.Context) *store.Proven,
		within time.Duration, open func(store.GateState) bool) (store.Finished, error)
}

// earlyFinish is one such transaction, begun (beginEarly) and ended
// (endEarly) by settleApplied.
type earlyFinish struct {
	a      store.Apply
	writes int64              // the term's enforcement records ended when it began
	proof  chan *store.Proven // endEarly's: the proof, or nil to roll back (never blocks)
	judge  *finishJudge       // set before the proof is given
	done   chan earlyDone
}

// earlyDone is the transaction's outcome.
type earlyDone struct {
	f   store.Finished
	err error
}

// beginEarly begins the jobs' transaction of run beside the read-back, or
// returns nil where it is not to be (SQLite; a sweep with errors, whose
// settling wrote before; a freeze, whose lift writes).
func (t *term) beginEarly(ctx context.Context, run *applyRun) *earlyFinish {
	s, ok := t.Store.(awaitingFinisher)
	if !run.clean || !ok || !s.FinishesBesideProof() || t.freeze.isFrozen() || t.reapply {
		return nil
	}
	e := &earlyFinish{a: t.row(run, string(opensm.Applied), run.detail), writes: t.gate.enforcement.writes.ended.Load(),
		proof: make(chan *store.Proven, 1), done: make(chan earlyDone, 1)}
	proof := func(wctx context.Context) *store.Proven {
		select {
		case p := <-e.proof:
			return p
		case <-wctx.Done():
			return nil
		}
	}
	open := func(gs store.GateState) bool { return e.judge.open(gs) } // called only once judge is set
	go func() {
		f, err := s.FinishApplyAwaiting(ctx, e.a, proof, earlyFinishWait, open)
		e.done <- earlyDone{f: f, err: err}
	}()
	return e
}

// endEarly gives e its proof, or rolls it back, and waits for its end (on
// every path: nothing of the apply outlives it). settled says whether it
// settled run (res); if not, nothing was recorded, and the caller settles
// run as if e had never begun.
func (t *term) endEarly(ctx context.Context, run *applyRun, e *earlyFinish, proven *store.Proven, proved bool,
	p finishPrep) (res applyResult, settled bool) {
	var give *store.Proven
	if proved {
		if e.judge = t.judgeEarly(ctx, e, p); e.judge != nil {
			give = &store.Proven{All: true} // nil proven: every job, as FinishApply completes them
			if proven != nil {
				give = proven
			}
		}
	}
	e.proof <- give
	d := <-e.done
	if give == nil || errors.Is(d.err, store.ErrNoProof) || (d.err == nil && !d.f.Recorded) {
		// Nothing recorded (a newer term's or a restore's answer is
		// the one the transaction after the proof gives again).
		return 0, false
	}
	n, ok := t.finished(ctx, e.a, e.judge, d.f, d.err)
	return t.completed(run, n, ok), true
}

// judgeEarly is judgeFinish for e, once the proof and prepareFinish are
// done, or nil when finish after the proof might decide otherwise than e's
// transaction would.
func (t *term) judgeEarly(ctx context.Context, e *earlyFinish, p finishPrep) *finishJudge {
	if p.capErr != nil || p.placesErr != nil {
		return nil // logged by finish after the proof
	}
	// What OpenSM logged during the reads: finish records it before it
	// reads the gates.
	if err := t.tail.Pump(); err != nil {
		return nil
	}
	if t.gate.enforcement.pending() || t.gate.duplicates.unrecorded() {
		return nil
	}
	// An enforcement record begun since the gates' read began may be
	// missing from it.
	if t.gate.enforcement.writes.begun.Load() != e.writes {
		return nil
	}
	// A freeze's detection or lift writes the lease's row, which on MariaDB
	// the transaction's fence holds.
	if t.freeze.isFrozen() || t.freeze.standbySeen() {
		return nil
	}
	j, ok := t.judgeFinish(ctx, e.a, p) // its forgets and pollFreeze write nothing now
	if !ok || j.reapply {
		return nil
	}
	return j
}
