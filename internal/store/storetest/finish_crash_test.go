package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestFinishApplyCrash kills (SIGKILL) a manager process inside FinishApply,
// after it wrote the apply's row and read the gates, before the jobs
// complete: on every engine, neither the row nor a completed job is left,
// and the same term finishes the apply afterwards, from another process.
// Every Completed job thus has its applied row, wherever the manager dies.
func TestFinishApplyCrash(t *testing.T) {
	crashTest(t, func(t *testing.T, db Database, s *store.Store, j store.Job) {
		term, err := s.NewTerm(t.Context(), "crashing manager")
		if err != nil {
			t.Fatal(err)
		}

		killHelperAt(t, db, "finish-crash", "mid-finish",
			"AFM_STORETEST_TERM="+strconv.FormatInt(term, 10),
			"AFM_STORETEST_REVISION="+strconv.FormatInt(j.Revision, 10))

		if a, err := s.LastApply(t.Context()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after the crash LastApply = %+v, %v; want no apply recorded", a, err)
		}
		if got := job(t, s, j.ID); got.Status != store.StatusPending {
			t.Errorf("after the crash the job is %s; want Pending", got.Status)
		}
		f, err := s.FinishApply(t.Context(), appliedRow(term, j.Revision, time.Now().UTC()),
			func(store.GateState) bool { return true })
		if err != nil || !f.Recorded || f.Completed != 1 {
			t.Errorf("FinishApply after the crash = %+v, %v; want the job completed", f, err)
		}
	})
}

// runFinishCrashHelper runs FinishApply of AFM_STORETEST_REVISION by term
// AFM_STORETEST_TERM on the database of AFM_STORETEST_ENGINE and
// AFM_STORETEST_DSN, says "mid-finish" once inside it (the gates asked, the
// apply's row written), then waits to be killed.
func runFinishCrashHelper() {
	ctx := context.Background()
	fail, s := startHelper(ctx, "finish crash helper")
	term, err1 := strconv.ParseInt(os.Getenv("AFM_STORETEST_TERM"), 10, 64)
	rev, err2 := strconv.ParseInt(os.Getenv("AFM_STORETEST_REVISION"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		fail("%v", err)
	}
	f, err := s.FinishApply(ctx, appliedRow(term, rev, time.Now().UTC()), func(store.GateState) bool {
		fmt.Println("mid-finish")
		select {}
	})
	fail("FinishApply returned (%+v, %v) before the process was killed", f, err)
}
