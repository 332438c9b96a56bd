package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
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
		awaiting  bool  // FinishApplyAwaiting, its proof naming the job
		want      int64 // round trips
		completed int64
	}{
		{"first (prepares its statements)", term, false, false, -1, 1},
		{"a job", term, false, false, 2, 1},
		{"a stale term's", term - 1, false, false, 2, 0},
		{"first proven (prepares its statements)", term, true, false, -1, 1},
		{"a job proven by its tables", term, true, false, 2, 1},
		{"first awaiting its proof (prepares its statements)", term, false, true, -1, 1},
		{"a job awaiting its proof", term, false, true, 2, 1},
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
		asked := int64(-1) // round trips sent when the proof was asked for
		if tc.awaiting {
			// The first round trip is sent while the proof is read; only
			// the completions and the COMMIT wait for it.
			proof := func(context.Context) *store.Proven {
				asked = e.writes.Load()
				return &store.Proven{Jobs: []int64{j.ID}, Kubernetes: true}
			}
			f, err = s.FinishApplyAwaiting(ctx, a, proof, time.Minute, open)
		} else if tc.proven {
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
		if n := e.writes.Load(); tc.awaiting && tc.want >= 0 && (asked != 1 || n-asked != 1) {
			t.Errorf("%s: %d round trips before the proof, %d after; want 1 and 1", tc.name, asked, n-asked)
		}
	}
}

// AddGUIDPlaces, beside the read-back of every change that brings a host not
// placed yet, sends its BEGIN, its inserts and its COMMIT in one round trip
// (three before), and still says how many it recorded: a GUID already placed
// and a deposed leader's record none.
func TestAddGUIDPlacesRoundTrips(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_places_")
	e := countingEngine(t, db.DSN)
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := store.New(e.Engine, store.Rules{})
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	const sw = fabric.GUID(0x0002c90300f00001)
	place := func(i int) store.GUIDPlaceUpdate {
		return store.GUIDPlaceUpdate{GUID: fabric.GUID(0x0002c90300000101 + uint64(i)), Switch: sw, Port: 1 + i, New: true}
	}
	for i, tc := range []struct {
		name  string
		term  int64
		news  []store.GUIDPlaceUpdate
		want  int64 // round trips; -1: not counted
		added int64
	}{
		{"first (prepares its statement)", term, []store.GUIDPlaceUpdate{place(0)}, -1, 1},
		{"one host", term, []store.GUIDPlaceUpdate{place(1)}, 1, 1},
		{"two hosts, one placed already", term, []store.GUIDPlaceUpdate{place(1), place(2)}, 1, 1},
		{"a deposed leader's", term - 1, []store.GUIDPlaceUpdate{place(3)}, 1, 0},
	} {
		e.writes.Store(0)
		n, err := s.AddGUIDPlaces(ctx, tc.term, tc.news)
		if err != nil || n != tc.added {
			t.Fatalf("%d %s: AddGUIDPlaces = %d, %v; want %d", i, tc.name, n, err, tc.added)
		}
		if sent := e.writes.Load(); tc.want >= 0 && sent != tc.want {
			t.Errorf("%s: AddGUIDPlaces sent %d times, want %d", tc.name, sent, tc.want)
		}
	}
	places, err := s.GUIDPlaces(ctx)
	if err != nil || len(places) != 3 {
		t.Fatalf("GUIDPlaces = %+v, %v; want the three recorded", places, err)
	}
}
