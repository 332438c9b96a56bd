package applier

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// markWaitsForTheFile is a store whose MarkJobsRunning returns only once the
// partitions file exists: it waits for the apply's write, which an apply
// that marked the jobs before writing would start only after it.
type markWaitsForTheFile struct {
	Store
	path    string
	reloads func() int
	// reloadsAtMark: the SIGHUPs sent when the marking returned.
	reloadsAtMark chan int
}

func (s markWaitsForTheFile) MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(s.path); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return 0, errors.New("the partitions file was not written while the jobs were being marked")
		case <-time.After(time.Millisecond):
		}
	}
	n, err := s.Store.MarkJobsRunning(ctx, term, revision)
	s.reloadsAtMark <- s.reloads()
	return n, err
}

// The jobs' marking and the file's write each wait for an fsync; they run
// side by side, and OpenSM is signalled only once both are done.
func TestApplyMarksJobsWhileTheFileIsWritten(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	if _, err := os.Stat(r.term.Cfg.PartitionsFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partitions file before the first apply: %v, want none", err)
	}
	s := markWaitsForTheFile{Store: r.term.Store, path: r.term.Cfg.PartitionsFile, reloads: r.sm.Reloads,
		reloadsAtMark: make(chan int, 1)}
	r.term.Store = s
	job := r.network(101)
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if n := <-s.reloadsAtMark; n != 0 {
		t.Errorf("%d SIGHUPs sent before the jobs were marked Running, want none", n)
	}
	if j := r.job(job.ID); j.Status != store.StatusCompleted {
		t.Errorf("job after the apply: %+v, want Completed", j)
	}
}
