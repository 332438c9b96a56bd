package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// finishTests cover FinishApply: an applied sweep recorded and its jobs
// completed in one transaction, fenced by the term.
var finishTests = []storeTest{
	{"FinishApplyRecordsAndCompletesInOneTransaction", testFinishApply},
	{"FinishApplyOfAStaleTermChangesNothing", testFinishApplyStale},
	{"FinishApplyThatFailsMidwayLeavesNothing", testFinishApplyFailsMidway},
	{"FinishApplyReadsTheGatesAsTheirQueriesDo", testFinishApplyGateState},
	{"FinishApplyProvenCompletesOnlyTheJobsItNames", testFinishApplyProven},
}

// finishSetup records a network (revision 1), a Kubernetes change (2) and
// another network (3), a confirmed switch and an enforcement error, and
// returns the term that recorded the error.
func finishSetup(t *testing.T, s *store.Store) (term int64, jobs []store.Job) {
	t.Helper()
	ctx := t.Context()
	jobs = append(jobs, addNetwork(t, s, netA, 101))
	jobs = append(jobs, mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB)))))
	jobs = append(jobs, addNetwork(t, s, netB, 102))
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	sw := store.ExpectedSwitch{GUID: fabric.GUID(0x0002c90300f00001), Description: "S1"}
	if err := s.ConfirmSwitches(ctx, []store.ExpectedSwitch{sw}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordEnforcementErrors(ctx, term, []store.EnforcementSighting{
		{Switch: sw.GUID.String(), Port: 3, Line: "0x01 -> Clearing Enforcement bit"}}); err != nil {
		t.Fatal(err)
	}
	return term, jobs
}

func appliedRow(term, rev int64, finished time.Time) store.Apply {
	return store.Apply{Revision: rev, SHA256: "ab", Term: term, Outcome: "applied", Detail: "SUBNET UP",
		StartedAt: finished.Add(-time.Second), FinishedAt: finished}
}

// testFinishApply: with the gates closed the apply is recorded and nothing
// completes; with them open the jobs up to the revision complete, no earlier
// than the apply finished, and the Kubernetes last_updated moves, in the same
// commit. open sees what the gates' queries read.
func testFinishApply(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	term, jobs := finishSetup(t, s)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

	var seen store.GateState
	f, err := clockAt(s, at).FinishApply(ctx, appliedRow(term, 2, at), func(gs store.GateState) bool {
		seen = gs
		return false
	})
	if err != nil || !f.Recorded || f.Open || f.Completed != 0 {
		t.Fatalf("FinishApply with the gates closed = %+v, %v; want recorded, nothing completed", f, err)
	}
	expected, _ := s.ExpectedSwitches(ctx)
	errs, _ := s.EnforcementErrors(ctx)
	if !slices.Equal(seen.Expected, expected) || len(seen.Errors) != 1 || seen.Errors[0] != errs[0] ||
		len(f.Gates.Expected) != 1 || len(f.Gates.Errors) != 1 {
		t.Errorf("open saw %+v (returned %+v); want the switches %+v and the errors %+v", seen, f.Gates, expected, errs)
	}
	if a, err := s.LastApply(ctx); err != nil || a.Revision != 2 || !a.FinishedAt.Equal(at) {
		t.Errorf("LastApply = %+v, %v; want revision 2, the apply with the gates closed", a, err)
	}
	for _, j := range jobs {
		if got := job(t, s, j.ID); got.Status != store.StatusPending {
			t.Errorf("job %d is %s with the gates closed", j.ID, got.Status)
		}
	}
	if got, _ := s.KubernetesLastUpdated(ctx); got != nil {
		t.Errorf("last_updated = %v with the gates closed", got)
	}

	// Open: the store's clock is behind the apply's end, and the jobs finish
	// with the apply, not before it.
	end := at.Add(2 * time.Second)
	f, err = clockAt(s, at.Add(time.Second)).FinishApply(ctx, appliedRow(term, 2, end),
		func(store.GateState) bool { return true })
	if err != nil || !f.Recorded || !f.Open || f.Completed != 2 {
		t.Fatalf("FinishApply with the gates open = %+v, %v; want 2 jobs completed", f, err)
	}
	for _, j := range jobs[:2] {
		got := job(t, s, j.ID)
		if got.Status != store.StatusCompleted || got.FinishedAt == nil || got.FinishedAt.Before(end) {
			t.Errorf("job %d = %s finished %v; want Completed no earlier than %v", j.ID, got.Status, got.FinishedAt, end)
		}
	}
	if got := job(t, s, jobs[2].ID); got.Status != store.StatusPending {
		t.Errorf("job of revision 3 is %s after an apply of revision 2", got.Status)
	}
	if got, err := s.KubernetesLastUpdated(ctx); err != nil || got == nil || !got.Equal(end) {
		t.Errorf("last_updated = %v, %v; want %v", got, err, end)
	}
	if a, err := s.LastApply(ctx); err != nil || a.Revision != 2 || !a.FinishedAt.Equal(end) {
		t.Errorf("LastApply = %+v, %v; want the open apply's row", a, err)
	}
}

