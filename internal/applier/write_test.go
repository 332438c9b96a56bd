package applier

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// markAfterTheSignal is a store whose MarkJobsRunning returns only once the
// partitions file exists and OpenSM was signalled: it waits for the apply's
// write and SIGHUP, which an apply that waited for the marking before either
// would never send. fail makes the marking fail then, as a database gone
// during the sweep would.
type markAfterTheSignal struct {
	Store
	path    string
	reloads func() int
	fail    bool
	// atMark says what was wrong when the marking returned, "" if
	// nothing: OpenSM not signalled, or a job Completed already (nothing
	// completes before the mark is in).
	jobs   func() []store.Job
	atMark chan string
}

func (s markAfterTheSignal) MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(s.path); err == nil && s.reloads() > 0 {
			break
		}
		select {
		case <-ctx.Done():
			s.atMark <- "OpenSM was not signalled while the jobs were being marked"
			return 0, errors.New("OpenSM was not signalled while the jobs were being marked")
		case <-time.After(time.Millisecond):
		}
	}
	wrong := ""
	for _, j := range s.jobs() {
		if j.Status == store.StatusCompleted {
			wrong = "a job was Completed before its marking returned"
		}
	}
	s.atMark <- wrong
	if s.fail {
		return 0, errors.New("the database went away")
	}
	return s.Store.MarkJobsRunning(ctx, term, revision)
}

// The jobs' marking waits for the database's commit, which OpenSM does not
// need: it runs beside the file's write and the sweep, and no job completes
// before it is in. A marking that fails leaves the jobs open and the
// revision to be applied again, as a sweep that failed does.
func TestApplyMarksJobsBesideTheSweep(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fail       bool
		wantResult applyResult
		wantStatus string
	}{
		{"the mark is in", false, applyDone, store.StatusCompleted},
		{"the mark fails", true, applyRetry, store.StatusPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newApplyRig(t, true, func() string { return heavySweep("") })
			job := r.network(101)
			s := markAfterTheSignal{Store: r.term.Store, path: r.term.Cfg.PartitionsFile, reloads: r.sm.Reloads,
				fail: tc.fail, jobs: func() []store.Job { return []store.Job{r.job(job.ID)} },
				atMark: make(chan string, 1)}
			r.term.Store = s
			res := r.term.apply(t.Context())
			if wrong := <-s.atMark; wrong != "" {
				t.Error(wrong)
			}
			if res != tc.wantResult {
				t.Fatalf("apply: %v, want %v", res, tc.wantResult)
			}
			if j := r.job(job.ID); j.Status != tc.wantStatus {
				t.Errorf("job after the apply: %+v, want %s", j, tc.wantStatus)
			}
			if !tc.fail {
				return
			}
			// The retry, with a database that answers, completes it.
			r.term.Store = s.Store
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("apply again: %v, want done", res)
			}
			if j := r.job(job.ID); j.Status != store.StatusCompleted {
				t.Errorf("job after the apply again: %+v, want Completed", j)
			}
		})
	}
}
