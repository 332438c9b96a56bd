package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Group commit. Changes serialize on the revision's row lock: the applier
// completes "every job up to revision R" once it has applied R, which is only
// right if revisions commit in order. One change per transaction made each
// change pay a transaction of its own (BEGIN, the lock, COMMIT) while the
// others waited, so a process now commits the changes that wait together:
// one committer at a time takes every change queued (up to maxGroup) and runs
// them in one transaction, in order, each in a savepoint of its own, each
// judged by the state its predecessors leave. Each keeps its own revision
// and job; a refused change rolls back to its savepoint, changing nothing and
// failing no other; the group commits once and wakes the applier once. A
// commit that fails fails every change of the group with its error, and
// none is applied, unless the database aborted it for a conflict with a
// concurrent transaction (Galera's certification, a deadlock): then the
// whole group runs again (commitGroup). The row lock still orders the groups
// of several managers sharing the database.
//
// Lanes. Kubernetes' changes (the pkeys API) queue in a lane of their own,
// each alone in its group: one may hold thousands of GUIDs, whose checks take
// the group past its deadline, and a group that fails fails every change in
// it. networking-mlnx's changes never share a transaction with one, so none
// of theirs fails or waits for the commit of a group it shares with one; they
// still take the revision's row lock in turn, which orders every lane's
// transactions. ib-kubernetes sends one change at a time: it loses nothing by
// never being grouped.

// maxGroup bounds a group: its changes hold the revision's lock for as long
// as they all take, and PostgreSQL keeps the subtransactions of up to 64
// savepoints per transaction in shared memory (more slow every snapshot).
const maxGroup = 32

// pendingChange is one change waiting for its group, and its caller.
type pendingChange struct {
	ctx  context.Context
	fn   func(ctx context.Context, c *changeTx) error
	now  func() time.Time // the clock of the caller's store (WithClock)
	done chan error       // the change's outcome; buffered, never blocks the committer
}

// changeGroups is a store's queue of changes of one lane and whether a
// committer runs. The zero value is ready to use.
type changeGroups struct {
	mu        sync.Mutex
	queue     []*pendingChange
	committer bool
	max       int // the most changes of a group; 0: maxGroup
}

// change runs fn in a change transaction shared with the changes queued
// beside it (see Group commit above). fn reports through c.touches whether
// what it recorded touches a partition; if not, its revision is given back
// and the jobs it inserts through c are Completed at once. fn runs its
// statements with the ctx it is given, the group's: once the committer has
// taken it, a change's outcome is what the commit says, whatever becomes of
// its caller's context. fn does no I/O but the transaction's: whatever it
// needs from elsewhere is read before. fn may run more than once (a
// transaction the database aborted for a conflict runs again, commitGroup):
// each run starts from what fn captured, which it only reads, and sets its
// results anew. A caller whose context ends while its
// change still waits is answered with the context's error, and its change
// is dropped.
func (s *Store) change(ctx context.Context, fn func(ctx context.Context, c *changeTx) error) error {
	return s.changeIn(s.groups, ctx, fn)
}

// changeIn is change in the lane of g.
func (s *Store) changeIn(g *changeGroups, ctx context.Context, fn func(ctx context.Context, c *changeTx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("wait for the previous change: %w", err)
	}
	p := &pendingChange{ctx: ctx, fn: fn, now: s.now, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	lead := !g.committer
	g.committer = true
	g.mu.Unlock()
	if lead {
		// No committer runs, so the queue held nothing: this caller commits
		// its own group (no hand-over to another goroutine for a change
		// alone), then leaves the changes queued meanwhile to a committer.
		s.commitGroup(g.take())
		if g.more() {
			go s.commitGroups(g)
		}
		return <-p.done
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		if g.drop(p) {
			return fmt.Errorf("wait for the previous change: %w", ctx.Err())
		}
		return <-p.done // taken: the commit decides
	}
}

// drop takes p out of the queue if it is still there.
func (g *changeGroups) drop(p *pendingChange) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, q := range g.queue {
		if q == p {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return true
		}
	}
	return false
}

// take removes the next group from the queue: up to maxGroup changes whose
// callers still wait (the others are answered with their context's error).
func (g *changeGroups) take() []*pendingChange {
	g.mu.Lock()
	defer g.mu.Unlock()
	limit := g.max
	if limit <= 0 {
		limit = maxGroup
	}
	var group []*pendingChange
	for len(g.queue) > 0 && len(group) < limit {
		p := g.queue[0]
		g.queue[0] = nil
		g.queue = g.queue[1:]
		if err := p.ctx.Err(); err != nil {
			p.done <- fmt.Errorf("wait for the previous change: %w", err)
			continue
		}
		group = append(group, p)
	}
	return group
}

