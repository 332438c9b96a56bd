package store

import (
	"context"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Changes that change nothing. A client that sends again what is recorded
// (a retry, or a hostile client padding requests to fill the disk) gets no
// revision and no job row of its own: it is answered with the newest job of
// the same object that it created, which it may poll (networking-mlnx) or
// whose outcome it is answered with (the pkeys API): Pending or Running
// until the change that recorded what it asks for is applied, then
// Completed. A change whose object has no such job, or whose newest job
// failed, is recorded as any other, so that what failed is applied and
// proven again.

// unchanged answers the change with the newest job of object (objectType,
// objectID) that createdBy created on the fabric, if there is one, it did
// not fail and it is at or after revision state, the revision of the rows
// the change finds as it asks them (0: the object's rows are its client's
// alone): the change then takes no revision and inserts no job (record
// returns that one). It says whether it did.
//
// A row written after the job (another client's change of the object, a
// port losing its GUID to another, its network moving to another pkey) is
// a change the job does not cover: answered with it, the client would be
// told Completed of what is maybe not applied yet, so such a change is
// recorded. It runs in the change's transaction, under the revision's lock
// (change.go): no change of the object comes between its reads and its
// answer, on this manager or another.
func (c *changeTx) unchanged(ctx context.Context, objectType, objectID, createdBy string, state int64) (bool, error) {
	j, err := c.q.NewestJobOf(ctx, objectID, objectType, c.fabric, createdBy)
	if driver.IsNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the newest job of %s %s: %w", objectType, objectID, err)
	}
	if j.Status == StatusFailed || j.Revision < state {
		return false, nil
	}
	if _, err := c.touches(ctx, false); err != nil {
		return false, err
	}
	c.reuse = &j
	return true, nil
}

// unchangedKubernetes is unchanged for a Kubernetes change of pkey object.
// Answered with a Completed job while every Kubernetes change is applied, it
// moves last_updated to the next whole second: ib-kubernetes reads it in
// whole seconds and holds its next change until it is after the server's
// time of its last call, which this change's answer follows. An open job
// moves it when it is applied.
func (c *changeTx) unchangedKubernetes(ctx context.Context, objectID, createdBy string, state int64) (bool, error) {
	ok, err := c.unchanged(ctx, ObjectPKey, objectID, createdBy, state)
	if err != nil || !ok || c.reuse.Status != StatusCompleted {
		return ok, err
	}
	at := c.now.UTC().Truncate(time.Second).Add(time.Second)
	if _, err := c.q.MarkKubernetesUnchanged(ctx, &at, c.fabric); err != nil {
		return false, fmt.Errorf("move last_updated: %w", err)
	}
	return true, nil
}
