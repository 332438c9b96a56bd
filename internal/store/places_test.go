package store

import (
	"slices"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// placesOf states n places on GUIDs 1 to n of pkey 0x8001, full, then
// states again GUIDs 1 and n, absent (a lower rank), and GUID 2 limited
// (lower still than full): each place stays once, full.
func placesOf(n int) []Place {
	var ps promised
	for g := 1; g <= n; g++ {
		ps.add(Place{GUID: fabric.GUID(g), PKey: 0x8001, Want: WantFull})
	}
	ps.add(Place{GUID: 1, PKey: 0x8001, Want: WantAbsent})
	ps.add(Place{GUID: fabric.GUID(n), PKey: 0x8001, Want: WantAbsent})
	ps.add(Place{GUID: 2, PKey: 0x8001, Want: WantLimited})
	return ps.places
}

// A change states each place once, whatever its count: below the count
// from which the places are indexed, at it, and above.
func TestPromisedStatesEachPlaceOnce(t *testing.T) {
	for _, n := range []int{2, indexedPlaces - 1, indexedPlaces, indexedPlaces + 1, 3 * indexedPlaces} {
		got := placesOf(n)
		var want []Place
		for g := 1; g <= n; g++ {
			want = append(want, Place{GUID: fabric.GUID(g), PKey: 0x8001, Want: WantFull})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%d places: got %v, want %v", n, got, want)
		}
	}
	// A place both emptied and filled is full, in either order.
	var ps promised
	ps.add(Place{GUID: 7, PKey: 0x8002, Want: WantAbsent})
	ps.add(Place{GUID: 7, PKey: 0x7fff, Want: WantAbsent})
	ps.add(Place{GUID: 7, PKey: 0x8002, Want: WantFull})
	want := []Place{{GUID: 7, PKey: 0x8002, Want: WantFull}, {GUID: 7, PKey: 0x7fff, Want: WantAbsent}}
	if !slices.Equal(ps.places, want) {
		t.Errorf("got %v, want %v", ps.places, want)
	}
}

// A port's change states one to three places, in the change's transaction
// (on SQLite, under the write lock): no map is made for them.
func TestPromisedPortPlacesMakeNoMap(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		var ps promised
		ps.add(Place{GUID: 1, PKey: 0x8001, Want: WantFull})
		ps.add(Place{GUID: 2, PKey: 0x8002, Want: WantAbsent})
		ps.add(Place{GUID: 3, PKey: 0x8001, Want: WantAbsent})
	})
	// The slice of places grows from one to two to four.
	if allocs > 3 {
		t.Errorf("stating three places: %v allocations, want at most 3 (the slice's)", allocs)
	}
}
