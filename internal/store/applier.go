package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// What the applier (and operators) read and write: the revision, the snapshot
// the partitions file is rendered from, the terms that fence a deposed
// applier's writes, the jobs' outcome, and the record of each apply. Every
// write the applier makes takes its term and changes nothing when the term is
// no longer the current one.

// Revision is the last committed revision.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	return s.d.Queries(ctx).Revision(ctx, s.FabricName())
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
		if snap.Revision, err = q.Revision(ctx, s.FabricName()); err != nil {
			return err
		}
		if snap.NewestJob, err = q.NewestJobID(ctx, s.FabricName()); err != nil {
			return err
		}
		nets, err := q.ListManagedNetworks(ctx, s.FabricName())
		if err != nil {
			return err
		}
		snap.Networks = driver.Convert(nets, network)
		// Every port, for the port that holds each membership (the
		// applier's attribution of pkey errors to removals needs it).
		ports, err := q.ListPortsSince(ctx, s.FabricName(), 0)
		if err != nil {
			return err
		}
		managed := make(map[string]bool, len(nets))
		for _, n := range snap.Networks {
			managed[n.ID] = true
		}
		for _, p := range ports {
			if p.Guid != nil && managed[p.NetworkID] {
				snap.Members = append(snap.Members, Member{NetworkID: p.NetworkID, GUID: *p.Guid, PortID: p.ID})
			}
		}
		if snap.Kubernetes, err = kubernetesPKeys(ctx, s.FabricName(), q); err != nil {
			return err
		}
		snap.Adopted, err = listAdopted(ctx, s.FabricName(), q)
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
	return j, nil
}

// GetPort returns port id as recorded; ErrNotFound when there is none.
func (s *Store) GetPort(ctx context.Context, id string) (Port, error) {
	return tx{s.d.Queries(ctx), s.FabricName()}.GetPort(ctx, id)
}

// CountJobsByStatus counts the recorded jobs of each status.
func (s *Store) CountJobsByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := s.d.Queries(ctx).CountJobsByStatus(ctx, s.FabricName())
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
		term, err = q.NewTerm(ctx, s.FabricName(), holder, &now)
		return err
	})
	return term, err
}

// MarkJobsRunning marks the Pending jobs up to revision Running, if term is
// current; it returns how many changed.
func (s *Store) MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error) {
	now := s.now()
	return s.d.Queries(ctx).MarkJobsRunning(ctx, s.FabricName(), &now, revision, term)
}

// CompleteJobs completes the open jobs up to revision, if term is current,
// and, in the same transaction, moves the Kubernetes last_updated when the
// revision carries a Kubernetes change not yet applied.
func (s *Store) CompleteJobs(ctx context.Context, term, revision int64) (int64, error) {
	now := s.now()
	var n int64
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		var err error
		if n, err = q.CompleteJobs(ctx, s.FabricName(), &now, revision, term); err != nil {
			return err
		}
		return q.MarkKubernetesApplied(ctx, s.FabricName(), &now, revision, term)
	})
	return n, err
}

// GateState is what the gates read from the database: the switches an
// operator confirmed and the recorded enforcement errors.
type GateState struct {
	Expected []ExpectedSwitch
	Errors   []EnforcementError
}

// Finished is what FinishApply did.
type Finished struct {
	// Recorded: the apply row is in; false when a newer term had started,
	// and then nothing else changed either.
	Recorded bool
	// Gates is the gates' state as read in the transaction (empty when not
	// Recorded).
	Gates GateState
	// Open is what the caller's open said of Gates; the jobs completed only
	// if it said true.
	Open      bool
	Completed int64 // jobs completed
	// Restored: the database no longer holds the state applied (restored
	// from a backup since it was read, history.go); nothing was recorded,
	// and no job completed: the restored state is to be applied.
	Restored bool
}

// FinishApply ends an apply that OpenSM applied cleanly, in one write
// transaction fenced by a.Term: it records a, reads the gates' state, and
// when open says the jobs may complete on that state, completes the open
// jobs up to a.Revision and moves the Kubernetes last_updated as
// CompleteJobs does. Every job it completes therefore commits with an applied
// row of its revision, or not at all: a manager killed at any point of it
// leaves neither. The jobs finish at the store's clock, or at a.FinishedAt
// if that is later, never before the apply. open runs inside the
// transaction, perhaps more than once, and must do no I/O: the dump it
// compares the switches with is read before. A stale term changes nothing.
func (s *Store) FinishApply(ctx context.Context, a Apply, open func(GateState) bool) (Finished, error) {
	return s.finishApply(ctx, a, nil, open, s.completeAll(ctx, a))
}

