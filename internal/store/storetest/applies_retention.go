package storetest

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The applies table's retention (store/retention.go): a row per apply attempt
// (retries, drift repairs) goes once older than the retention, unless --status
// reads it (the newest) or it proves a Completed job still kept.
var appliesRetentionTests = []storeTest{
	{"AppliesRetentionKeepsWhatIsRead", testAppliesRetention},
	{"AppliesRetentionBesideFinishApply", testAppliesRetentionBesideFinish},
}

// recordApply records an apply of revision rev that finished at, fenced by
// term.
func recordApply(t *testing.T, s *store.Store, term, rev int64, outcome string, at time.Time) {
	t.Helper()
	a := store.Apply{Revision: rev, SHA256: "ab", Term: term, Outcome: outcome, Detail: outcome,
		StartedAt: at.Add(-time.Second), FinishedAt: at}
	if ok, err := s.RecordApply(t.Context(), a); err != nil || !ok {
		t.Fatalf("RecordApply(revision %d, %s) = %t, %v", rev, outcome, ok, err)
	}
}

// countApplies deletes every row of applies and says how many there were:
// the end of a test.
func countApplies(t *testing.T, s *store.Store, term int64) int64 {
	t.Helper()
	n, err := s.DeleteAppliesBefore(t.Context(), term, math.MaxInt64, time.Now().Add(100*365*24*time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testAppliesRetention(t *testing.T, s *store.Store) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	day := 24 * time.Hour
	const retention = 7 * 24 * time.Hour
	ids := []string{netA, netB, "00000003-0000-4000-8000-000000000000", "00000004-0000-4000-8000-000000000000"}
	var jobs []store.Job // job i has revision i+1
	for i, id := range ids {
		jobs = append(jobs, addNetwork(t, s, id, int64(201+i)))
	}
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	prune := func(want int64) {
		t.Helper()
		if n, err := s.DeleteExpiredApplies(ctx, term, retention); err != nil || n != want {
			t.Fatalf("DeleteExpiredApplies = %d, %v; want %d", n, err, want)
		}
	}
	// No apply applied yet: the newest row stays, however old.
	recordApply(t, s, term, 1, "timeout", now.Add(-40*day))
	prune(0)
	if a := lastApply(t, s); a.Outcome != "timeout" {
		t.Fatalf("LastApply = %+v; want the one row", a)
	}

	// A month of attempts: what proved the jobs, and retries around them.
	recordApply(t, s, term, 1, "applied", now.Add(-30*day))
	recordApply(t, s, term, 1, "timeout", now.Add(-29*day))
	recordApply(t, s, term, 2, "applied", now.Add(-20*day)) // proves jobs 1 and 2
	if n, err := clockAt(s, now.Add(-20*day)).CompleteJobs(ctx, term, 2); err != nil || n != 2 {
		t.Fatalf("CompleteJobs(2) = %d, %v", n, err)
	}
	recordApply(t, s, term, 3, "write-failed", now.Add(-10*day))
	recordApply(t, s, term, 3, "applied", now.Add(-9*day)) // proves job 3
	if n, err := clockAt(s, now.Add(-9*day)).CompleteJobs(ctx, term, 3); err != nil || n != 1 {
		t.Fatalf("CompleteJobs(3) = %d, %v", n, err)
	}
	recordApply(t, s, term, 4, "timeout", now.Add(-day)) // job 4 waits

	// A deposed leader deletes nothing; one batch of 1 takes the oldest.
	if n, err := s.DeleteAppliesBefore(ctx, term-1, math.MaxInt64, now, 1); err != nil || n != 0 {
		t.Fatalf("a batch with an old term deleted %d, %v; want none", n, err)
	}
	if n, err := s.DeleteAppliesBefore(ctx, term, math.MaxInt64, now.Add(-35*day), 5); err != nil || n != 1 {
		t.Fatalf("a batch before 35 days deleted %d, %v; want the one row of 40 days", n, err)
	}
	// Jobs 1 and 2, Completed 20 days ago, are still kept (the jobs' own
	// retention has not run): the apply that proved them stays, and the two
	// rows before it go.
	prune(2)
	prune(0)
	// Once those jobs are gone, the rows up to the apply that proved job 3
	// (older than the retention) go; that apply stays while job 3 is kept.
	if n, err := s.DeleteExpiredJobs(ctx, term, 15*day); err != nil || n != 2 {
		t.Fatalf("DeleteExpiredJobs(15 days) = %d, %v; want jobs 1 and 2", n, err)
	}
	prune(2)
	// With no Completed job left, the newest applied row is kept all the same
	// (the last proof of what the fabric runs), and the newest row.
	if n, err := s.DeleteExpiredJobs(ctx, term, retention); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredJobs = %d, %v; want job 3", n, err)
	}
	prune(0)
	if a := lastApply(t, s); a.Revision != 4 || a.Outcome != "timeout" {
		t.Errorf("LastApply = %+v; want the newest row, revision 4", a)
	}
	if n := countApplies(t, s, term); n != 2 {
		t.Errorf("%d rows kept; want 2, the apply of revision 3 and the newest", n)
	}
	if _, err := s.DeleteExpiredApplies(ctx, term, 0); err == nil {
		t.Error("DeleteExpiredApplies with no retention: no error")
	}
	if _, err := s.GetJob(ctx, jobs[3].ID); err != nil {
		t.Errorf("the open job 4: %v", err)
	}
}

// testAppliesRetentionBesideFinishApply: prunes that find every row expired
// run while the applier finishes applies: the newest row is never deleted
// under --status, and the apply that completed the jobs stays.
func testAppliesRetentionBesideFinish(t *testing.T, s *store.Store) {
	ctx := t.Context()
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	later := clockAt(s, time.Now().UTC().Add(30*24*time.Hour)) // every row expired for it
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pruneErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := later.DeleteExpiredApplies(ctx, term, time.Hour); err != nil {
				pruneErr = err
				return
			}
		}
	}()
	const rounds = 15
	for i := range rounds {
		j := addNetwork(t, s, "0000000"+string(rune('a'+i))+"-0000-4000-8000-000000000000", int64(301+i))
		recordApply(t, s, term, j.Revision, "timeout", time.Now().UTC())
		a := store.Apply{Revision: j.Revision, SHA256: "ab", Term: term, Outcome: "applied", Detail: "SUBNET UP",
			StartedAt: time.Now().UTC(), FinishedAt: time.Now().UTC()}
		if f, err := s.FinishApply(ctx, a, func(store.GateState) bool { return true }); err != nil || f.Completed != 1 {
			t.Fatalf("FinishApply(%d) = %+v, %v", j.Revision, f, err)
		}
		if got, err := s.LastApply(ctx); err != nil || got.Revision != j.Revision || got.Outcome != "applied" {
			t.Fatalf("LastApply after FinishApply(%d) = %+v, %v; want that apply", j.Revision, got, err)
		}
	}
	close(stop)
	wg.Wait()
	if pruneErr != nil && !errors.Is(pruneErr, ctx.Err()) {
		t.Fatalf("DeleteExpiredApplies beside FinishApply: %v", pruneErr)
	}
	// Every job is Completed, the oldest by the first round's apply: every
	// row from it on stays, the timeout before it may go.
	if _, err := later.DeleteExpiredApplies(ctx, term, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := countApplies(t, s, term); n != 2*rounds-1 {
		t.Errorf("%d rows kept; want %d, from the first applied one on", n, 2*rounds-1)
	}
}
