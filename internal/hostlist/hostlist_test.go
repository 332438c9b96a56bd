package hostlist

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// expandCase is one case of testdata/expand.json: a hostlist, the bound
// (10000 when 0), and the names it gives or a part of the error it gets.
type expandCase struct {
	Name string   `json:"name"`
	List string   `json:"list"`
	Most int      `json:"most"`
	Want []string `json:"want"`
	Err  string   `json:"err"`
}

func TestExpand(t *testing.T) {
	raw, err := os.ReadFile("testdata/expand.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []expandCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			most := tc.Most
			if most == 0 {
				most = 10000
			}
			got, err := Expand(tc.List, most)
			if tc.Err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.Err) {
					t.Fatalf("Expand(%q) = %v, %v; want an error saying %q", tc.List, got, err, tc.Err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.Want) {
				t.Fatalf("Expand(%q) = %q, %v; want %q", tc.List, got, err, tc.Want)
			}
		})
	}
}

// FuzzExpand: whatever the list, Expand returns or refuses without a panic;
// what it returns is within the bound, each name once, each a host name, and
// the names joined by commas expand to themselves.
func FuzzExpand(f *testing.F) {
	for _, seed := range []string{"node[01-04,07]", "a,b", "r[1-2]n[1-3]", "n[08-11],x", "n[4-1]", "n[1-", "a,,b", "n[]"} {
		f.Add(seed)
	}
	const most = 500
	f.Fuzz(func(t *testing.T, list string) {
		names, err := Expand(list, most)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > most {
			t.Fatalf("Expand(%q) gave %d names; want 1 to %d", list, len(names), most)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || seen[n] || checkText(n) != nil {
				t.Fatalf("Expand(%q) gave %q: empty, twice or not a host name", list, n)
			}
			seen[n] = true
		}
		again, err := Expand(strings.Join(names, ","), most)
		if err != nil || !slices.Equal(again, names) {
			t.Fatalf("Expand(%q) = %q, but their comma list expands to %q, %v", list, names, again, err)
		}
	})
}
