package applier

import (
	"context"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// DefaultDBTimeout bounds each database call of the applier when
// Config.DBTimeout is 0.
const DefaultDBTimeout = 10 * time.Second

// deadlineStore is a term's view of the database: every call the term and
// its services make (the applier's Store, the lease's freeze, the second
// SM's and the audit's records) goes through it and gets its own deadline,
// so that a black-holed connection (a cut link, a server that froze) cannot
// hang the term: the call fails, is logged, and the term goes on or ends.
//
// It holds the stores as named fields, never embedded: a method added to
// one of the interfaces does not compile until it is written here, with its
// deadline (deadline_test.go holds every method to it).
type deadlineStore struct {
	store     Store
	leases    LeaseStore    // nil without the HA lease
	secondSMs SecondSMStore // nil without the second-SM look
	audits    AuditRecorder // nil without an audit's record
	timeout   time.Duration
}

var (
	_ Store         = deadlineStore{}
	_ LeaseStore    = deadlineStore{}
	_ SecondSMStore = deadlineStore{}
	_ AuditRecorder = deadlineStore{}
)

// withDeadlines is a with its stores seen through one deadlineStore of
// Cfg.DBTimeout: the term's, set once when it starts.
func (a *Applier) withDeadlines() *Applier {
	b := *a
	d := deadlineStore{store: a.Store, leases: a.Lease, audits: a.Cfg.Audit.Recorder, timeout: a.Cfg.DBTimeout}
	if d.timeout <= 0 {
		d.timeout = DefaultDBTimeout
	}
	var check *SecondSMCheck
	if a.SecondSM != nil {
		c := *a.SecondSM // the term's copy: the applier's is shared by its terms
		check, d.secondSMs = &c, c.Store
	}
	b.Store, b.SecondSM = d, check
	if a.Lease != nil {
		b.Lease = d
	}
	if a.Cfg.Audit.Recorder != nil {
		b.Cfg.Audit.Recorder = d
	}
	if check != nil && check.Store != nil {
		check.Store = d
	}
	return &b
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

// Wake is the one call without a deadline: its channel is the term's
// wake-up for the term's whole life, not a call that returns.
func (d deadlineStore) Wake(ctx context.Context) <-chan struct{} {
	return d.store.Wake(ctx)
}

// TakeCommitted is the store's (store.Store.TakeCommitted), if it has it: no
// deadline, as it reads no database.
func (d deadlineStore) TakeCommitted() (int64, bool) {
	if c, ok := d.store.(committedTaker); ok {
		return c.TakeCommitted()
	}
	return 0, false
}

func (d deadlineStore) Revision(ctx context.Context) (int64, error) {
	return within(ctx, d, d.store.Revision)
}

func (d deadlineStore) Snapshot(ctx context.Context) (store.Snapshot, error) {
	return within(ctx, d, d.store.Snapshot)
}

func (d deadlineStore) ReadSnapshot(ctx context.Context, c *store.SnapshotCache) (store.Snapshot, error) {
	return within(ctx, d, func(ctx context.Context) (store.Snapshot, error) { return d.store.ReadSnapshot(ctx, c) })
}

func (d deadlineStore) MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.store.MarkJobsRunning(ctx, term, revision) })
}

func (d deadlineStore) FinishApply(ctx context.Context, a store.Apply, open func(store.GateState) bool) (store.Finished, error) {
	return within(ctx, d, func(ctx context.Context) (store.Finished, error) { return d.store.FinishApply(ctx, a, open) })
}

func (d deadlineStore) FinishApplyProven(ctx context.Context, a store.Apply, p store.Proven, open func(store.GateState) bool) (store.Finished, error) {
	return within(ctx, d, func(ctx context.Context) (store.Finished, error) { return d.store.FinishApplyProven(ctx, a, p, open) })
}

// FinishesBesideProof is the store's (store.Store.FinishesBesideProof), if
// it has FinishApplyAwaiting: no deadline, as it reads no database.
func (d deadlineStore) FinishesBesideProof() bool {
	s, ok := d.store.(awaitingFinisher)
	return ok && s.FinishesBesideProof()
}

// FinishApplyAwaiting is the store's; only called when FinishesBesideProof.
func (d deadlineStore) FinishApplyAwaiting(ctx context.Context, a store.Apply, proof func(context.Context) *store.Proven,
	wait time.Duration, open func(store.GateState) bool) (store.Finished, error) {
	return within(ctx, d, func(ctx context.Context) (store.Finished, error) {
		return d.store.(awaitingFinisher).FinishApplyAwaiting(ctx, a, proof, wait, open)
	})
}

func (d deadlineStore) FailJobs(ctx context.Context, term, revision int64, reason string) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.store.FailJobs(ctx, term, revision, reason) })
}

func (d deadlineStore) RecordApply(ctx context.Context, a store.Apply) (bool, error) {
	return within(ctx, d, func(ctx context.Context) (bool, error) { return d.store.RecordApply(ctx, a) })
}

func (d deadlineStore) DeleteExpiredJobs(ctx context.Context, term int64, retention time.Duration) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.store.DeleteExpiredJobs(ctx, term, retention) })
}

func (d deadlineStore) DeleteExpiredApplies(ctx context.Context, term int64, retention time.Duration) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.store.DeleteExpiredApplies(ctx, term, retention) })
}

