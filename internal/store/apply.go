package store

import (
	"context"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// What the applier (and operators) read and write: the revision, the snapshot
// the partitions file is rendered from, the terms that fence a deposed
// applier's writes, the jobs' outcome, and the record of each apply. Every
// write the applier makes takes its term and changes nothing when the term is
// no longer the current one.

// Revision is the last committed revision.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	return s.d.Queries(ctx).Revision(ctx)
}

// Snapshot reads the recorded state at one revision, in one read-only
// transaction: it neither waits for a change nor holds one up. It reads every
// row; the applier reads through a SnapshotCache instead (ReadSnapshot), with
// the same result. Networks are in id order and members in network id then
// GUID order, in byte order on every engine.
func (s *Store) Snapshot(ctx context.Context) (Snapshot, error) {
	var snap Snapshot
	err := s.d.InTx(ctx, driver.ReadOnly, func(q driver.Queries) error {
		var err error
		if snap.Revision, err = q.Revision(ctx); err != nil {
			return err
		}
		nets, err := q.ListManagedNetworks(ctx)
		if err != nil {
			return err
		}
		snap.Networks = driver.Convert(nets, network)
		members, err := q.ListMembers(ctx)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.Guid == nil {
				return fmt.Errorf("network %s: membership row without a GUID", m.NetworkID)
			}
			snap.Members = append(snap.Members, Member{NetworkID: m.NetworkID, GUID: *m.Guid})
		}
		snap.Kubernetes, err = kubernetesPKeys(ctx, q)
		return err
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	sortSnapshot(&snap)
	return snap, nil
}

// GetJob returns job id; ErrNotFound when there is none.
func (s *Store) GetJob(ctx context.Context, id int64) (Job, error) {
	j, err := s.d.Queries(ctx).GetJob(ctx, id)
	if err != nil {
		return Job{}, notFound(err)
	}
	return Job(j), nil
}

// GetPort returns port id as recorded; ErrNotFound when there is none.
func (s *Store) GetPort(ctx context.Context, id string) (Port, error) {
	return tx{s.d.Queries(ctx)}.GetPort(ctx, id)
}

// CountJobsByStatus counts the recorded jobs of each status.
func (s *Store) CountJobsByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := s.d.Queries(ctx).CountJobsByStatus(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// NewTerm starts the next leadership term, held by holder ("<host> pid
// <pid>"), and returns it: every write of an older term changes nothing from
// now on.
func (s *Store) NewTerm(ctx context.Context, holder string) (int64, error) {
	now := s.now()
	var term int64
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		var err error
		term, err = q.NewTerm(ctx, holder, &now)
		return err
	})
	return term, err
}

// MarkJobsRunning marks the Pending jobs up to revision Running, if term is
// current; it returns how many changed.
func (s *Store) MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error) {
	now := s.now()
	return s.d.Queries(ctx).MarkJobsRunning(ctx, &now, revision, term)
}

// CompleteJobs completes the open jobs up to revision, if term is current,
// and, in the same transaction, moves the Kubernetes last_updated when the
// revision carries a Kubernetes change not yet applied.
func (s *Store) CompleteJobs(ctx context.Context, term, revision int64) (int64, error) {
	now := s.now()
	var n int64
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		var err error
		if n, err = q.CompleteJobs(ctx, &now, revision, term); err != nil {
			return err
		}
		_, err = q.MarkKubernetesApplied(ctx, &now, revision, term)
		return err
	})
	return n, err
}

// FailJobs fails the open jobs up to revision with reason, if term is current.
func (s *Store) FailJobs(ctx context.Context, term, revision int64, reason string) (int64, error) {
	now := s.now()
	return s.d.Queries(ctx).FailJobs(ctx, reason, &now, revision, term)
}

// FailJob fails one open job, if term is still current.
func (s *Store) FailJob(ctx context.Context, term, id int64, reason string) (int64, error) {
	now := s.now()
	return s.d.Queries(ctx).FailJob(ctx, reason, &now, id, term)
}

// OpenJobs lists the Pending and Running jobs up to revision, with the GUID
// each port job's port holds now.
func (s *Store) OpenJobs(ctx context.Context, revision int64) ([]OpenJob, error) {
	rows, err := s.d.Queries(ctx).OpenJobsWithGUIDs(ctx, revision)
	if err != nil {
		return nil, err
	}
	out := make([]OpenJob, len(rows))
	for i, r := range rows {
		out[i] = OpenJob{ID: r.ID, ObjectType: r.ObjectType, ObjectID: r.ObjectID, NetworkID: r.NetworkID, GUID: r.Guid}
	}
	return out, nil
}

// RecordApply records an attempt to apply a revision if its term is still
// current; false otherwise.
func (s *Store) RecordApply(ctx context.Context, a Apply) (bool, error) {
	n, err := s.d.Queries(ctx).RecordApply(ctx, a.Revision, a.SHA256, a.Term, a.Outcome, a.Detail,
		a.StartedAt, a.FinishedAt)
	return n == 1, err
}

// LastApply is the last apply recorded; ErrNotFound before the first.
func (s *Store) LastApply(ctx context.Context) (Apply, error) {
	a, err := s.d.Queries(ctx).LastApply(ctx)
	if err != nil {
		return Apply{}, notFound(err)
	}
	return Apply{Revision: a.Revision, SHA256: a.Sha256, Term: a.Term, Outcome: a.Outcome,
		Detail: a.Detail, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt}, nil
}
