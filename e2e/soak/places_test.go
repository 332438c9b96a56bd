package soak

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// A history of one host's table: bound to 0x8064 (1), moved to 0x8065 (2),
// unbound (3), bound to 0x8064 again (4).
func placesHistory(h fabric.GUID) []Tables {
	return []Tables{
		{h: {0x7fff}},
		{h: {0x7fff, 0x8064}},
		{h: {0x7fff, 0x8065}},
		{h: {0x7fff}},
		{h: {0x7fff, 0x8064}},
	}
}

func TestCheckPlaces(t *testing.T) {
	h := fabric.GUID(0x0002c90300000101)
	for _, tc := range []struct {
		name      string
		index, hi int      // the completed job's request, the newest request sent
		host, sw  []uint16 // the real tables read at its completion
		bad       int
		mention   string
	}{
		{"bound, in place", 1, 1, []uint16{0x7fff, 0x8064}, []uint16{0x7fff, 0x8064}, 0, ""},
		{"bound, key missing", 1, 1, []uint16{0x7fff}, []uint16{0x7fff}, 2, "0x8064 in"},
		{"bound, limited only", 1, 1, []uint16{0x0064, 0x7fff}, []uint16{0x7fff, 0x8064}, 1, "0x8064 in"},
		{"bound, the switch port missing it", 1, 1, []uint16{0x7fff, 0x8064}, []uint16{0x7fff}, 1, "the switch port facing"},
		{"bound, superseded by the move", 1, 2, []uint16{0x7fff, 0x8065}, []uint16{0x7fff, 0x8065}, 0, ""},
		{"moved, old key still there", 2, 2, []uint16{0x7fff, 0x8064, 0x8065}, []uint16{0x7fff, 0x8064, 0x8065}, 2, "0x8064 out of"},
		{"unbound, key still there", 3, 3, []uint16{0x7fff, 0x8065}, []uint16{0x7fff, 0x8065}, 2, "0x8065 out of"},
		{"unbound, superseded by the bind again", 3, 4, []uint16{0x7fff, 0x8064}, []uint16{0x7fff, 0x8064}, 0, ""},
		{"bound, superseded by the move, the unbind", 1, 3, []uint16{0x7fff}, []uint16{0x7fff}, 0, ""},
		{"moved, 0x8065 not yet in", 2, 2, []uint16{0x7fff}, []uint16{0x7fff}, 2, "0x8065 in"},
	} {
		r := &run{tables: placesHistory(h), fabric: &fabricsim.Fabric{}, res: Result{ByFault: map[string]int{}}, o: Options{Out: &strings.Builder{}}}
		got := r.checkPlaces(job{index: tc.index}, h, tableRead{keys: tc.host, sw: tc.sw}, tc.hi, "job")
		if got != tc.bad {
			t.Errorf("%s: %d wrong, want %d (history %q)", tc.name, got, tc.bad, r.history)
		}
		if tc.mention != "" && (len(r.history) == 0 || !strings.Contains(r.history[0], tc.mention)) {
			t.Errorf("%s: violation %q, want one mentioning %q", tc.name, r.history, tc.mention)
		}
	}
}

func TestLogTime(t *testing.T) {
	got := logTime("Dec 06 04:02:18 995857 [296C76C0] 0x80 -> Entering MASTER state")
	if got.Month() != time.December || got.Day() != 6 || got.Hour() != 4 || got.Second() != 18 ||
		got.Nanosecond() != 995857000 || got.Year() != time.Now().Year() {
		t.Errorf("logTime = %s", got)
	}
	if !logTime("garbage").IsZero() {
		t.Error("logTime of a line without a time is not zero")
	}
}

// A PUT of a port already as it asks changes nothing, but its job's places
// are the port's: the port's host's tenant's job (a host dropping Sets holds
// it, as the manager promises).
func TestRequestPortGUIDs(t *testing.T) {
	g1, g2 := fabric.GUID(0x0002c90300000101), fabric.GUID(0x0002c90300000201)
	bound := port{ID: "p", Network: "n", Host: "h1", GUID: &g1}
	for _, tc := range []struct {
		name          string
		path          string
		before, after map[string]port
		want          []fabric.GUID
	}{
		{"put unchanged", "/ufmRestV3/cloudx/Port/p", map[string]port{"p": bound}, map[string]port{"p": bound}, []fabric.GUID{g1}},
		{"put rebound", "/ufmRestV3/cloudx/Port/p", map[string]port{"p": bound},
			map[string]port{"p": {ID: "p", Network: "n", Host: "h2", GUID: &g2}}, []fabric.GUID{g1, g2}},
		{"delete unknown", "/ufmRestV3/cloudx/Port/q", map[string]port{"p": bound}, map[string]port{"p": bound}, nil},
		{"a network", "/ufmRestV3/cloudx/Network/n", map[string]port{"p": bound}, map[string]port{"p": bound}, nil},
	} {
		if got := requestPortGUIDs(tc.path, tc.before, tc.after); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPortGUIDsChanged(t *testing.T) {
	g1, g2 := fabric.GUID(0x0002c90300000101), fabric.GUID(0x0002c90300000201)
	bound := port{ID: "p", Network: "n", Host: "h1", GUID: &g1}
	for _, tc := range []struct {
		name          string
		before, after map[string]port
		want          []fabric.GUID
	}{
		{"unchanged", map[string]port{"p": bound}, map[string]port{"p": bound}, nil},
		{"created", map[string]port{}, map[string]port{"p": bound}, []fabric.GUID{g1}},
		{"deleted", map[string]port{"p": bound}, map[string]port{}, []fabric.GUID{g1}},
		{"moved to another network", map[string]port{"p": bound},
			map[string]port{"p": {ID: "p", Network: "m", Host: "h1", GUID: &g1}}, []fabric.GUID{g1}},
		{"rebound to another host", map[string]port{"p": bound},
			map[string]port{"p": {ID: "p", Network: "n", Host: "h2", GUID: &g2}}, []fabric.GUID{g1, g2}},
		{"unbound", map[string]port{"p": bound}, map[string]port{"p": {ID: "p", Network: "n"}}, []fabric.GUID{g1}},
	} {
		got := portGUIDsChanged(tc.before, tc.after)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