func (d deadlineStore) ExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error) {
	return within(ctx, d, d.store.ExpectedSwitches)
}

func (d deadlineStore) EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error) {
	return within(ctx, d, d.store.EnforcementErrors)
}

func (d deadlineStore) DuplicateGUIDs(ctx context.Context) ([]store.DuplicateGUID, error) {
	return within(ctx, d, d.store.DuplicateGUIDs)
}

func (d deadlineStore) GUIDPlaces(ctx context.Context) ([]store.GUIDPlace, error) {
	return within(ctx, d, d.store.GUIDPlaces)
}

func (d deadlineStore) RecordGUIDPlaces(ctx context.Context, term int64, seen []store.GUIDPlaceUpdate) ([]store.GUIDPlace, error) {
	return within(ctx, d, func(ctx context.Context) ([]store.GUIDPlace, error) { return d.store.RecordGUIDPlaces(ctx, term, seen) })
}

func (d deadlineStore) AddGUIDPlaces(ctx context.Context, term int64, news []store.GUIDPlaceUpdate) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.store.AddGUIDPlaces(ctx, term, news) })
}

func (d deadlineStore) RecordDuplicateGUIDs(ctx context.Context, term int64, seen []store.DuplicateSighting) error {
	return d.call(ctx, func(ctx context.Context) error { return d.store.RecordDuplicateGUIDs(ctx, term, seen) })
}

func (d deadlineStore) ClearDuplicateGUIDs(ctx context.Context, term int64) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.store.ClearDuplicateGUIDs(ctx, term) })
}

func (d deadlineStore) RecordEnforcementErrors(ctx context.Context, term int64, seen []store.EnforcementSighting) error {
	return d.call(ctx, func(ctx context.Context) error { return d.store.RecordEnforcementErrors(ctx, term, seen) })
}

func (d deadlineStore) DescribeJob(ctx context.Context, term, id int64, description string) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.store.DescribeJob(ctx, term, id, description) })
}

func (d deadlineStore) DescribeOpenJobs(ctx context.Context, term, revision int64, description string) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) {
		return d.store.DescribeOpenJobs(ctx, term, revision, description)
	})
}

func (d deadlineStore) FailJob(ctx context.Context, term, id int64, reason string) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.store.FailJob(ctx, term, id, reason) })
}

func (d deadlineStore) OpenJobs(ctx context.Context, revision int64) ([]store.OpenJob, error) {
	return within(ctx, d, func(ctx context.Context) ([]store.OpenJob, error) { return d.store.OpenJobs(ctx, revision) })
}

func (d deadlineStore) GetJob(ctx context.Context, id int64) (store.Job, error) {
	return within(ctx, d, func(ctx context.Context) (store.Job, error) { return d.store.GetJob(ctx, id) })
}

func (d deadlineStore) RecordSetFailures(ctx context.Context, term int64, ports []store.SetFailure) error {
	return d.call(ctx, func(ctx context.Context) error { return d.store.RecordSetFailures(ctx, term, ports) })
}

func (d deadlineStore) SetFailures(ctx context.Context) ([]store.SetFailure, error) {
	return within(ctx, d, d.store.SetFailures)
}

func (d deadlineStore) ReadLease(ctx context.Context) (store.Lease, error) {
	return within(ctx, d, d.leases.ReadLease)
}

func (d deadlineStore) SetFreeze(ctx context.Context, term int64, reason string) (bool, error) {
	return within(ctx, d, func(ctx context.Context) (bool, error) { return d.leases.SetFreeze(ctx, term, reason) })
}

func (d deadlineStore) LiftFreeze(ctx context.Context, term int64) (bool, error) {
	return within(ctx, d, func(ctx context.Context) (bool, error) { return d.leases.LiftFreeze(ctx, term) })
}

func (d deadlineStore) RecordSecondSM(ctx context.Context, term int64, sm store.SecondSM) error {
	return d.call(ctx, func(ctx context.Context) error { return d.secondSMs.RecordSecondSM(ctx, term, sm) })
}

func (d deadlineStore) ClearSecondSMs(ctx context.Context, term int64) (int64, error) {
	return within(ctx, d, func(ctx context.Context) (int64, error) { return d.secondSMs.ClearSecondSMs(ctx, term) })
}

func (d deadlineStore) SecondSMs(ctx context.Context) ([]store.SecondSM, error) {
	return within(ctx, d, d.secondSMs.SecondSMs)
}

func (d deadlineStore) RecordForeignSMs(ctx context.Context, term int64, sms []store.SecondSM) error {
	return d.call(ctx, func(ctx context.Context) error { return d.secondSMs.RecordForeignSMs(ctx, term, sms) })
}

func (d deadlineStore) RecordAudit(ctx context.Context, a store.Audit) error {
	return d.call(ctx, func(ctx context.Context) error { return d.audits.RecordAudit(ctx, a) })
}

func (d deadlineStore) LastAudit(ctx context.Context) (store.Audit, bool, error) {
	var a store.Audit
	var ok bool
	err := d.call(ctx, func(ctx context.Context) (err error) {
		a, ok, err = d.audits.LastAudit(ctx)
		return err
	})
	return a, ok, err
}
