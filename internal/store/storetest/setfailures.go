package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The host ports that did not take OpenSM's Sets, as the leader records them
// (RecordSetFailures), on every engine.

var setFailureTests = []storeTest{
	{"SetFailuresReplacedFencedAndRestored", testSetFailures},
}

func wantSetFailures(t *testing.T, s *store.Store, want ...store.SetFailure) {
	t.Helper()
	got, err := s.SetFailures(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("SetFailures = %+v, want %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Port != w.Port || g.Term != w.Term || !g.Since.Equal(w.Since) {
			t.Fatalf("SetFailures[%d] = %+v, want %+v", i, g, w)
		}
	}
}

// The ports are replaced as a set, kept with their since, fenced by the term,
// and what a deposed leader recorded is what the new one reads (a failover
// keeps naming the port) until the new leader replaces it.
func testSetFailures(t *testing.T, s *store.Store) {
	old, err := s.NewTerm(t.Context(), "manager-a")
	if err != nil {
		t.Fatal(err)
	}
	wantSetFailures(t, s)
	since := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	a := store.SetFailure{Port: 0x0002c90300000201, Since: since, Term: old}
	b := store.SetFailure{Port: 0x0002c90300000501, Since: since.Add(time.Minute), Term: old}
	if err := s.RecordSetFailures(t.Context(), old, []store.SetFailure{b, a}); err != nil {
		t.Fatal(err)
	}
	wantSetFailures(t, s, a, b)
	term, err := s.NewTerm(t.Context(), "manager-b")
	if err != nil {
		t.Fatal(err)
	}
	wantSetFailures(t, s, a, b) // what the new leader, and every scrape, reads
	if err := s.RecordSetFailures(t.Context(), old, nil); err != nil {
		t.Fatalf("RecordSetFailures(none) by the deposed term = %v; want nothing done, no error", err)
	}
	if err := s.RecordSetFailures(t.Context(), old, []store.SetFailure{a}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("RecordSetFailures by the deposed term = %v; want ErrFenced", err)
	}
	wantSetFailures(t, s, a, b)
	if err := s.RecordSetFailures(t.Context(), term, []store.SetFailure{{Port: 0, Since: since}}); err == nil ||
		errors.Is(err, store.ErrFenced) {
		t.Errorf("RecordSetFailures(port 0) = %v; want a clear refusal", err)
	}
	a.Term = term
	if err := s.RecordSetFailures(t.Context(), term, []store.SetFailure{a}); err != nil {
		t.Fatal(err)
	}
	wantSetFailures(t, s, a)
	if err := s.RecordSetFailures(t.Context(), term, nil); err != nil {
		t.Fatal(err)
	}
	wantSetFailures(t, s)
}