// completeAll is FinishApply's completion of every open job up to a.Revision.
func (s *Store) completeAll(ctx context.Context, a Apply) func(context.Context, driver.ChangeTx, *time.Time) (int64, error) {
	return func(counted context.Context, q driver.ChangeTx, now *time.Time) (int64, error) {
		// Both held, to go with the COMMIT in one round trip: nothing is
		// decided on the completion's count (it is reported), and an error
		// of either stops the statements after it, the COMMIT among them.
		if err := q.Later().MarkKubernetesApplied(ctx, s.FabricName(), now, a.Revision, a.Term); err != nil {
			return 0, err
		}
		return q.Later().CompleteJobs(counted, s.FabricName(), now, a.Revision, a.Term)
	}
}

// Proven names the jobs up to an apply's revision that its read-back proof
// showed, while others of them still wait for their ports' tables.
type Proven struct {
	Jobs []int64
	// Kubernetes says that no Kubernetes change up to the revision waits:
	// only then does last_updated move (ib-kubernetes holds its next change
	// back until it does, and must not take a held change as applied).
	Kubernetes bool
	// Notes says, for some of Jobs, how they were proven otherwise than by
	// their tables: the note is added to what the job does (its first line,
	// which completion keeps), cut as a job's texts are.
	Notes map[int64]string
	// All: every open job up to the revision is proven, as FinishApply
	// completes them (FinishApplyAwaiting's proof; the rest is ignored).
	All bool
}

// FinishApplyProven is FinishApply for an apply whose proof holds some of
// its jobs: in the same fenced transaction, with the same gates and the same
// applied row, it completes only the open jobs p names up to a.Revision, so
// that one port off the fabric does not hold every other job of its sweep,
// and a job p leaves out stays open whatever revision a is.
func (s *Store) FinishApplyProven(ctx context.Context, a Apply, p Proven, open func(GateState) bool) (Finished, error) {
	return s.finishApply(ctx, a, nil, open, s.completeProven(ctx, a, &p))
}

// ErrNoProof is FinishApplyAwaiting's error when its proof came too late or
// proved no job: the transaction rolled back, nothing is recorded, and the
// caller finishes the apply as if it had not tried (FinishApplyProven).
var ErrNoProof = errors.New("no job proven in time; nothing recorded")

// FinishesBesideProof says whether FinishApplyAwaiting may be used: on a
// server engine its transaction, while it waits, holds only its own rows
// and the term's fence; SQLite's would hold the one writer lock, every
// change's POST waiting behind the read-back's reads.
func (s *Store) FinishesBesideProof() bool { return s.d.Name() != "sqlite" }

