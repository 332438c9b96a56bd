package driver

import (
	"slices"
	"testing"
)

// A job's places read back from its row as PlacesJSON wrote them, in the
// order stated; a row without places reads none, and a value that is not
// what PlacesJSON writes is an error, never places made up.
func TestPlacesJSONReadsBack(t *testing.T) {
	for _, places := range [][]Place{
		{{GUID: 0x0002c90300000001, PKey: 0x7fff, Want: "full"}},
		{{GUID: 0xfa163e00005b7c1d, PKey: 0x10, Want: "absent"}, {GUID: 0x1, PKey: 0x1, Want: "limited"}},
	} {
		got, err := ParsePlacesJSON(PlacesJSON(places))
		if err != nil || !slices.Equal(got, places) {
			t.Errorf("ParsePlacesJSON(PlacesJSON(%v)) = %v, %v", places, got, err)
		}
	}
	// JSON laid out otherwise, as a DBA might write it, reads the same.
	spaced := `[ {"want": "limited", "pkey": 16, "guid": "0x1"}, {"guid":"0x2","pkey":1,"want":"ful\u006c"} ]`
	want := []Place{{GUID: 1, PKey: 0x10, Want: "limited"}, {GUID: 2, PKey: 1, Want: "full"}}
	if got, err := ParsePlacesJSON(spaced); err != nil || !slices.Equal(got, want) {
		t.Errorf("ParsePlacesJSON(%s) = %v, %v; want %v", spaced, got, err, want)
	}
	if got, err := ParsePlacesJSON(""); got != nil || err != nil {
		t.Errorf(`ParsePlacesJSON("") = %v, %v; want none`, got, err)
	}
	for _, bad := range []string{"[", "[]x", `{"guid":"0x1","pkey":1,"want":"full"}]`, `[{"guid":"2c9","pkey":1,"want":"full"}]`,
		`[{"guid":"0x1","pkey":65536,"want":"full"}]`, `[{"guid":"0x1","pkey":1,"want":"full"}x]`} {
		if got, err := ParsePlacesJSON(bad); err == nil {
			t.Errorf("ParsePlacesJSON(%s) = %v, want an error", bad, got)
		}
	}
}
