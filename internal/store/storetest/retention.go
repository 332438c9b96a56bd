package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// testJobRetention: finished jobs older than the retention go, in batches;
// newer ones and open ones, however old, stay.
func testJobRetention(t *testing.T, s *store.Store) {
	ctx := t.Context()
	now := time.Now().UTC()
	const retention = 7 * 24 * time.Hour
	day := 24 * time.Hour
	// One network job per revision: job i has revision i.
	ids := []string{
		"00000001-0000-4000-8000-000000000000", "00000002-0000-4000-8000-000000000000",
		"00000003-0000-4000-8000-000000000000", "00000004-0000-4000-8000-000000000000",
		"00000005-0000-4000-8000-000000000000", "00000006-0000-4000-8000-000000000000",
	}
	var jobs []store.Job
	for i, id := range ids {
		jobs = append(jobs, addNetwork(t, s, id, int64(201+i)))
	}
	term, err := clockAt(s, now).NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	finish := func(j store.Job, ok bool, at time.Time) {
		t.Helper()
		var n int64
		if ok {
			n, err = clockAt(s, at).CompleteJobs(ctx, term, j.Revision)
		} else {
			n, err = clockAt(s, at).FailJobs(ctx, term, j.Revision, "OpenSM rejected it")
		}
		if err != nil || n != 1 {
			t.Fatalf("finish job %d: %d, %v; want 1 job", j.ID, n, err)
		}
	}
	finish(jobs[0], true, now.Add(-30*day))  // expired
	finish(jobs[1], false, now.Add(-10*day)) // expired, Failed
	finish(jobs[2], true, now.Add(-8*day))   // expired
	finish(jobs[3], true, now.Add(-6*day))   // within the retention
	// Job 5 has been Running for a month; job 6 is Pending.
	if n, err := clockAt(s, now.Add(-30*day)).MarkJobsRunning(ctx, term, jobs[4].Revision); err != nil || n != 1 {
		t.Fatalf("MarkJobsRunning = %d, %v; want 1", n, err)
	}

	// One batch of 2 takes the two oldest; the next one what is left.
	before := now.Add(-retention)
	// A deposed leader deletes nothing.
	if n, err := s.DeleteFinishedJobsBefore(ctx, term-1, before, 2); err != nil || n != 0 {
		t.Fatalf("a batch with an old term deleted %d, %v; want none", n, err)
	}
	if n, err := s.DeleteFinishedJobsBefore(ctx, term, before, 2); err != nil || n != 2 {
		t.Fatalf("first batch of 2 deleted %d, %v; want 2", n, err)
	}
	if _, err := s.GetJob(ctx, jobs[2].ID); err != nil {
		t.Errorf("job %d, the newest expired one, is gone after the first batch: %v", jobs[2].ID, err)
	}
	if n, err := s.DeleteExpiredJobs(ctx, term, retention); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredJobs = %d, %v; want 1", n, err)
	}
	if n, err := s.DeleteExpiredJobs(ctx, term, retention); err != nil || n != 0 {
		t.Fatalf("DeleteExpiredJobs again = %d, %v; want 0", n, err)
	}

	for i, j := range jobs {
		_, err := s.GetJob(ctx, j.ID)
		gone := errors.Is(err, store.ErrNotFound)
		if err != nil && !gone {
			t.Fatalf("GetJob %d: %v", j.ID, err)
		}
		if wantGone := i < 3; gone != wantGone {
			t.Errorf("job %d (#%d): deleted = %v, want %v", j.ID, i+1, gone, wantGone)
		}
	}
	if _, err := s.DeleteExpiredJobs(ctx, term, 0); err == nil {
		t.Error("DeleteExpiredJobs with no retention: no error")
	}
}
