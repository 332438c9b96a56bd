package storetest

import (
	"errors"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The second subnet manager the leader records (RecordSecondSM), on every
// engine.

var secondSMTests = []storeTest{
	{"SecondSMRecordReplaceAndClear", testSecondSMRecord},
	{"SecondSMFencedAndChecked", testSecondSMFenced},
	{"SecondSMRestoredByTheNextLeader", testSecondSMRestored},
	{"ForeignSMsReplacedAndFenced", testForeignSMs},
}

func wantSecondSMs(t *testing.T, s *store.Store, want ...store.SecondSM) {
	t.Helper()
	got, err := s.SecondSMs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("SecondSMs = %+v, want %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.PortGUID != w.PortGUID || g.Priority != w.Priority || g.State != w.State || g.OwnState != w.OwnState ||
			g.Term != w.Term || g.SeenAt.IsZero() {
			t.Fatalf("SecondSMs[%d] = %+v, want %+v", i, g, w)
		}
	}
}

func testSecondSMRecord(t *testing.T, s *store.Store) {
	term, err := s.NewTerm(t.Context(), "leader")
	if err != nil {
		t.Fatal(err)
	}
	wantSecondSMs(t, s)
	first := store.SecondSM{PortGUID: 0x0002c90300a10001, Priority: 15, State: "MASTER", OwnState: "STANDBY", Term: term}
	if err := s.RecordSecondSM(t.Context(), term, first); err != nil {
		t.Fatal(err)
	}
	wantSecondSMs(t, s, first)
	// Another master replaces it: the leader's port names one master.
	second := store.SecondSM{PortGUID: 0x0002c90300a20001, Priority: 0, State: "MASTER", OwnState: "MASTER", Term: term}
	if err := s.RecordSecondSM(t.Context(), term, second); err != nil {
		t.Fatal(err)
	}
	wantSecondSMs(t, s, second)
	if n, err := s.ClearSecondSMs(t.Context(), term); err != nil || n != 1 {
		t.Fatalf("ClearSecondSMs = %d, %v; want 1", n, err)
	}
	wantSecondSMs(t, s)
}

func testSecondSMFenced(t *testing.T, s *store.Store) {
	old, term := deposedAndLeader(t, s)
	recorded := store.SecondSM{PortGUID: 0x0002c90300a10001, Priority: 15, State: "MASTER", OwnState: "STANDBY", Term: term}
	if err := s.RecordSecondSM(t.Context(), term, recorded); err != nil {
		t.Fatal(err)
	}
	// A deposed leader records nothing, and leaves the leader's row.
	other := store.SecondSM{PortGUID: 0x0002c90300a20001, Priority: 1, State: "MASTER", OwnState: "MASTER"}
	if err := s.RecordSecondSM(t.Context(), old, other); !errors.Is(err, store.ErrFenced) {
		t.Errorf("RecordSecondSM with an old term = %v; want ErrFenced", err)
	}
	for _, bad := range []store.SecondSM{
		{PortGUID: 0, Priority: 1, State: "MASTER"},
		{PortGUID: 1, Priority: 16, State: "MASTER"},
		{PortGUID: 1, Priority: 1, State: ""},
		{PortGUID: 1, Priority: 1, State: "MASTER", OwnState: "A STATE FAR TOO LONG"},
	} {
		if err := s.RecordSecondSM(t.Context(), term, bad); err == nil || errors.Is(err, store.ErrFenced) {
			t.Errorf("RecordSecondSM(%+v) = %v; want a clear refusal", bad, err)
		}
	}
	wantSecondSMs(t, s, recorded)
	if n, err := s.ClearSecondSMs(t.Context(), old); err != nil || n != 0 {
		t.Errorf("ClearSecondSMs with an old term = %d, %v; want 0", n, err)
	}
	wantSecondSMs(t, s, recorded)
}

// The verdict outlives its term: a new leader (another manager, or this one
// after a restart) reads what the previous one recorded, and only the
// current term clears it.
func testSecondSMRestored(t *testing.T, s *store.Store) {
	old, err := s.NewTerm(t.Context(), "manager-a")
	if err != nil {
		t.Fatal(err)
	}
	recorded := store.SecondSM{PortGUID: 0x0002c90300a10001, Priority: 15, State: "MASTER", OwnState: "STANDBY", Term: old}
	if err := s.RecordSecondSM(t.Context(), old, recorded); err != nil {
		t.Fatal(err)
	}
	term, err := s.NewTerm(t.Context(), "manager-b")
	if err != nil {
		t.Fatal(err)
	}
	wantSecondSMs(t, s, recorded) // what the new leader restores
	if n, err := s.ClearSecondSMs(t.Context(), old); err != nil || n != 0 {
		t.Fatalf("ClearSecondSMs by the deposed term = %d, %v; want 0", n, err)
	}
	wantSecondSMs(t, s, recorded)
	if n, err := s.ClearSecondSMs(t.Context(), term); err != nil || n != 1 {
		t.Fatalf("ClearSecondSMs by the new leader = %d, %v; want 1", n, err)
	}
	wantSecondSMs(t, s)
}

func wantForeignSMs(t *testing.T, s *store.Store, want ...store.SecondSM) {
	t.Helper()
	got, err := s.ForeignSMs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ForeignSMs = %+v, want %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.PortGUID != w.PortGUID || g.Priority != w.Priority || g.State != w.State || g.OwnState != w.OwnState ||
			g.Term != w.Term || g.SeenAt.IsZero() {
			t.Fatalf("ForeignSMs[%d] = %+v, want %+v", i, g, w)
		}
	}
}

// The foreign SMs (master of no port) are replaced as a set at each look,
// apart from the second SM's row, and fenced like it.
func testForeignSMs(t *testing.T, s *store.Store) {
	old, term := deposedAndLeader(t, s)
	a := store.SecondSM{PortGUID: 0x0002c90300000301, Priority: 0, State: "MASTER", OwnState: "MASTER", Term: term}
	b := store.SecondSM{PortGUID: 0x0002c90300000501, Priority: 15, State: "MASTER", OwnState: "MASTER", Term: term}
	if err := s.RecordForeignSMs(t.Context(), term, []store.SecondSM{b, a}); err != nil {
		t.Fatal(err)
	}
	wantForeignSMs(t, s, a, b)
	wantSecondSMs(t, s) // no job held for them
	if err := s.RecordForeignSMs(t.Context(), term, []store.SecondSM{b}); err != nil {
		t.Fatal(err)
	}
	wantForeignSMs(t, s, b)
	if err := s.RecordForeignSMs(t.Context(), old, nil); err != nil {
		t.Fatalf("RecordForeignSMs(none) by the deposed term = %v; want nothing done, no error", err)
	}
	if err := s.RecordForeignSMs(t.Context(), old, []store.SecondSM{a}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("RecordForeignSMs by the deposed term = %v; want ErrFenced", err)
	}
	if err := s.RecordForeignSMs(t.Context(), term, []store.SecondSM{{PortGUID: 1, Priority: 16, State: "MASTER"}}); err == nil ||
		errors.Is(err, store.ErrFenced) {
		t.Errorf("RecordForeignSMs(priority 16) = %v; want a clear refusal", err)
	}
	wantForeignSMs(t, s, b)
	if err := s.RecordForeignSMs(t.Context(), term, nil); err != nil {
		t.Fatal(err)
	}
	wantForeignSMs(t, s)
}
