package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// statusTests cover what --status and the applier's gates read and write.
var statusTests = []storeTest{
	{"DescribeOpenJobsIsFencedAndSparesFinishedJobs", testDescribeOpenJobs},
	{"DescribeJobSaysItToThatJobAlone", testDescribeJob},
	{"LeadershipNamesTheLastWinner", testLeadership},
	{"OldestOpenJobsByStatus", testOldestOpenJobs},
}

// testOldestOpenJobs: the oldest Pending and Running jobs' creation times,
// which the metrics turn into ages; no entry for a status without jobs.
func testOldestOpenJobs(t *testing.T, s *store.Store) {
	ctx := t.Context()
	got, err := s.OldestOpenJobs(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("OldestOpenJobs on an empty database = %v, %v; want none", got, err)
	}
	first := addNetwork(t, s, netA, 101)
	second := addNetwork(t, s, netB, 102)
	// As stored: PostgreSQL and MariaDB keep microseconds.
	first, second = job(t, s, first.ID), job(t, s, second.ID)
	got, err = s.OldestOpenJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, running := got[store.StatusRunning]; running || !got[store.StatusPending].Equal(first.CreatedAt.UTC()) {
		t.Fatalf("OldestOpenJobs = %v; want Pending at %v (the first job's creation) and no Running", got, first.CreatedAt)
	}
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkJobsRunning(ctx, term, first.Revision); err != nil {
		t.Fatal(err)
	}
	got, err = s.OldestOpenJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !got[store.StatusRunning].Equal(first.CreatedAt.UTC()) || !got[store.StatusPending].Equal(second.CreatedAt.UTC()) {
		t.Fatalf("OldestOpenJobs = %v; want Running at %v, Pending at %v", got, first.CreatedAt, second.CreatedAt)
	}
	if _, err := s.CompleteJobs(ctx, term, second.Revision); err != nil {
		t.Fatal(err)
	}
	if got, err = s.OldestOpenJobs(ctx); err != nil || len(got) != 0 {
		t.Fatalf("OldestOpenJobs once every job completed = %v, %v; want none", got, err)
	}
}

// testDescribeJob: a reason said to one open job reaches that job alone,
// fenced by the term, once; a finished job keeps its description.
func testDescribeJob(t *testing.T, s *store.Store) {
	ctx := t.Context()
	now := time.Now().UTC()
	done := addNetwork(t, s, netA, 101)
	mine := addNetwork(t, s, netB, 102)
	other := addNetwork(t, s, "5e6f7a8b-2222-4c3d-9e8f-0a1b2c3d4e5f", 103)
	old, err := clockAt(s, now).NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := clockAt(s, now).NewTerm(ctx, "manager-2")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := clockAt(s, now).CompleteJobs(ctx, cur, done.Revision); err != nil || n != 1 {
		t.Fatalf("CompleteJobs = %d, %v; want 1", n, err)
	}
	const why = "Not completing until the ports' own P_Key tables show the change: port 0x0002c90300000201: no answer"
	if n, err := s.DescribeJob(ctx, old, mine.ID, why); err != nil || n != 0 {
		t.Errorf("DescribeJob with an old term = %d, %v; want 0", n, err)
	}
	if n, err := s.DescribeJob(ctx, cur, mine.ID, why); err != nil || n != 1 {
		t.Errorf("DescribeJob = %d, %v; want 1", n, err)
	}
	if got := job(t, s, mine.ID); got.Description != mine.Description+"\n"+why {
		t.Errorf("the job described = %q; want %q, then %q", got.Description, mine.Description, why)
	}
	if got := job(t, s, other.ID); got.Description != other.Description {
		t.Errorf("another open job got the description %q", got.Description)
	}
	if n, err := s.DescribeJob(ctx, cur, mine.ID, why); err != nil || n != 0 {
		t.Errorf("DescribeJob again = %d, %v; want 0", n, err)
	}
	if n, err := s.DescribeJob(ctx, cur, done.ID, why); err != nil || n != 0 {
		t.Errorf("DescribeJob of a completed job = %d, %v; want 0", n, err)
	}
	if _, err := s.DescribeJob(ctx, cur, mine.ID, " "); err == nil {
		t.Error("an empty description was accepted")
	}
}