// more says whether changes wait; if none, the committer ends (under the
// same lock, so that the next change finds none and commits itself).
func (g *changeGroups) more() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.committer = false
		g.queue = nil
		return false
	}
	return true
}

// commitGroups commits group after group of g until its queue is empty.
func (s *Store) commitGroups(g *changeGroups) {
	for {
		s.commitGroup(g.take())
		if !g.more() {
			return
		}
	}
}

// commitGroup runs group in one change transaction and answers each change
// with its outcome. A transaction the database aborted for a conflict with
// another one (IsConflict: nothing of it was kept) is run again from its
// start, every change of it judged anew, after a jittered back-off, for at
// most conflictAttempts attempts and conflictBudget (and never past the
// group's deadline); then each change is answered a ConflictError. The
// changes whose callers have gone meanwhile are dropped before an attempt,
// as a change still queued is: nothing of them was recorded.
func (s *Store) commitGroup(group []*pendingChange) {
	if len(group) == 0 {
		return
	}
	ctx, cancel := groupContext(group)
	defer cancel()
	started := time.Now()
	for attempt := 1; ; attempt++ {
		outcomes, err := s.commitOutcomes(ctx, group)
		if IsConflict(err) {
			if conflictRetry(ctx, attempt, started) {
				if group = stillWaiting(group); len(group) == 0 {
					return
				}
				continue
			}
			for i := range outcomes {
				outcomes[i] = &ConflictError{Attempts: attempt, Err: err}
			}
		}
		for i, outcome := range outcomes {
			group[i].done <- outcome
		}
		return
	}
}

// Conflicts. On MariaDB Galera every change writes the revision's row, so
// two managers on two nodes that commit changes at the same moment conflict:
// the cluster certifies one and aborts the other (error 1213), and a node's
// reads may lag the cluster's last commit for a moment, which makes the next
// attempt conflict again until the node has applied it. PostgreSQL and InnoDB
// may end a deadlock's victim likewise. The attempts are bounded so that an
// answer comes well within the request's deadline (the API's is 5 s).
const (
	conflictAttempts   = 8
	conflictBudget     = 3 * time.Second
	conflictBackoff    = 10 * time.Millisecond // before the second attempt; doubles
	conflictBackoffMax = 320 * time.Millisecond
)

// ConflictError is a change whose transaction the database aborted for a
// conflict with concurrent ones at every attempt: nothing of it is recorded,
// and it can be sent again (the API answers 503).
type ConflictError struct {
	Attempts int
	Err      error // the last attempt's
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("the database aborted the change's transaction %d times for conflicting with concurrent "+
		"changes (through other managers or database nodes); nothing was recorded: %v", e.Attempts, e.Err)
}

func (e *ConflictError) Unwrap() error { return e.Err }

// conflictRetry waits before the attempt after attempt, and says whether to
// make it: not past conflictAttempts, conflictBudget since started, or the
// group's deadline. The wait doubles from conflictBackoff up to
// conflictBackoffMax, each a random time between half of it and all of it,
// so that two managers whose transactions conflicted do not collide again.
func conflictRetry(ctx context.Context, attempt int, started time.Time) bool {
	if attempt >= conflictAttempts {
		return false
	}
	limit := min(conflictBackoff<<(attempt-1), conflictBackoffMax)
	wait := limit/2 + rand.N(limit/2+1)
	until := time.Now().Add(wait)
	if until.Sub(started) > conflictBudget {
		return false
	}
	if deadline, ok := ctx.Deadline(); ok && until.After(deadline) {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stillWaiting answers the changes of group whose callers have gone with
// their context's error, and returns the others.
func stillWaiting(group []*pendingChange) []*pendingChange {
	var waiting []*pendingChange
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.done <- fmt.Errorf("wait for the previous change: %w", err)
			continue
		}
		waiting = append(waiting, p)
	}
	return waiting
}

