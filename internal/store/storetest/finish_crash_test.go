package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// TestFinishApplyCrash kills (SIGKILL) a manager process inside FinishApply,
// after it wrote the apply's row and read the gates, before the jobs
// complete: on every engine, neither the row nor a completed job is left,
// and the same term finishes the apply afterwards, from another process.
// Every Completed job thus has its applied row, wherever the manager dies.
func TestFinishApplyCrash(t *testing.T) {
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			db := NewDatabase(t, engine)
			s := OpenDatabase(t, db)
			j := addNetwork(t, s, netA, 101)
			term, err := s.NewTerm(t.Context(), "crashing manager")
			if err != nil {
				t.Fatal(err)
			}

			killHelperAt(t, "finish-crash", "mid-finish",
				"AFM_STORETEST_ENGINE="+db.Engine, "AFM_STORETEST_DSN="+db.DSN,
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
}

// runFinishCrashHelper runs FinishApply of AFM_STORETEST_REVISION by term
// AFM_STORETEST_TERM on the database of AFM_STORETEST_ENGINE and
// AFM_STORETEST_DSN, says "mid-finish" once inside it (the gates asked, the
// apply's row written), then waits to be killed.
func runFinishCrashHelper() {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "finish crash helper: "+format+"\n", args...)
		os.Exit(2)
	}
	ctx := context.Background()
	term, err1 := strconv.ParseInt(os.Getenv("AFM_STORETEST_TERM"), 10, 64)
	rev, err2 := strconv.ParseInt(os.Getenv("AFM_STORETEST_REVISION"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		fail("%v", err)
	}
	s, err := storeopen.Open(ctx, os.Getenv("AFM_STORETEST_ENGINE"), os.Getenv("AFM_STORETEST_DSN"), false,
		store.Rules{}, slog.New(slog.DiscardHandler))
	if err != nil {
		fail("open the store: %v", err)
	}
	f, err := s.FinishApply(ctx, appliedRow(term, rev, time.Now().UTC()), func(store.GateState) bool {
		fmt.Println("mid-finish")
		select {}
	})
	fail("FinishApply returned (%+v, %v) before the process was killed", f, err)
}
