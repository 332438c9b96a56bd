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

// call runs one database call with its own deadline.
func (d deadlineStore) call(ctx context.Context, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return call(ctx)
}

// within is call for a call that returns a value.
func within[T any](ctx context.Context, d deadlineStore, call func(ctx context.Context) (T, error)) (T, error) {
	var v T
	err := d.call(ctx, func(ctx context.Context) (err error) {
		v, err = call(ctx)
		return err
	})
	return v, err
}

func (d deadlineStore) Revision(ctx context.Context) (int64, error) {
	return within(ctx, d, d.Store.Revision)
}

func (d deadlineStore) Snapshot(ctx context.Context) (store.Snapshot, error) {
	return within(ctx, d, d.Store.Snapshot)
}

func (d deadlineStore) ReadSnapshot(ctx context.Context, c *store.SnapshotCache) (store.Snapshot, error) {
	return within(ctx, d, func(ctx context.Context) (store.Snapshot, error) { return d.Store.ReadSnapshot(ctx, c) })
}

func (d deadlineStore) MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.Store.MarkJobsRunning(ctx, term, revision) })
}

func (d deadlineStore) FinishApply(ctx context.Context, a store.Apply, open func(store.GateState) bool) (store.Finished, error) {
	return within(ctx, d, func(ctx context.Context) (store.Finished, error) { return d.Store.FinishApply(ctx, a, open) })
}

func (d deadlineStore) FinishApplyProven(ctx context.Context, a store.Apply, p store.Proven, open func(store.GateState) bool) (store.Finished, error) {
	return within(ctx, d, func(ctx context.Context) (store.Finished, error) { return d.Store.FinishApplyProven(ctx, a, p, open) })
}

func (d deadlineStore) FailJobs(ctx context.Context, term, revision int64, reason string) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.Store.FailJobs(ctx, term, revision, reason) })
}

func (d deadlineStore) RecordApply(ctx context.Context, a store.Apply) (bool, error) {
	return within(ctx, d, func(ctx context.Context) (bool, error) { return d.Store.RecordApply(ctx, a) })
}

func (d deadlineStore) DeleteExpiredJobs(ctx context.Context, term int64, retention time.Duration) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.Store.DeleteExpiredJobs(ctx, term, retention) })
}

func (d deadlineStore) DeleteExpiredApplies(ctx context.Context, term int64, retention time.Duration) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.Store.DeleteExpiredApplies(ctx, term, retention) })
}

func (d deadlineStore) ExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error) {
	return within(ctx, d, d.Store.ExpectedSwitches)
}

func (d deadlineStore) EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error) {
	return within(ctx, d, d.Store.EnforcementErrors)
}

func (d deadlineStore) DuplicateGUIDs(ctx context.Context) ([]store.DuplicateGUID, error) {
	return within(ctx, d, d.Store.DuplicateGUIDs)
}

func (d deadlineStore) GUIDPlaces(ctx context.Context) ([]store.GUIDPlace, error) {
	return within(ctx, d, d.Store.GUIDPlaces)
}

func (d deadlineStore) RecordGUIDPlaces(ctx context.Context, term int64, seen []store.GUIDPlaceUpdate) ([]store.GUIDPlace, error) {
	return within(ctx, d, func(ctx context.Context) ([]store.GUIDPlace, error) { return d.Store.RecordGUIDPlaces(ctx, term, seen) })
}

func (d deadlineStore) AddGUIDPlaces(ctx context.Context, term int64, news []store.GUIDPlaceUpdate) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.Store.AddGUIDPlaces(ctx, term, news) })
}

func (d deadlineStore) RecordDuplicateGUIDs(ctx context.Context, term int64, seen []store.DuplicateSighting) error {
	return d.call(ctx, func(ctx context.Context) error { return d.Store.RecordDuplicateGUIDs(ctx, term, seen) })
}

func (d deadlineStore) ClearDuplicateGUIDs(ctx context.Context, term int64) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.Store.ClearDuplicateGUIDs(ctx, term) })
}

func (d deadlineStore) RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error {
	return d.call(ctx, func(ctx context.Context) error { return d.Store.RecordEnforcementErrors(ctx, term, seen) })
}

func (d deadlineStore) DescribeJob(ctx context.Context, term, id int64, description string) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.Store.DescribeJob(ctx, term, id, description) })
}

func (d deadlineStore) DescribeOpenJobs(ctx context.Context, term, revision int64, description string) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) {
		return d.Store.DescribeOpenJobs(ctx, term, revision, description)
	})
}

func (d deadlineStore) FailJob(ctx context.Context, term, id int64, reason string) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.Store.FailJob(ctx, term, id, reason) })
}

func (d deadlineStore) OpenJobs(ctx context.Context, revision int64) ([]store.OpenJob, error) {
	return within(ctx, d, func(ctx context.Context) ([]store.OpenJob, error) { return d.Store.OpenJobs(ctx, revision) })
}

func (d deadlineStore) GetJob(ctx context.Context, id int64) (store.Job, error) {
	return within(ctx, d, func(ctx context.Context) (store.Job, error) { return d.Store.GetJob(ctx, id) })
}

func (d deadlineStore) RecordSetFailures(ctx context.Context, term int64, ports []store.SetFailure) error {
	return d.call(ctx, func(ctx context.Context) error { return d.Store.RecordSetFailures(ctx, term, ports) })
}

func (d deadlineStore) SetFailures(ctx context.Context) ([]store.SetFailure, error) {
	return within(ctx, d, d.Store.SetFailures)
}
