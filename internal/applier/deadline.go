package applier

import (
	"context"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// DefaultDBTimeout bounds each database call of the applier when
// Config.DBTimeout is 0.
const DefaultDBTimeout = 10 * time.Second

// deadlineStore gives every database call its own deadline, so that a
// black-holed connection (a cut link, a server that froze) cannot hang the
// term: the call fails, is logged, and the term goes on or ends.
type deadlineStore struct {
	Store
	timeout time.Duration
}

func (d deadlineStore) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout)
}

func (d deadlineStore) Revision(ctx context.Context) (int64, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.Revision(ctx)
}

func (d deadlineStore) Snapshot(ctx context.Context) (store.Snapshot, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.Snapshot(ctx)
}

func (d deadlineStore) ReadSnapshot(ctx context.Context, c *store.SnapshotCache) (store.Snapshot, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.ReadSnapshot(ctx, c)
}

func (d deadlineStore) MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.MarkJobsRunning(ctx, term, revision)
}

func (d deadlineStore) FinishApply(ctx context.Context, a store.Apply, open func(store.GateState) bool) (store.Finished, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.FinishApply(ctx, a, open)
}

func (d deadlineStore) FailJobs(ctx context.Context, term, revision int64, reason string) (int64, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.FailJobs(ctx, term, revision, reason)
}

func (d deadlineStore) RecordApply(ctx context.Context, a store.Apply) (bool, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.RecordApply(ctx, a)
}

func (d deadlineStore) DeleteExpiredJobs(ctx context.Context, term int64, retention time.Duration) (int64, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.DeleteExpiredJobs(ctx, term, retention)
}

func (d deadlineStore) DeleteExpiredApplies(ctx context.Context, term int64, retention time.Duration) (int64, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.DeleteExpiredApplies(ctx, term, retention)
}

func (d deadlineStore) ExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.ExpectedSwitches(ctx)
}

func (d deadlineStore) EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.EnforcementErrors(ctx)
}

func (d deadlineStore) RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.RecordEnforcementErrors(ctx, term, seen)
}

func (d deadlineStore) DescribeOpenJobs(ctx context.Context, term, revision int64, description string) (int64, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.DescribeOpenJobs(ctx, term, revision, description)
}

func (d deadlineStore) FailJob(ctx context.Context, term, id int64, reason string) (int64, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.FailJob(ctx, term, id, reason)
}

func (d deadlineStore) OpenJobs(ctx context.Context, revision int64) ([]store.OpenJob, error) {
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	return d.Store.OpenJobs(ctx, revision)
}