func testDescribeOpenJobs(t *testing.T, s *store.Store) {
	ctx := t.Context()
	now := time.Now().UTC()
	done := addNetwork(t, s, netA, 101)
	open := addNetwork(t, s, netB, 102)
	later := addNetwork(t, s, "5e6f7a8b-2222-4c3d-9e8f-0a1b2c3d4e5f", 103)
	old, err := clockAt(s, now).NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := clockAt(s, now).NewTerm(ctx, "manager-2")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := clockAt(s, now).CompleteJobs(ctx, cur, done.Revision); err != nil || n != 1 {
		t.Fatalf("CompleteJobs = %d, %v; want 1", n, err)
	}
	const why = "No expected switches: run --confirm-switches"
	if n, err := s.DescribeOpenJobs(ctx, old, open.Revision, why); err != nil || n != 0 {
		t.Errorf("DescribeOpenJobs with an old term = %d, %v; want 0", n, err)
	}
	if got := job(t, s, open.ID); got.Description != open.Description {
		t.Errorf("an old term changed the description to %q", got.Description)
	}
	if n, err := s.DescribeOpenJobs(ctx, cur, open.Revision, why); err != nil || n != 1 {
		t.Errorf("DescribeOpenJobs = %d, %v; want 1 (the open job up to its revision)", n, err)
	}
	if got := job(t, s, open.ID); got.Description != open.Description+"\n"+why || got.Status != store.StatusPending {
		t.Errorf("open job = %q %q; want %q, then %q, still Pending", got.Status, got.Description, open.Description, why)
	}
	if got := job(t, s, done.ID); got.Description != done.Description {
		t.Errorf("a completed job's description became %q", got.Description)
	}
	if got := job(t, s, later.ID); got.Description != later.Description {
		t.Errorf("a job of a later revision got the description %q", got.Description)
	}
	// Saying it again changes nothing; a Running job is open too.
	if n, err := s.DescribeOpenJobs(ctx, cur, open.Revision, why); err != nil || n != 0 {
		t.Errorf("DescribeOpenJobs again = %d, %v; want 0", n, err)
	}
	if _, err := clockAt(s, now).MarkJobsRunning(ctx, cur, later.Revision); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DescribeOpenJobs(ctx, cur, later.Revision, "another reason"); err != nil || n != 2 {
		t.Errorf("DescribeOpenJobs of Running jobs = %d, %v; want 2", n, err)
	}
	if _, err := s.DescribeOpenJobs(ctx, cur, later.Revision, "  "); err == nil {
		t.Error("an empty description was accepted")
	}
	long := strings.Repeat("x", 10000)
	if _, err := s.DescribeOpenJobs(ctx, cur, later.Revision, long); err != nil {
		t.Errorf("a long description: %v", err)
	}
	if got := job(t, s, later.ID); len(got.Description) >= len(long) ||
		!strings.HasSuffix(got.Description, " more bytes: see the manager's log)") {
		t.Errorf("a long description was stored with %d bytes, not shortened", len(got.Description))
	}
	// A new reason replaces the old; completing or failing drops it.
	if _, err := s.DescribeOpenJobs(ctx, cur, later.Revision, "switch gone"); err != nil {
		t.Fatal(err)
	}
	if got := job(t, s, later.ID); got.Description != later.Description+"\nswitch gone" {
		t.Errorf("description after a new reason = %q", got.Description)
	}
	if _, err := clockAt(s, now).FailJobs(ctx, cur, open.Revision, "OpenSM said no"); err != nil {
		t.Fatal(err)
	}
	if _, err := clockAt(s, now).CompleteJobs(ctx, cur, later.Revision); err != nil {
		t.Fatal(err)
	}
	for _, j := range []store.Job{open, later} {
		if got := job(t, s, j.ID); got.Description != j.Description {
			t.Errorf("finished job %d (%s) kept its reason: %q", j.ID, got.Status, got.Description)
		}
	}
}

func testLeadership(t *testing.T, s *store.Store) {
	ctx := t.Context()
	l, err := s.Leadership(ctx)
	if err != nil || l.Term != 0 || l.Holder != "" || l.Heartbeat != nil {
		t.Fatalf("Leadership of a new database = %+v, %v; want term 0, no holder, no heartbeat", l, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := clockAt(s, now.Add(-time.Minute)).NewTerm(ctx, "host-a pid 1"); err != nil {
		t.Fatal(err)
	}
	term, err := clockAt(s, now).NewTerm(ctx, "host-b pid 2")
	if err != nil {
		t.Fatal(err)
	}
	l, err = s.Leadership(ctx)
	if err != nil || l.Term != term || l.Holder != "host-b pid 2" || l.Heartbeat == nil {
		t.Fatalf("Leadership = %+v, %v; want term %d held by host-b pid 2", l, err, term)
	}
	if d := l.Heartbeat.Sub(now); d < -time.Second || d > time.Second || l.Heartbeat.Location() != time.UTC {
		t.Errorf("Heartbeat = %v, want %v in UTC", l.Heartbeat, now)
	}
	// The holder's heartbeats move it on; an old term's are refused.
	started := *l.Heartbeat
	time.Sleep(20 * time.Millisecond)
	if err := s.Heartbeat(ctx, term); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if l, err = s.Leadership(ctx); err != nil || l.Heartbeat == nil || !l.Heartbeat.After(started) {
		t.Errorf("Leadership after a heartbeat = %+v, %v; want a heartbeat after %v", l, err, started)
	}
	if err := s.Heartbeat(ctx, term-1); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a heartbeat of an old term = %v; want ErrFenced", err)
	}
	// A heartbeat that writes the time already there changes no row (MariaDB
	// then reports none affected), yet its term is current: ending the term
	// on it would be wrong.
	same := clockAt(s, now.Add(time.Minute))
	for range 2 {
		if err := same.Heartbeat(ctx, term); err != nil {
			t.Errorf("a heartbeat at the time already recorded: %v; want none", err)
		}
	}
}

func job(t *testing.T, s *store.Store, id int64) store.Job {
	t.Helper()
	j, err := s.GetJob(t.Context(), id)
	if err != nil {
		t.Fatalf("GetJob(%d): %v", id, err)
	}
	return j
}