// testFinishApplyStale: a deposed term's FinishApply records nothing,
// completes nothing and does not even ask about the gates.
func testFinishApplyStale(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	old, jobs := finishSetup(t, s)
	if _, err := s.NewTerm(ctx, "manager-2"); err != nil {
		t.Fatal(err)
	}
	f, err := s.FinishApply(ctx, appliedRow(old, 3, time.Now().UTC()), func(store.GateState) bool {
		t.Error("open asked for a stale term")
		return true
	})
	if err != nil || f.Recorded || f.Open || f.Completed != 0 {
		t.Fatalf("FinishApply of a stale term = %+v, %v; want nothing", f, err)
	}
	if _, err := s.LastApply(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LastApply after a stale term's FinishApply = %v; want ErrNotFound", err)
	}
	for _, j := range jobs {
		if got := job(t, s, j.ID); got.Status != store.StatusPending {
			t.Errorf("job %d is %s after a stale term's FinishApply", j.ID, got.Status)
		}
	}
	if got, _ := s.KubernetesLastUpdated(ctx); got != nil {
		t.Errorf("last_updated = %v after a stale term's FinishApply", got)
	}
}

// testFinishApplyFailsMidway: a transaction that fails after the apply's
// row was written (its context ends while the gates are evaluated) leaves
// neither the row nor a completed job.
func testFinishApplyFailsMidway(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	term, jobs := finishSetup(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := s.FinishApply(ctx, appliedRow(term, 3, time.Now().UTC()), func(store.GateState) bool {
		cancel()
		return true
	})
	if err == nil {
		t.Fatal("FinishApply whose context ended midway succeeded")
	}
	ctx = t.Context()
	if a, err := s.LastApply(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LastApply after a failed FinishApply = %+v, %v; want ErrNotFound", a, err)
	}
	for _, j := range jobs {
		if got := job(t, s, j.ID); got.Status != store.StatusPending {
			t.Errorf("job %d is %s after a failed FinishApply", j.ID, got.Status)
		}
	}
	// The database is not left locked: the next one goes through.
	if f, err := s.FinishApply(ctx, appliedRow(term, 3, time.Now().UTC()),
		func(store.GateState) bool { return true }); err != nil || f.Completed != 3 {
		t.Errorf("FinishApply after the failed one = %+v, %v; want 3 jobs completed", f, err)
	}
}

// testFinishApplyGateState: whatever the gates' tables hold (no switch and no
// error, switches alone, errors alone, both), open is given what
// ExpectedSwitches and EnforcementErrors read.
func testFinishApplyGateState(t *testing.T, s *store.Store) {
	ctx := t.Context()
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	sws := []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"}, {GUID: 0x0002c90300f00002, Description: "S2"}}
	errLine := store.EnforcementSighting{Switch: sws[1].GUID.String(), Port: 4, Line: "0x01 -> Clearing Enforcement bit"}
	steps := []struct {
		name string
		do   func() error
	}{
		{"empty", func() error { return nil }},
		{"an error alone", func() error { return s.RecordEnforcementErrors(ctx, term, []store.EnforcementSighting{errLine}) }},
		{"switches and an error", func() error { return s.ConfirmSwitches(ctx, sws) }},
		{"switches alone", func() error { _, err := s.ClearEnforcementErrors(ctx); return err }},
	}
	for i, step := range steps {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var seen store.GateState
		f, err := s.FinishApply(ctx, appliedRow(term, int64(i), time.Now().UTC()), func(gs store.GateState) bool {
			seen = gs
			return false
		})
		if err != nil || !f.Recorded {
			t.Fatalf("%s: FinishApply = %+v, %v", step.name, f, err)
		}
		expected, err1 := s.ExpectedSwitches(ctx)
		errs, err2 := s.EnforcementErrors(ctx)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seen.Expected, expected) || !slices.Equal(seen.Errors, errs) {
			t.Errorf("%s: open saw switches %+v and errors %+v; want %+v and %+v", step.name, seen.Expected,
				seen.Errors, expected, errs)
		}
	}
}

