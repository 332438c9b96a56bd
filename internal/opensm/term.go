package opensm

import (
	"errors"
	"fmt"
	"math"
)

// ErrTermStopped is a Start refused because OpenSM was stopped for that term
// (or a later one): only a newer term may start it again.
var ErrTermStopped = errors.New("opensm: stopped for this leadership term; only a newer term starts it again")

// TermLatch is what makes a Supervisor's stop for a term final. With the HA lease
// a term's work (the applier) and the stop at the end of the term (the lease's
// renewal, the moment the lease is in doubt) run concurrently: the work may
// reach its Start after the stop has run. Without a latch that Start would
// bring OpenSM back for a term that is over, and the manager would release the
// lease while its OpenSM runs. The latch remembers the latest term stopped;
// a Start for that term or an earlier one is refused, whatever the order in
// which the two arrive. The zero value has stopped no term.
//
// A TermLatch is not safe for concurrent use: its Supervisor keeps it under the
// lock that also guards starting and stopping, so that a Start and a Stop for
// the same term are ordered one way or the other, never interleaved.
type TermLatch struct {
	stopped bool
	through int64 // the latest term stopped, once stopped
}

// Allows says whether a start for term may proceed; the error is
// ErrTermStopped, naming the terms, when it may not.
func (l *TermLatch) Allows(term int64) error {
	if !l.stopped || term > l.through {
		return nil
	}
	if l.through == math.MaxInt64 {
		return fmt.Errorf("%w (OpenSM was stopped for good: the manager is shutting down)", ErrTermStopped)
	}
	return fmt.Errorf("%w (start for term %d, stopped through term %d)", ErrTermStopped, term, l.through)
}

// Stop latches term: no start for it or an earlier term proceeds afterwards.
func (l *TermLatch) Stop(term int64) {
	if !l.stopped || term > l.through {
		l.stopped, l.through = true, term
	}
}

// StopForGood latches every term: OpenSM is never started again.
func (l *TermLatch) StopForGood() { l.Stop(math.MaxInt64) }
