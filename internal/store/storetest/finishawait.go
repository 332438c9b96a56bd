package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// finishAwaitingTests cover FinishApplyAwaiting: FinishApplyProven whose
// transaction reads the gates before the proof is known, then waits for it.
// Not on SQLite, where the applier never uses it (store.FinishesBesideProof).
var finishAwaitingTests = []struct {
	name        string
	fn          func(t *testing.T, db Database, s *store.Store)
	notOnSQLite bool
}{
	{"FinishApplyAwaitingCompletesWhatTheLateProofNames", testFinishAwaitingProven, true},
	{"FinishApplyAwaitingAProofOfAllCompletesAsFinishApply", testFinishAwaitingAll, true},
	{"FinishApplyAwaitingPastItsBoundRecordsNothing", testFinishAwaitingBound, true},
	{"FinishApplyAwaitingAProofOfNoJobRecordsNothing", testFinishAwaitingNoProof, true},
	{"FinishApplyAwaitingCancelledRecordsNothing", testFinishAwaitingCancelled, true},
	{"FinishApplyAwaitingFencedByANewerTermMeanwhile", testFinishAwaitingNewTerm, true},
	{"FinishApplyAwaitingWhoseSessionIsKilledRecordsNothing", testFinishAwaitingKilled, true},
}

// recordsNothing says that no apply row is recorded and that jobs are
// still open.
func recordsNothing(t *testing.T, s *store.Store, jobs ...store.Job) {
	t.Helper()
	if a, err := s.LastApply(t.Context()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LastApply = %+v, %v; want none recorded", a, err)
	}
	for _, j := range jobs {
		if got := job(t, s, j.ID); got.Status != store.StatusPending {
			t.Errorf("job %d is %s; want it open", j.ID, got.Status)
		}
	}
}

// testFinishAwaitingProven: the proof is asked for once the apply's row is
// written and the gates read, inside the transaction (nothing of it is seen
// outside yet, and open has not run); the jobs it names complete, with the
// row, once it answers.
func testFinishAwaitingProven(t *testing.T, _ Database, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	term, jobs := finishSetup(t, s) // revisions 1 (network), 2 (Kubernetes), 3 (network)
	end := time.Now().UTC()
	opened, asked := false, 0
	proof := func(pctx context.Context) *store.Proven {
		asked++
		if opened {
			t.Error("open ran before the proof was given")
		}
		if _, ok := pctx.Deadline(); !ok {
			t.Error("the wait for the proof has no bound")
		}
		recordsNothing(t, s, jobs...) // the transaction has not committed
		return &store.Proven{Jobs: []int64{jobs[0].ID, jobs[2].ID}}
	}
	var seen store.GateState
	f, err := s.FinishApplyAwaiting(ctx, appliedRow(term, 3, end), proof, time.Minute, func(gs store.GateState) bool {
		opened, seen = true, gs
		return true
	})
	if err != nil || !f.Recorded || !f.Open || f.Completed != 2 || asked != 1 {
		t.Fatalf("FinishApplyAwaiting = %+v, %v (proof asked %d times); want 2 jobs completed, asked once", f, err, asked)
	}
	if len(seen.Expected) != 1 || len(seen.Errors) != 1 {
		t.Errorf("open saw %+v; want the confirmed switch and the enforcement error", seen)
	}
	for i, want := range []string{store.StatusCompleted, store.StatusPending, store.StatusCompleted} {
		if got := job(t, s, jobs[i].ID); got.Status != want {
			t.Errorf("job %d is %s; want %s", jobs[i].ID, got.Status, want)
		}
	}
	if got, _ := s.KubernetesLastUpdated(ctx); got != nil {
		t.Errorf("last_updated = %v though the proof held the Kubernetes job", got)
	}
	if a, err := s.LastApply(ctx); err != nil || a.Revision != 3 || a.Term != term {
		t.Errorf("LastApply = %+v, %v; want revision 3's row", a, err)
	}
}

// testFinishAwaitingAll: a proof of every job completes them as FinishApply
// does, the Kubernetes last_updated moved, no earlier than the proof came.
func testFinishAwaitingAll(t *testing.T, _ Database, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	term, jobs := finishSetup(t, s)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	clock := at
	s = s.WithClock(func() time.Time { return clock })
	proof := func(context.Context) *store.Proven {
		clock = at.Add(time.Second) // the store's clock once the proof came
		return &store.Proven{All: true}
	}
	f, err := s.FinishApplyAwaiting(ctx, appliedRow(term, 2, at), proof, time.Minute, func(store.GateState) bool { return true })
	if err != nil || !f.Recorded || !f.Open || f.Completed != 2 {
		t.Fatalf("FinishApplyAwaiting of every job = %+v, %v; want the 2 jobs up to revision 2", f, err)
	}
	for i, want := range []string{store.StatusCompleted, store.StatusCompleted, store.StatusPending} {
		got := job(t, s, jobs[i].ID)
		if got.Status != want || (want == store.StatusCompleted && (got.FinishedAt == nil || got.FinishedAt.Before(clock))) {
			t.Errorf("job %d is %s, finished %v; want %s, no earlier than %v", jobs[i].ID, got.Status, got.FinishedAt, want, clock)
		}
	}
	if got, err := s.KubernetesLastUpdated(ctx); err != nil || got == nil {
		t.Errorf("last_updated = %v, %v; want moved", got, err)
	}
}