// testFinishApplyProven: an apply whose read-back proof holds some jobs
// completes only the ones it names, up to its revision, with its applied row
// and behind the gates; a held job stays open through a later revision's
// apply, and last_updated moves only when no Kubernetes change is held.
func testFinishApplyProven(t *testing.T, s *store.Store) {
	s = kubeStore(s)
	ctx := t.Context()
	term, jobs := finishSetup(t, s) // revisions 1 (network), 2 (Kubernetes), 3 (network)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	all := store.Proven{Jobs: []int64{jobs[0].ID, jobs[1].ID, jobs[2].ID}, Kubernetes: true}
	closed := func(store.GateState) bool { return false }
	open := func(store.GateState) bool { return true }
	status := func(want ...string) {
		t.Helper()
		for i, j := range jobs {
			if got := job(t, s, j.ID); got.Status != want[i] {
				t.Errorf("job %d (revision %d) is %s; want %s", j.ID, j.Revision, got.Status, want[i])
			}
		}
	}
	pending, done := store.StatusPending, store.StatusCompleted

	if f, err := clockAt(s, at).FinishApplyProven(ctx, appliedRow(term, 3, at), all, closed); err != nil ||
		!f.Recorded || f.Open || f.Completed != 0 {
		t.Fatalf("FinishApplyProven with the gates closed = %+v, %v; want recorded, nothing completed", f, err)
	}
	status(pending, pending, pending)

	// Revision 2's apply, the Kubernetes job held: only the network's job of
	// revision 1 completes (revision 3's is past the apply), and
	// last_updated stays.
	end := at.Add(time.Second)
	held := store.Proven{Jobs: []int64{jobs[0].ID, jobs[2].ID}}
	f, err := clockAt(s, at).FinishApplyProven(ctx, appliedRow(term, 2, end), held, open)
	if err != nil || !f.Recorded || !f.Open || f.Completed != 1 {
		t.Fatalf("FinishApplyProven(2) = %+v, %v; want 1 job completed", f, err)
	}
	status(done, pending, pending)
	if got := job(t, s, jobs[0].ID); got.FinishedAt == nil || got.FinishedAt.Before(end) {
		t.Errorf("job finished %v; want no earlier than the apply, %v", got.FinishedAt, end)
	}
	if got, _ := s.KubernetesLastUpdated(ctx); got != nil {
		t.Errorf("last_updated = %v while its job is held", got)
	}
	// A later revision's apply does not complete the held job.
	if f, err := s.FinishApplyProven(ctx, appliedRow(term, 3, end), held, open); err != nil || f.Completed != 1 {
		t.Fatalf("FinishApplyProven(3) = %+v, %v; want 1 job completed", f, err)
	}
	status(done, pending, done)
	if a, err := s.LastApply(ctx); err != nil || a.Revision != 3 {
		t.Errorf("LastApply = %+v, %v; want revision 3's row", a, err)
	}
	// A deposed term completes nothing.
	newer, err := s.NewTerm(ctx, "manager-2")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := s.FinishApplyProven(ctx, appliedRow(term, 3, end), all, open); err != nil || f.Recorded || f.Completed != 0 {
		t.Fatalf("FinishApplyProven of a stale term = %+v, %v; want nothing", f, err)
	}
	status(done, pending, done)
	// Once proven, the held job completes, noted as it was proven, and
	// last_updated moves.
	later := end.Add(time.Second)
	const note = "not a port on the fabric: proven by OpenSM's log"
	all.Notes = map[int64]string{jobs[1].ID: note, jobs[0].ID: "already completed"}
	if f, err := clockAt(s, at).FinishApplyProven(ctx, appliedRow(newer, 3, later), all, open); err != nil || f.Completed != 1 {
		t.Fatalf("FinishApplyProven of the held job = %+v, %v; want 1 job completed", f, err)
	}
	status(done, done, done)
	if got := job(t, s, jobs[1].ID).Description; got != jobs[1].Description+" ("+note+")" {
		t.Errorf("the noted job's description = %q; want what it does, then the note", got)
	}
	if got := job(t, s, jobs[0].ID).Description; got != jobs[0].Description {
		t.Errorf("a job completed before its note = %q; want unchanged", got)
	}
	if got, err := s.KubernetesLastUpdated(ctx); err != nil || got == nil || !got.Equal(later) {
		t.Errorf("last_updated = %v, %v; want %v", got, err, later)
	}
}
