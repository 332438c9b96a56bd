package storetest

import (
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The switch ports the leader records each GUID of the partitions behind
// (RecordGUIDPlaces), and an operator's accept, on every engine.

var guidPlaceTests = []storeTest{
	{"GUIDPlacesFirstKeptMovesMarked", testGUIDPlacesRecord},
	{"GUIDPlacesFencedAndChecked", testGUIDPlacesFenced},
	{"GUIDPlacesAcceptWinsOverAStaleMarkAndForget", testGUIDPlacesAccept},
	{"GUIDPlacesAddedCountedAndFenced", testGUIDPlacesAdd},
}

const (
	placeS1 fabric.GUID = 0x0002c90300f00001
	placeH1 fabric.GUID = 0x0002c90300000101
	placeH2 fabric.GUID = 0x0002c90300000201
)

// wantPlaces compares the places' GUIDs, switch ports and moves.
func wantPlaces(t *testing.T, got []store.GUIDPlace, want ...store.GUIDPlace) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("places = %+v, want %+v", got, want)
	}
	for i, g := range got {
		w := want[i]
		if g.GUID != w.GUID || g.Switch != w.Switch || g.Port != w.Port || g.MovedTo != w.MovedTo ||
			g.RecordedAt.IsZero() || g.MovedAt.IsZero() {
			t.Fatalf("places[%d] = %+v, want %+v", i, g, w)
		}
	}
}

func testGUIDPlacesRecord(t *testing.T, s *store.Store) {
	ctx := t.Context()
	term, err := s.NewTerm(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{
		{GUID: placeH2, Switch: placeS1, Port: 3, New: true}, {GUID: placeH1, Switch: placeS1, Port: 2, New: true}})
	if err != nil {
		t.Fatal(err)
	}
	h1 := store.GUIDPlace{GUID: placeH1, Switch: placeS1, Port: 2}
	h2 := store.GUIDPlace{GUID: placeH2, Switch: placeS1, Port: 3}
	wantPlaces(t, got, h1, h2)
	// A first place never replaces a recorded one: H1 stays behind port 2.
	if got, err = s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: placeH1, Switch: placeS1, Port: 5, New: true}}); err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, h1, h2)
	// H1 seen behind port 3: marked, its place kept.
	moved := h1
	moved.MovedTo = "0x0002c90300f00001:3"
	if got, err = s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: placeH1, Switch: placeS1, Port: 2, MovedTo: moved.MovedTo}}); err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, moved, h2)
	// The mark survives a new term (a restart, a failover): it is the database's.
	next, err := s.NewTerm(ctx, "next")
	if err != nil {
		t.Fatal(err)
	}
	if got, err = s.GUIDPlaces(ctx); err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, moved, h2)
	// Seen back at its place: the mark is cleared.
	if got, err = s.RecordGUIDPlaces(ctx, next, []store.GUIDPlaceUpdate{{GUID: placeH1, Switch: placeS1, Port: 2}}); err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, h1, h2)
}

func testGUIDPlacesFenced(t *testing.T, s *store.Store) {
	ctx := t.Context()
	old, term := deposedAndLeader(t, s)
	if _, err := s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: placeH1, Switch: placeS1, Port: 2, New: true}}); err != nil {
		t.Fatal(err)
	}
	h1 := store.GUIDPlace{GUID: placeH1, Switch: placeS1, Port: 2}
	// A deposed leader (a second manager) neither records nor marks: it
	// reads what the leader recorded.
	got, err := s.RecordGUIDPlaces(ctx, old, []store.GUIDPlaceUpdate{
		{GUID: placeH2, Switch: placeS1, Port: 3, New: true},
		{GUID: placeH1, Switch: placeS1, Port: 2, MovedTo: "0x0002c90300f00001:3"}})
	if err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, h1)
	for _, bad := range []store.GUIDPlaceUpdate{
		{GUID: 0, Switch: placeS1, Port: 2, New: true},
		{GUID: placeH2, Switch: 0, Port: 2, New: true},
		{GUID: placeH2, Switch: placeS1, Port: 0, New: true},
		{GUID: placeH2, Switch: placeS1, Port: 255, New: true},
	} {
		if _, err := s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{bad}); err == nil {
			t.Errorf("RecordGUIDPlaces(%+v) = nil error, want refused", bad)
		}
	}
	if got, err = s.GUIDPlaces(ctx); err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, h1)
}

