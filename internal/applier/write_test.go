package applier

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
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

// openedBy says whether this process holds path open: an apply whose file's
// sync is late holds the file it renamed into place until durable syncs it.
func openedBy(t *testing.T, path string) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}

// syncSeen is a Supervisor and a Store that take down, at the SIGHUP and at
// the jobs' completion, whether the partitions file's sync is still to come.
type syncSeen struct {
	Supervisor
	Store
	path     string
	t        *testing.T
	atSIGHUP []bool
	atFinish []bool
}

func (s *syncSeen) Reload(ctx context.Context) error {
	s.atSIGHUP = append(s.atSIGHUP, openedBy(s.t, s.path))
	return s.Supervisor.Reload(ctx)
}

func (s *syncSeen) FinishApply(ctx context.Context, a store.Apply, open func(store.GateState) bool) (store.Finished, error) {
	s.atFinish = append(s.atFinish, openedBy(s.t, s.path))
	return s.Store.FinishApply(ctx, a, open)
}

func (s *syncSeen) FinishApplyProven(ctx context.Context, a store.Apply, p store.Proven,
	open func(store.GateState) bool) (store.Finished, error) {
	s.atFinish = append(s.atFinish, openedBy(s.t, s.path))
	return s.Store.FinishApplyProven(ctx, a, p, open)
}

// Where only the manager starts OpenSM, an apply's file is synced during the
// sweep (it is still open, its sync to come, at the SIGHUP); elsewhere
// before the rename (closed at the SIGHUP). Either way it is synced before
// any job completes, and the file a term starts OpenSM with is synced
// before its rename.
func TestTheFileSyncOfAnApply(t *testing.T) {
	for _, tc := range []struct {
		name string
		only bool
	}{
		{"only the manager starts OpenSM (drivers process, managed)", true},
		{"someone else may (driver docker)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newApplyRig(t, true, func() string { return heavySweep("") })
			r.term.Cfg.OnlyManagerStartsOpenSM = tc.only
			s := &syncSeen{Supervisor: r.term.SM, Store: r.term.Store, path: r.term.Cfg.PartitionsFile, t: t}
			r.term.SM, r.term.Store = s, s
			if err := r.term.writeCurrent(t.Context()); err != nil {
				t.Fatal(err)
			}
			if openedBy(t, s.path) {
				t.Error("writeCurrent left the file open: its sync was not before the rename")
			}
			job := r.network(101)
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("apply: %v", res)
			}
			if j := r.job(job.ID); j.Status != store.StatusCompleted {
				t.Fatalf("job: %+v", j)
			}
			if len(s.atSIGHUP) != 1 || s.atSIGHUP[0] != tc.only {
				t.Errorf("the file's sync still to come at the SIGHUP: %v, want [%v]", s.atSIGHUP, tc.only)
			}
			if len(s.atFinish) == 0 || slices.Contains(s.atFinish, true) {
				t.Errorf("the file's sync still to come at the jobs' completion: %v, want none", s.atFinish)
			}
			if openedBy(t, s.path) {
				t.Error("the file is still open after the apply")
			}
		})
	}
}

// An apply that ends between the rename and the SIGHUP (OpenSM's SIGHUP
// refused) syncs the file it put in place and closes it.
func TestALateSyncIsNotLeftUndone(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	r.term.Cfg.OnlyManagerStartsOpenSM = true
	r.term.SM = refusedSIGHUP{r.term.SM}
	r.network(101)
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Fatalf("apply: %v, want a retry", res)
	}
	if openedBy(t, r.term.Cfg.PartitionsFile) {
		t.Error("the file is still open, its sync undone, after an apply that failed")
	}
}

type refusedSIGHUP struct{ Supervisor }

func (refusedSIGHUP) Reload(context.Context) error {
	return errors.New("opensm: not running; no SIGHUP sent")
}

// markSeen is a Store that takes down, at each MarkJobsRunning, how many
// SIGHUPs OpenSM had been sent.
type markSeen struct {
	Store
	reloads func() int
	atMark  []int
}

func (s *markSeen) MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error) {
	s.atMark = append(s.atMark, s.reloads())
	return s.Store.MarkJobsRunning(ctx, term, revision)
}

// The jobs are marked Running once OpenSM was signalled, never beside the
// file's write (the mark's commit held the file system's journal that the
// write's temporary file waited for); an apply that ends before the SIGHUP
// marks nothing and leaves its jobs Pending, to be applied again.
func TestTheJobsAreMarkedAfterTheSIGHUP(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	s := &markSeen{Store: r.term.Store, reloads: r.sm.Reloads}
	r.term.Store = s
	sm := r.term.SM
	r.term.SM = refusedSIGHUP{sm}
	job := r.network(101)
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Fatalf("apply with the SIGHUP refused: %v, want a retry", res)
	}
	if len(s.atMark) != 0 {
		t.Errorf("the jobs were marked Running by an apply that never signalled OpenSM")
	}
	if j := r.job(job.ID); j.Status != store.StatusPending {
		t.Errorf("job after the refused SIGHUP: %+v, want Pending", j)
	}
	r.term.SM = sm
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v", res)
	}
	if len(s.atMark) != 1 || s.atMark[0] != 1 {
		t.Errorf("SIGHUPs sent at each mark: %v, want [1]", s.atMark)
	}
	if j := r.job(job.ID); j.Status != store.StatusCompleted {
		t.Errorf("job: %+v, want Completed", j)
	}
}

// Where only the manager starts OpenSM, an apply makes the next apply's file
// ahead during its sweep (a hidden, empty file beside the partitions file),
// the next apply's file is that one, and the term's end removes the one
// made ahead.
func TestTheNextFileIsMadeAhead(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	r.term.Cfg.OnlyManagerStartsOpenSM = true
	path := r.term.Cfg.PartitionsFile
	ahead := func() []string {
		t.Helper()
		left, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*"))
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	r.network(101)
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v", res)
	}
	made := ahead()
	if len(made) != 1 {
		t.Fatalf("after an apply, made ahead: %q, want one file", made)
	}
	held, err := os.Open(made[0]) // its inode is not freed (and reused) meanwhile
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	madeFile, err := held.Stat()
	if err != nil {
		t.Fatal(err)
	}
	job := r.network(102)
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v", res)
	}
	if j := r.job(job.ID); j.Status != store.StatusCompleted {
		t.Fatalf("job: %+v", j)
	}
	placed, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(placed, madeFile) {
		t.Error("the second apply's file is not the one made ahead")
	}
	r.term.closeNextFile()
	if left := ahead(); len(left) != 0 {
		t.Errorf("after the term's end, left: %q", left)
	}
}
