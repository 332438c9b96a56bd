package opensm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDuplicateGUIDs(t *testing.T) {
	tests := []struct {
		file string
		want []string // DuplicateGUID.String() of each, in log order
	}{
		// Cut from a real log: H2's node GUID set to H1's (ibsim's Guid
		// command), then back: two ERR 0D01 entries, then SUBNET UP.
		{"duplicate/cloned-then-undone.log", []string{
			"node GUID 0x0002c90300000100 (behind 0x0002c90300f00001:2 and 0x0002c90300f00001:3)",
			"node GUID 0x0002c90300000100 (behind 0x0002c90300f00001:2 and 0x0002c90300f00001:3)",
		}},
		{"duplicate/handmade.log", []string{
			// A description quoting the error, and the code under another
			// function's text, are not one: only ERR 0D01's own text is.
			"node GUID 0x0002c90300000500 (behind 0x0002c90300f00001:6 and 0x0002c90300f00002:17)",
			"node GUID unknown",            // no continuation line
			"node GUID 0x0002c90300000600", // a port past 254: no places read
			"port GUID 0x0002c90300000801",
		}},
		{"applied.log", nil},
		{"enforcement/err-0507.log", nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			data = []byte(strings.ReplaceAll(string(data), positionToken+"\n", ""))
			entries, err := ParseLog(strings.NewReader(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				d, ok := ParseDuplicateGUID(e)
				if !ok {
					continue
				}
				got = append(got, d.String())
				header, _, _ := strings.Cut(d.Line, " -> ")
				if !strings.Contains(string(data), header+" -> ") {
					t.Errorf("line %q: its header is not in the log", d.Line)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("duplicates\n%q, want\n%q", got, tt.want)
			}
		})
	}
}

func TestSweepMark(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "duplicate", "cloned-then-undone.log"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ParseLog(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	var marks []string
	for _, e := range entries {
		start, up := SweepMark(e)
		switch {
		case start:
			marks = append(marks, "start")
		case up:
			marks = append(marks, "up")
		}
		if _, ok := ParseDuplicateGUID(e); ok {
			marks = append(marks, "dup")
		}
	}
	want := []string{"dup", "start", "dup", "start", "up", "start"}
	if !slices.Equal(marks, want) {
		t.Errorf("marks %q, want %q", marks, want)
	}
}
