package postgres

import (
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// FinishApply, on every job's path to Completed, sends its transaction in
// two round trips, four before: the BEGIN and the apply's row with the
// gates' read (its usual one query: a confirmed switch, no enforcement
// error), the completion with the COMMIT; FinishApplyProven's completions
// of the jobs it names too. A stale term's records nothing, in as many.
func TestFinishApplyRoundTrips(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_finish_")
	e := countingEngine(t, db.DSN)
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := store.New(e.Engine, store.Rules{})
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	// A confirmed switch and no enforcement error: the gates in one read.
	if err := s.ConfirmSwitches(ctx, []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"}}); err != nil {
		t.Fatal(err)
	}
	open := func(store.GateState) bool { return true }
	for i, tc := range []struct {
		name      string
		term      int64
		proven    bool  // FinishApplyProven, naming the job
		want      int64 // round trips
		completed int64
	}{
		{"first (prepares its statements)", term, false, -1, 1},
		{"a job", term, false, 2, 1},
		{"a stale term's", term - 1, false, 2, 0},
		{"first proven (prepares its statements)", term, true, -1, 1},
		{"a job proven by its tables", term, true, 2, 1},
	} {
		vlan := int64(101 + i)
		j, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: "net-" + tc.name,
			Name: "net", Type: "vlan", PhysicalNetwork: "ibnet", SegmentationID: &vlan},
			Operation: store.OpCreateNetwork, CreatedBy: "test", Request: `{}`})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := s.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		e.writes.Store(0)
		a := store.Apply{Revision: rev, SHA256: "ab", Term: tc.term, Outcome: "applied", Detail: "SUBNET UP",
			StartedAt: now.Add(-time.Second), FinishedAt: now}
		var f store.Finished
		if tc.proven {
			f, err = s.FinishApplyProven(ctx, a, store.Proven{Jobs: []int64{j.ID}, Kubernetes: true}, open)
		} else {
			f, err = s.FinishApply(ctx, a, open)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if f.Completed != tc.completed || f.Recorded != (tc.completed > 0) {
			t.Errorf("%s: %+v, want %d completed", tc.name, f, tc.completed)
		}
		if n := e.writes.Load(); tc.want >= 0 && n != tc.want {
			t.Errorf("%s: FinishApply sent %d times, want %d", tc.name, n, tc.want)
		}
	}
}
