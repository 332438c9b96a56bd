package store

import (
	"context"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A change that touches no partition (a network that has none before and after,
// a port that holds no membership before and after) is recorded at the current
// revision with its job already Completed: there is nothing for OpenSM to do.
// Every other change takes a new revision and its job completes once OpenSM has
// applied that revision (or a later one), but one that changes nothing of what
// is recorded, which is answered with its object's newest job (unchanged.go).

// changeTx is one change, in its group's transaction, and what it has
// decided so far.
type changeTx struct {
	tx
	// later is tx with its writes held back, sent with the change's next
	// statement (driver.ChangeTx.Later): for writes whose outcome the
	// change does not read before its next statement.
	later tx
	// rev is the revision the change takes, once known (revKnown): its
	// group learns the revision its bump took with its first read
	// (groupRevision), and the change's is that plus ahead.
	rev      int64
	revKnown bool
	group    *groupRevision
	ahead    int64 // the changes before it in the group that took a revision
	now      time.Time
	noOp     bool
	decided  bool
	// places is the change's proof obligation (places.go), written with
	// its job.
	places promised
	// reuse is the job a change that changes nothing is answered with
	// (unchanged.go): record inserts none.
	reuse *Job
	// noAdopted: the change found the fabric without adopted partitions
	// under the revision's lock (GetPortChange), so releaseGUIDs has none
	// to read (adopted.go).
	noAdopted bool
}

// promise states places the change touches and what each must hold once
// it is applied; the job's insert writes them (a change that touches no
// partition records none).
func (c *changeTx) promise(places ...Place) {
	for _, p := range places {
		c.places.add(p)
	}
}

// groupRevision is the revision a change group's bump took (next: the
// revision its first change takes), 0 until the group has read it. The bump
// is held, to go with the group's first read, which learns it (a port
// change's GetPortChange), or with the read of it that the first change
// needing it makes (knowRevision): a group spends no round trip on the
// bump's answer alone.
type groupRevision struct {
	next int64
}

// learnRevision gives the group the revision its bump took, as a read of the
// fabric's state row in the transaction found it (the row is the group's,
// locked by its bump, until the commit).
func (c *changeTx) learnRevision(next int64) {
	if c.group != nil && c.group.next == 0 {
		c.group.next = next
	}
}

// knowRevision sets c.rev, reading the revision the group's bump took if
// no statement of the group has learned it yet.
func (c *changeTx) knowRevision(ctx context.Context) error {
	if c.revKnown {
		return nil
	}
	if c.group.next == 0 {
		next, err := c.q.Revision(ctx, c.fabric)
		if err != nil {
			return fmt.Errorf("read the revision: %w", err)
		}
		c.group.next = next
	}
	c.rev, c.revKnown = c.group.next+c.ahead, true
	return nil
}

// touches decides, once, whether the change touches a partition, and returns
// the revision the change's rows carry.
func (c *changeTx) touches(ctx context.Context, partition bool) (int64, error) {
	if c.decided {
		return c.rev, nil
	}
	if err := c.knowRevision(ctx); err != nil {
		return 0, err
	}
	c.decided = true
	if !partition {
		// Given back when the group ends (commitGroup).
		c.rev--
		c.noOp = true
	}
	return c.rev, nil
}

// job inserts the change's job, which the change describes (its object,
// operation and texts), and returns the job as it now stands, sparing the
// caller a read of what it has just written. The change sets its Revision,
// times and Status (StatusPending, or StatusCompleted with FinishedAt for a
// change that touches no partition); the database its ID.
func (c *changeTx) job(ctx context.Context, j Job) (Job, error) {
	return c.insertJob(ctx, j, nil)
}

// insertJob is job; with heldID, the insert is held (driver.IDInto) to go
// with the transaction's next statement: the group's next change, or the
// COMMIT of a change alone in its group (commitOutcomes), so that a change
// whose job's id nothing in its transaction reads spends no round trip on
// it. The job returned then has no ID until the transaction has committed:
// the id is *heldID once it is sent, unless the engine sent the insert at
// once (the returned job's ID is then not 0).
func (c *changeTx) insertJob(ctx context.Context, j Job, heldID *int64) (Job, error) {
	j = boundJob(j)
	if err := c.knowRevision(ctx); err != nil {
		return Job{}, err
	}
	j.Revision, j.CreatedAt, j.UpdatedAt, j.Status = c.rev, c.now, c.now, StatusPending
	if c.noOp {
		j.Status, j.FinishedAt = StatusCompleted, &c.now
	}
	j.Fabric = c.fabric
	// Job ids are given across fabrics, whose changes do not wait for each
	// other's revision: the lock lasts from here to the commit. It is held
	// back (later) and sent with InsertJob, in one round trip, before it.
	if err := c.later.q.LockJobIDs(ctx); err != nil {
		return Job{}, fmt.Errorf("lock the job ids: %w", err)
	}
	q, ictx := c.q, ctx
	if heldID != nil {
		q, ictx = c.later.q, driver.IDInto(ctx, heldID)
	}
	var id int64
	var err error
	if c.noOp || len(c.places.places) == 0 {
		id, err = q.InsertJob(ictx, j)
	} else {
		// The places go in the job's row: one statement.
		id, err = q.InsertJobWithPlaces(ictx, j, driverPlaces(c.places.places))
	}
	if err != nil {
		return Job{}, err
	}
	j.ID = id
	return j, nil
}

// record runs fn as one change (see change) in the lane of g (s.groups, or
// s.kubeGroups for Kubernetes', see Lanes) and inserts the job fn describes:
// every Neutron and Kubernetes change ends with its job, which record returns
// as it now stands, once committed. The job's insert is the change's last
// statement, and its id is only answered after the COMMIT: the insert is
// held to go with it (insertJob), a round trip less on the server engines.
// Its error says what the change was ("record port") and of which object
// (id).
func (s *Store) record(ctx context.Context, g *changeGroups, what, id string, fn func(context.Context, *changeTx) (Job, error)) (Job, error) {
	var job Job
	var heldID int64 // the job's id, given when its held insert is sent
	err := s.changeIn(g, ctx, func(ctx context.Context, tx *changeTx) error {
		heldID = 0 // a run of the group again inserts anew
		j, err := fn(ctx, tx)
		if err != nil {
			return err
		}
		if tx.reuse != nil {
			job = *tx.reuse
			return nil
		}
		job, err = tx.insertJob(ctx, j, &heldID)
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("%s %s: %w", what, id, err)
	}
	if job.ID == 0 {
		job.ID = heldID // committed: sent at the latest with the COMMIT
	}
	if job.ID == 0 {
		// Never expected: an engine gives a held insert's id when it sends
		// it, at the latest with the COMMIT, which answered.
		return Job{}, fmt.Errorf("%s %s: recorded, but the database gave no id for its job", what, id)
	}
	return job, nil
}