// testGUIDPlacesAccept: an operator accepts H1 behind port 3 while the
// leader, which compared with port 2, marks it moved there: the mark
// finds no row with port 2 and changes nothing; the accept holds.
func testGUIDPlacesAccept(t *testing.T, s *store.Store) {
	ctx := t.Context()
	term, err := s.NewTerm(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: placeH1, Switch: placeS1, Port: 2, New: true}}); err != nil {
		t.Fatal(err)
	}
	// Accept a GUID never recorded, too: it is recorded.
	if err := s.AcceptGUIDPlaces(ctx, []store.GUIDPlace{{GUID: placeH1, Switch: placeS1, Port: 3},
		{GUID: placeH2, Switch: placeS1, Port: 4}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RecordGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{
		{GUID: placeH1, Switch: placeS1, Port: 2, MovedTo: "0x0002c90300f00001:3"}})
	if err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, store.GUIDPlace{GUID: placeH1, Switch: placeS1, Port: 3},
		store.GUIDPlace{GUID: placeH2, Switch: placeS1, Port: 4})
	if err := s.AcceptGUIDPlaces(ctx, []store.GUIDPlace{{GUID: placeH1, Switch: placeS1, Port: 0}}); err == nil {
		t.Error("AcceptGUIDPlaces with port 0 = nil error, want refused")
	}
	// Forgotten: H2's row goes, H1's stays; a GUID not recorded counts none.
	if n, err := s.ForgetGUIDPlaces(ctx, []fabric.GUID{placeH2, 0x0002c90300009901}); err != nil || n != 1 {
		t.Fatalf("ForgetGUIDPlaces = %d, %v; want 1", n, err)
	}
	if got, err = s.GUIDPlaces(ctx); err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, store.GUIDPlace{GUID: placeH1, Switch: placeS1, Port: 3})
}

// AddGUIDPlaces records first places without reading back, and says how many
// it recorded: none for a deposed leader, none for a GUID already placed
// (its place kept), so that the applier knows to read the places back.
func testGUIDPlacesAdd(t *testing.T, s *store.Store) {
	ctx := t.Context()
	old, term := deposedAndLeader(t, s)
	h1 := store.GUIDPlaceUpdate{GUID: placeH1, Switch: placeS1, Port: 2, New: true}
	if n, err := s.AddGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{h1}); err != nil || n != 1 {
		t.Fatalf("AddGUIDPlaces(H1) = %d, %v; want 1 recorded", n, err)
	}
	moved := store.GUIDPlaceUpdate{GUID: placeH1, Switch: placeS1, Port: 5, New: true}
	h2 := store.GUIDPlaceUpdate{GUID: placeH2, Switch: placeS1, Port: 3, New: true}
	if n, err := s.AddGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{moved, h2}); err != nil || n != 1 {
		t.Fatalf("AddGUIDPlaces(H1 elsewhere, H2) = %d, %v; want H2 alone recorded", n, err)
	}
	if n, err := s.AddGUIDPlaces(ctx, old, []store.GUIDPlaceUpdate{{GUID: 0x0002c90300000301, Switch: placeS1, Port: 4,
		New: true}}); err != nil || n != 0 {
		t.Fatalf("AddGUIDPlaces by a deposed leader = %d, %v; want none recorded", n, err)
	}
	if _, err := s.AddGUIDPlaces(ctx, term, []store.GUIDPlaceUpdate{{GUID: placeH2, Switch: placeS1, Port: 3,
		MovedTo: "0x0002c90300f00001:4"}}); err == nil {
		t.Error("AddGUIDPlaces of a move: nil error, want refused (moves are RecordGUIDPlaces')")
	}
	got, err := s.GUIDPlaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantPlaces(t, got, store.GUIDPlace{GUID: placeH1, Switch: placeS1, Port: 2}, store.GUIDPlace{GUID: placeH2, Switch: placeS1, Port: 3})
}