// commitOutcomes runs group in one change transaction, once, and returns
// each change's outcome and the transaction's error.
func (s *Store) commitOutcomes(ctx context.Context, group []*pendingChange) ([]error, error) {
	outcomes := make([]error, len(group))
	// The revision the group leaves, given to this process's applier with
	// its wake-up once the COMMIT has answered (driver.LocalWake).
	var committed driver.Committed
	err := s.d.InChangeTx(driver.WithCommitted(ctx, &committed), func(q driver.ChangeTx) error {
		// The UPDATE comes first: its row lock orders the writers of every
		// process sharing the database (on MariaDB, InnoDB's read view is only
		// taken at the first plain read, after the lock is ours). It is held,
		// to go with the first change's first statement, which runs after it
		// (in the same batch, or multi-statement query) and is the first to
		// learn the revision it took (groupRevision). Its error is that
		// statement's: the change's savepoint, after it, never ran, so the
		// transaction fails (a conflict runs the whole group again).
		if err := q.Later().BumpRevisionLater(ctx, s.FabricName()); err != nil {
			return fmt.Errorf("bump revision: %w", err)
		}
		g := &groupRevision{}
		var taken int64 // the changes so far that took a revision
		for i, p := range group {
			c := &changeTx{tx: tx{q, s.FabricName()}, later: tx{q.Later(), s.FabricName()}, group: g, ahead: taken, now: p.now()}
			// What the change left held is sent before the next change
			// starts: its error is this change's. A change alone leaves it
			// to go with the COMMIT (its job's insert, record): an error of
			// it fails the commit, which fails the change as a refusal
			// would, with the whole transaction.
			run := func() error {
				if err := p.fn(ctx, c); err != nil || len(group) == 1 {
					return err
				}
				return q.Flush(ctx)
			}
			if len(group) == 1 {
				// Alone, a refusal rolls the whole transaction back.
				if err := run(); err != nil {
					outcomes[i] = err
					return err
				}
			} else {
				if err := q.Savepoint(ctx); err != nil {
					return fmt.Errorf("savepoint: %w", err)
				}
				if err := run(); err != nil {
					outcomes[i] = err
					if IsConflict(err) {
						// The database ended the whole transaction (InnoDB,
						// Galera), or will not commit it: all again.
						return err
					}
					if rerr := q.RollbackToSavepoint(ctx); rerr != nil {
						return fmt.Errorf("roll back a refused change (%v): %w", err, rerr)
					}
					continue
				}
			}
			if !c.noOp {
				taken++
			}
		}
		return s.endGroupRevision(ctx, q, g, taken, &committed)
	})
	if err != nil {
		// Nothing of the group is recorded: the changes not refused on their
		// own fail with the transaction.
		for i := range outcomes {
			if outcomes[i] == nil {
				outcomes[i] = err
			}
		}
		answerGivenUp(ctx, outcomes)
	}
	return outcomes, err
}

// endGroupRevision sets the fabric's revision to the last one a change of
// the group took (the bump took one for the first: the changes that touch
// no partition, and refused ones, give theirs back), held to go with the
// COMMIT, and says it to committed. A group none of whose changes read the
// revision reads it now.
func (s *Store) endGroupRevision(ctx context.Context, q driver.ChangeTx, g *groupRevision, taken int64, committed *driver.Committed) error {
	if g.next == 0 {
		next, err := q.Revision(ctx, s.FabricName())
		if err != nil {
			return fmt.Errorf("read the revision: %w", err)
		}
		g.next = next
	}
	rev := g.next - 1 + taken
	if rev != g.next {
		if err := q.Later().SetRevision(ctx, s.FabricName(), rev); err != nil {
			return fmt.Errorf("set revision: %w", err)
		}
	}
	committed.Set(s.FabricName(), rev)
	return nil
}

// answerGivenUp gives the group's deadline as the cause of every outcome of a
// transaction that failed once it had passed. The group's deadline is its
// last caller's (groupContext): every caller has given up. A driver ends a
// statement the deadline cut short by closing its connection, and the
// change under way then fails as "bad connection", or a change after it as
// refused: the cause is the callers' deadline, which they are answered with,
// as a change still queued is.
func answerGivenUp(ctx context.Context, outcomes []error) {
	cerr := ctx.Err()
	if cerr == nil {
		return
	}
	for i, o := range outcomes {
		if !errors.Is(o, cerr) {
			outcomes[i] = fmt.Errorf("%w: %w", cerr, o)
		}
	}
}

// groupContext is the context a group's statements run with: its first
// caller's values, none of its callers' cancellations (a change taken is
// answered by the commit), and the latest deadline among them, so that a
// group never outlasts the patience of every caller it serves. With a caller
// that has no deadline, the group has none.
func groupContext(group []*pendingChange) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(group[0].ctx)
	var latest time.Time
	for _, p := range group {
		d, ok := p.ctx.Deadline()
		if !ok {
			return context.WithCancel(ctx)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(ctx, latest)
}

// QueuedChanges is how many changes wait for a group to take them, in every
// lane (the changes of the groups being committed are no longer queued).
func (s *Store) QueuedChanges() int {
	n := 0
	for _, g := range []*changeGroups{s.groups, s.kubeGroups} {
		g.mu.Lock()
		n += len(g.queue)
		g.mu.Unlock()
	}
	return n
}