// FinishApplyAwaiting is FinishApplyProven whose proof is given late, by
// proof, so that its first round trip (the BEGIN, the apply's row and the
// gates' read) runs while the proof is still being read: the transaction
// then calls proof, with a context that ends within, and only once it has
// answered do open decide and the completions go with the COMMIT. proof
// returns the proof (All: every open job up to a.Revision, as FinishApply
// completes them), or nil when it proved no job or its context ended
// first; it must return once that context ends. A proof later than within
// (a port that does not answer holds the reads for seconds, and on MariaDB
// the term's fence share-locks the lease's row meanwhile), a nil one or one
// naming nothing to complete rolls the transaction back: ErrNoProof. A ctx
// cancelled meanwhile rolls it back too, with its error. proof is called at
// most once; not at all when the row is not recorded (a newer term, a
// restore: Finished says which, as FinishApplyProven's would).
func (s *Store) FinishApplyAwaiting(ctx context.Context, a Apply, proof func(context.Context) *Proven,
	within time.Duration, open func(GateState) bool) (Finished, error) {
	var p *Proven
	called := false
	await := func() error {
		if !called {
			called = true
			wctx, cancel := context.WithTimeout(ctx, within)
			p = proof(wctx)
			cancel()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == nil || (!p.All && len(p.Jobs) == 0 && !p.Kubernetes) {
			return ErrNoProof
		}
		return nil
	}
	var proven Proven
	all, some := s.completeAll(ctx, a), s.completeProven(ctx, a, &proven)
	return s.finishApply(ctx, a, await, open, func(counted context.Context, q driver.ChangeTx, now *time.Time) (int64, error) {
		if proven = *p; p.All { // await let it through
			return all(counted, q, now)
		}
		return some(counted, q, now)
	})
}

// completeProven is FinishApplyProven's completion of the jobs *p names.
func (s *Store) completeProven(ctx context.Context, a Apply, p *Proven) func(context.Context, driver.ChangeTx, *time.Time) (int64, error) {
	return func(counted context.Context, q driver.ChangeTx, now *time.Time) (int64, error) {
		if p.Kubernetes {
			// Held, as the completions (FinishApply's).
			if err := q.Later().MarkKubernetesApplied(ctx, s.FabricName(), now, a.Revision, a.Term); err != nil {
				return 0, err
			}
		}
		var total int64
		for _, id := range p.Jobs {
			if note, ok := p.Notes[id]; ok {
				// Its read sends what is held so far.
				if err := noteJob(ctx, s.FabricName(), q, *now, id, a.Term, note); err != nil {
					return 0, err
				}
			}
			n, err := q.Later().CompleteJob(counted, s.FabricName(), now, id, a.Revision, a.Term)
			if err != nil {
				return 0, err
			}
			total += n
		}
		return total, nil // what is held goes at the latest with the COMMIT
	}
}

// noteJob adds note to the first line of job id's description, if the job
// is open and term current.
func noteJob(ctx context.Context, fab string, q driver.Queries, now time.Time, id, term int64, note string) error {
	j, err := q.GetJob(ctx, id)
	if err != nil {
		return fmt.Errorf("read job %d: %w", id, err)
	}
	what, _, _ := strings.Cut(j.Description, "\n")
	_, err = q.SetJobDescription(ctx, fab, jobText(what+" ("+note+")", MaxJobText), now, id, term)
	return err
}

// finishApply records a, reads the gates, and runs complete if open says so,
// all in one write transaction fenced by a.Term. It is a change transaction
// for its round trips (driver.ChangeTx): on PostgreSQL and MariaDB the
// BEGIN and the apply's row go with the gates' read, and what complete
// holds with the COMMIT: two round trips where there were four, on the path
// of every job's completion. complete's writes made under counted give their counts
// once sent (driver.CountInto): Completed adds them after the COMMIT. await,
// when given, runs between the two, the row recorded and the gates read: an
// error of it rolls everything back.
func (s *Store) finishApply(ctx context.Context, a Apply, await func() error, open func(GateState) bool,
	complete func(counted context.Context, q driver.ChangeTx, now *time.Time) (int64, error)) (Finished, error) {
	a = boundApply(a)
	now := s.now()
	if a.FinishedAt.After(now) {
		now = a.FinishedAt
	}
	var f Finished
	var completedLater int64 // complete's held counts
	err := s.d.InChangeTx(ctx, func(q driver.ChangeTx) error {
		f, completedLater = Finished{}, 0
		recorded, err := s.recordFinished(ctx, q, a, &f)
		if err != nil || !recorded {
			return err
		}
		if await != nil {
			if err := await(); err != nil {
				return err
			}
			// The jobs complete no earlier than what they waited for.
			if later := s.now(); later.After(now) {
				now = later
			}
		}
		if f.Open = open(f.Gates); !f.Open {
			return nil
		}
		if f.Completed, err = complete(driver.CountInto(ctx, &completedLater), q, &now); err != nil {
			return fmt.Errorf("complete jobs: %w", err)
		}
		return nil
	})
	if err != nil {
		return Finished{}, fmt.Errorf("finish the apply of revision %d: %w", a.Revision, err)
	}
	f.Completed += completedLater
	return f, nil
}

// recordFinished writes a's row and reads the gates' state into f, in q:
// recorded is false when the row did not go in (a newer term, or a restore:
// f.Restored says which). The row's insert is held (its count given when
// sent, driver.CountInto) to go with the gates' read in one round trip: the
// server runs them in this order as before, the read after the insert, and
// the count decides before anything else is written; a failed insert stops
// the read and is its error.
func (s *Store) recordFinished(ctx context.Context, q driver.ChangeTx, a Apply, f *Finished) (recorded bool, err error) {
	// The apply's row goes in only while the database holds the state
	// applied (its newest job), read by the same statement: on PostgreSQL
	// this holds off a restore that empties the jobs table (TRUNCATE,
	// pg_restore --clean) until this transaction ends, as MariaDB's
	// metadata lock holds off a dump's DROP TABLE; SQLite's writer excludes
	// any other. A restore that deletes rows one by one and commits between
	// this statement and the completion, a few milliseconds, is not seen.
	var held int64
	n, err := q.Later().RecordApplyOfHistory(driver.CountInto(ctx, &held), ofHistory(a.row(s.FabricName()), a.NewestJob))
	if err != nil {
		return false, fmt.Errorf("record apply: %w", err)
	}
	gates, err := gateState(ctx, s.FabricName(), q)
	if err != nil {
		return false, fmt.Errorf("record apply, read the gates: %w", err)
	}
	if n += held; n != 1 {
		// A newer term (the same fence stops the rest), or a restore:
		// which one, the job says.
		if a.NewestJob > 0 {
			same, err := sameHistory(ctx, q, a.NewestJob)
			if err != nil {
				return false, fmt.Errorf("read the newest job of the state applied: %w", err)
			}
			f.Restored = !same
		}
		return false, nil
	}
	f.Recorded, f.Gates = true, gates
	return true, nil
}

// ofHistory is an apply's row recorded only while the job newest is (0: no
// job to check).
func ofHistory(r driver.RecordApplyParams, newest int64) driver.RecordApplyOfHistoryParams {
	return driver.RecordApplyOfHistoryParams{Revision: r.Revision, SHA256: r.SHA256, Term: r.Term, Outcome: r.Outcome,
		Detail: r.Detail, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Fabric: r.Fabric, NewestJob: max(newest, 0)}
}

// FailJobs fails the open jobs up to revision with reason, if term is current.
// A reason longer than a job's error holds is cut (texts.go): the caller logs
// the whole of it.
func (s *Store) FailJobs(ctx context.Context, term, revision int64, reason string) (int64, error) {
	now := s.now()
	return s.d.Queries(ctx).FailJobs(ctx, s.FabricName(), jobText(reason, MaxJobText), &now, revision, term)
}

// FailJob fails one open job, if term is still current; reason is cut as
// FailJobs cuts it.
func (s *Store) FailJob(ctx context.Context, term, id int64, reason string) (int64, error) {
	now := s.now()
	return s.d.Queries(ctx).FailJob(ctx, s.FabricName(), jobText(reason, MaxJobText), &now, id, term)
}

// OpenJobs lists the Pending and Running jobs up to revision, with the GUID
// each port job's port holds now and the places each job's change promised,
// in GUID and pkey order.
func (s *Store) OpenJobs(ctx context.Context, revision int64) ([]OpenJob, error) {
	rows, err := s.d.Queries(ctx).OpenJobsWithGUIDs(ctx, s.FabricName(), revision)
	if err != nil {
		return nil, err
	}
	out := make([]OpenJob, len(rows))
	if len(rows) == 0 {
		return out, nil // no job: no places to read
	}
	at := make(map[int64]int, len(rows))
	for i, r := range rows {
		out[i] = OpenJob{ID: r.ID, ObjectType: r.ObjectType, ObjectID: r.ObjectID, NetworkID: r.NetworkID, GUID: r.Guid}
		at[r.ID] = i
		// Written with the job, in its row, since migration 00019.
		if out[i].Places, err = storePlaces(r.Places); err != nil {
			return nil, fmt.Errorf("job %d: %w", r.ID, err)
		}
	}
	// The places written as rows of job_places: a job recorded before
	// migration 00019, or by the previous release during a rolling upgrade.
	// Read after the jobs, outside a transaction: a job inserted meanwhile
	// has places but is not listed (skipped here, read at the next sweep);
	// a listed job keeps its places, which go only with the job, and an
	// open job is never deleted. A job of a release before 00014 has none.
	// A job with places in its row has none there (this release writes no
	// rows of job_places): when every listed job has, they are not read,
	// a round trip fewer on the path of every change's completion.
	if !slices.ContainsFunc(out, func(j OpenJob) bool { return len(j.Places) == 0 }) {
		for i := range out {
			sortPlaces(out[i].Places)
		}
		return out, nil
	}
	places, err := s.d.Queries(ctx).OpenJobPlaces(ctx, s.FabricName(), revision)
	if err != nil {
		return nil, fmt.Errorf("read the places of the open jobs: %w", err)
	}
	for _, p := range places {
		if i, ok := at[p.JobID]; ok {
			out[i].Places = append(out[i].Places, Place{GUID: p.Guid, PKey: p.Pkey, Want: Want(p.Want)})
		}
	}
	for i := range out {
		sortPlaces(out[i].Places)
	}
	return out, nil
}

// RecordApply records an attempt to apply a revision if its term is still
// current; false otherwise.
func (s *Store) RecordApply(ctx context.Context, a Apply) (bool, error) {
	a = boundApply(a)
	n, err := s.d.Queries(ctx).RecordApply(ctx, a.row(s.FabricName()))
	return n == 1, err
}

// LastApply is the last apply recorded; ErrNotFound before the first.
func (s *Store) LastApply(ctx context.Context) (Apply, error) {
	a, err := s.d.Queries(ctx).LastApply(ctx, s.FabricName())
	if err != nil {
		return Apply{}, notFound(err)
	}
	return Apply{Revision: a.Revision, SHA256: a.Sha256, Term: a.Term, Outcome: a.Outcome,
		Detail: a.Detail, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt}, nil
}
