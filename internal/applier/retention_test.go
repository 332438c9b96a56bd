package applier

import (
	"math"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The term's pruning deletes the apply records older than the job retention
// with the jobs, keeping the newest, which --status shows.
func TestPruneDeletesExpiredApplies(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	r.term.Cfg.JobRetention = 7 * 24 * time.Hour
	ctx := t.Context()
	now := time.Now().UTC()
	for _, age := range []time.Duration{40, 30, 20, 10} { // days: every attempt a retry that timed out
		at := now.Add(-age * 24 * time.Hour)
		if ok, err := r.st.RecordApply(ctx, store.Apply{Revision: 0, SHA256: "ab", Term: r.term.id, Outcome: "timeout",
			Detail: "not proven", StartedAt: at, FinishedAt: at}); err != nil || !ok {
			t.Fatalf("RecordApply: %t, %v", ok, err)
		}
	}
	r.term.retention().prune(ctx)
	if a, err := r.st.LastApply(ctx); err != nil || a.FinishedAt.Sub(now.Add(-10*24*time.Hour)).Abs() > time.Millisecond {
		t.Fatalf("LastApply after the pruning = %+v, %v; want the newest row, of 10 days", a, err)
	}
	// What is left: the newest row alone.
	n, err := r.st.DeleteAppliesBefore(ctx, r.term.id, math.MaxInt64, now, 100)
	if err != nil || n != 1 {
		t.Errorf("%d rows left after the pruning, %v; want 1, the newest", n, err)
	}
}
