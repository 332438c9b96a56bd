package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The duplicated GUIDs the leader records (RecordDuplicateGUIDs), on every
// engine.

var duplicateTests = []storeTest{
	{"DuplicateGUIDsRecordCountAndClear", testDuplicateRecord},
	{"DuplicateGUIDsFencedAndChecked", testDuplicateFenced},
}

// clonedH1 is ERR 0D01 as OpenSM logs it for a host that took H1's node GUID.
var clonedH1 = store.DuplicateSighting{GUID: "0x0002c90300000100", Kind: "node",
	Places: []string{"0x0002c90300f00001:2", "0x0002c90300f00001:3"},
	Line:   "Dec 06 04:00:10 930803 [EEA6B6C0] 0x81 -> report_duplicated_guid: ERR 0D01: Found duplicated node GUID. Node 0x2c90300000100 port 1 is reachable from remote node 0x2c90300f00001 port 2 and remote node 0x2c90300f00001 port 3. Paths are:",
	Count:  3}

func wantDuplicates(t *testing.T, s *store.Store, want ...store.DuplicateSighting) {
	t.Helper()
	got, err := s.DuplicateGUIDs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("DuplicateGUIDs = %+v, want %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.GUID != w.GUID || g.Kind != w.Kind || !slices.Equal(g.Places, w.Places) || g.Line != w.Line ||
			g.Count != w.Count || g.FirstSeen.IsZero() || g.LastSeen.Before(g.FirstSeen) {
			t.Fatalf("DuplicateGUIDs[%d] = %+v, want %+v", i, g, w)
		}
	}
}

func testDuplicateRecord(t *testing.T, s *store.Store) {
	term, err := s.NewTerm(t.Context(), "leader")
	if err != nil {
		t.Fatal(err)
	}
	wantDuplicates(t, s)
	port := store.DuplicateSighting{GUID: "0x0002c90300000801", Kind: "port", Line: "ERR 0D15", Count: 1}
	if err := s.RecordDuplicateGUIDs(t.Context(), term, []store.DuplicateSighting{clonedH1, port}); err != nil {
		t.Fatal(err)
	}
	wantDuplicates(t, s, clonedH1, port)
	// Seen again: one row, its count the sum, its line the last.
	again := clonedH1
	again.Count, again.Line = 1000, strings.Replace(clonedH1.Line, "930803", "930900", 1)
	if err := s.RecordDuplicateGUIDs(t.Context(), term, []store.DuplicateSighting{again}); err != nil {
		t.Fatal(err)
	}
	again.Count = 1003
	wantDuplicates(t, s, again, port)
	if n, err := s.ClearDuplicateGUIDs(t.Context(), term); err != nil || n != 2 {
		t.Fatalf("ClearDuplicateGUIDs = %d, %v; want 2", n, err)
	}
	wantDuplicates(t, s)
}

func testDuplicateFenced(t *testing.T, s *store.Store) {
	old, term := deposedAndLeader(t, s)
	if err := s.RecordDuplicateGUIDs(t.Context(), term, []store.DuplicateSighting{clonedH1}); err != nil {
		t.Fatal(err)
	}
	// A deposed leader records nothing, and leaves the leader's row.
	other := store.DuplicateSighting{GUID: "0x0002c90300000200", Kind: "node", Line: "x", Count: 1}
	if err := s.RecordDuplicateGUIDs(t.Context(), old, []store.DuplicateSighting{other}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("RecordDuplicateGUIDs with an old term = %v; want ErrFenced", err)
	}
	for _, bad := range []store.DuplicateSighting{
		{GUID: "0x0", Kind: "node", Line: "x", Count: 1},
		{GUID: "0x2c90300000100", Kind: "node", Line: "x", Count: 1}, // not 16 digits
		{GUID: "0x0002c90300000100", Kind: "switch", Line: "x", Count: 1},
		{GUID: "0x0002c90300000100", Kind: "node", Line: "", Count: 1},
		{GUID: "0x0002c90300000100", Kind: "node", Line: "x", Count: 0},
		{GUID: "0x0002c90300000100", Kind: "node", Line: "x", Count: 1, Places: []string{"0x0002c90300f00001 2"}},
		{GUID: "0x0002c90300000100", Kind: "node", Line: "x", Count: 1, Places: []string{"0x0002c90300f00001:2 x"}},
	} {
		if err := s.RecordDuplicateGUIDs(t.Context(), term, []store.DuplicateSighting{bad}); err == nil || errors.Is(err, store.ErrFenced) {
			t.Errorf("RecordDuplicateGUIDs(%+v) = %v; want a clear refusal", bad, err)
		}
	}
	wantDuplicates(t, s, clonedH1)
	if n, err := s.ClearDuplicateGUIDs(t.Context(), old); err != nil || n != 0 {
		t.Errorf("ClearDuplicateGUIDs with an old term = %d, %v; want 0", n, err)
	}
	wantDuplicates(t, s, clonedH1)
}