// testFinishAwaitingBound: a proof that does not come within the bound
// rolls the transaction back, open never running: nothing is recorded, and
// the apply is then finished as before, once proven.
func testFinishAwaitingBound(t *testing.T, _ Database, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	term, jobs := finishSetup(t, s)
	end := time.Now().UTC()
	const within = 50 * time.Millisecond
	proof := func(pctx context.Context) *store.Proven {
		if d, ok := pctx.Deadline(); !ok || time.Until(d) > within {
			t.Errorf("the proof's deadline %v (set %v); want within %v", d, ok, within)
		}
		<-pctx.Done() // a port that does not answer
		return nil
	}
	open := func(store.GateState) bool { t.Error("open ran without a proof"); return true }
	f, err := s.FinishApplyAwaiting(ctx, appliedRow(term, 3, end), proof, within, open)
	if !errors.Is(err, store.ErrNoProof) || f.Recorded || f.Completed != 0 {
		t.Fatalf("FinishApplyAwaiting past its bound = %+v, %v; want %v", f, err, store.ErrNoProof)
	}
	recordsNothing(t, s, jobs...)
	f, err = s.FinishApplyProven(ctx, appliedRow(term, 3, end), store.Proven{Jobs: []int64{jobs[0].ID}},
		func(store.GateState) bool { return true })
	if err != nil || f.Completed != 1 {
		t.Fatalf("FinishApplyProven after = %+v, %v; want the job completed", f, err)
	}
}

// testFinishAwaitingNoProof: a proof that proves no job rolls back.
func testFinishAwaitingNoProof(t *testing.T, _ Database, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	term, jobs := finishSetup(t, s)
	end := time.Now().UTC()
	for _, p := range []*store.Proven{nil, {}} {
		proof := func(context.Context) *store.Proven { return p }
		f, err := s.FinishApplyAwaiting(ctx, appliedRow(term, 3, end), proof, time.Minute,
			func(store.GateState) bool { return true })
		if !errors.Is(err, store.ErrNoProof) || f.Recorded || f.Completed != 0 {
			t.Fatalf("FinishApplyAwaiting of proof %+v = %+v, %v; want %v", p, f, err, store.ErrNoProof)
		}
		recordsNothing(t, s, jobs...)
	}
}

// testFinishAwaitingCancelled: the caller gives up while the transaction
// waits: it rolls back, with the context's error.
func testFinishAwaitingCancelled(t *testing.T, _ Database, s *store.Store) {
	s = kubeStore(s)
	term, jobs := finishSetup(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	proof := func(pctx context.Context) *store.Proven {
		cancel()
		<-pctx.Done()
		return &store.Proven{Jobs: []int64{jobs[0].ID}} // came with the cancel: not taken
	}
	f, err := s.FinishApplyAwaiting(ctx, appliedRow(term, 3, time.Now().UTC()), proof, time.Minute,
		func(store.GateState) bool { return true })
	if !errors.Is(err, context.Canceled) || f.Recorded || f.Completed != 0 {
		t.Fatalf("FinishApplyAwaiting cancelled = %+v, %v; want %v", f, err, context.Canceled)
	}
	recordsNothing(t, s, jobs...)
}

// testFinishAwaitingNewTerm: a newer term begins while the transaction
// waits. On PostgreSQL it commits meanwhile, and the completions, fenced by
// the term, complete nothing; on MariaDB the fence's shared lock on the
// lease's row holds it until the transaction ends (within its bound), and
// the jobs complete under the term that was current. Either way no job
// completes after a newer term committed.
func testFinishAwaitingNewTerm(t *testing.T, db Database, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	term, jobs := finishSetup(t, s)
	newer := make(chan error, 1)
	beganFirst := false
	proof := func(pctx context.Context) *store.Proven {
		go func() {
			_, err := s.NewTerm(ctx, "manager-2")
			newer <- err
		}()
		wait := time.After(200 * time.Millisecond) // MariaDB's NewTerm waits for this transaction
		if db.Engine == config.EnginePostgres {
			wait = nil // PostgreSQL's must not
		}
		select {
		case err := <-newer:
			if err != nil {
				t.Errorf("NewTerm: %v", err)
			}
			beganFirst = true
		case <-wait:
		case <-pctx.Done():
		}
		return &store.Proven{Jobs: []int64{jobs[0].ID}}
	}
	f, err := s.FinishApplyAwaiting(ctx, appliedRow(term, 3, time.Now().UTC()), proof, time.Minute,
		func(store.GateState) bool { return true })
	if !beganFirst {
		if err := <-newer; err != nil {
			t.Fatalf("NewTerm: %v", err)
		}
	}
	if db.Engine == config.EnginePostgres && !beganFirst {
		t.Fatal("the newer term waited for the transaction")
	}
	want := int64(1)
	if beganFirst {
		want = 0
	}
	if err != nil || f.Completed != want {
		t.Fatalf("FinishApplyAwaiting with a newer term (begun while it waited: %v) = %+v, %v; want %d completed",
			beganFirst, f, err, want)
	}
	if got := job(t, s, jobs[0].ID); (got.Status == store.StatusCompleted) != (want == 1) {
		t.Errorf("job %d is %s; want completed only if the term was current at the commit", jobs[0].ID, got.Status)
	}
}

// testFinishAwaitingKilled: the server ends the transaction's session while
// it waits: an error, nothing recorded.
func testFinishAwaitingKilled(t *testing.T, db Database, s *store.Store) {
	s = kubeStore(s)
	term, jobs := finishSetup(t, s)
	proof := func(context.Context) *store.Proven {
		killTransaction(t, db)
		return &store.Proven{Jobs: []int64{jobs[0].ID}}
	}
	f, err := s.FinishApplyAwaiting(t.Context(), appliedRow(term, 3, time.Now().UTC()), proof, time.Minute,
		func(store.GateState) bool { return true })
	if err == nil || errors.Is(err, store.ErrNoProof) || f.Completed != 0 {
		t.Fatalf("FinishApplyAwaiting whose session was killed = %+v, %v; want the server's error", f, err)
	}
	recordsNothing(t, s, jobs...)
}
