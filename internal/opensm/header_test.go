package opensm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// headerFormat states OpenSM's header line,
// "%s %02d %02d:%02d:%02d %06d [%04X] 0x%02x -> %s", as a regular expression:
// the reference parseHeader is checked against.
var headerFormat = regexp.MustCompile(`^([A-Z][a-z]{2}) (\d{2}) (\d{2}):(\d{2}):(\d{2}) (\d{6}) \[([0-9A-F]+)\] 0x([0-9a-f]{2}) -> (.*)$`)

func parseHeaderByFormat(line string) (Entry, bool) {
	m := headerFormat.FindStringSubmatch(line)
	if m == nil {
		return Entry{}, false
	}
	level, err := strconv.ParseUint(m[8], 16, 8)
	if err != nil {
		return Entry{}, false
	}
	return Entry{Time: fmt.Sprintf("%s %s %s:%s:%s %s", m[1], m[2], m[3], m[4], m[5], m[6]),
		Thread: m[7], Level: Level(level), Message: m[9]}, true
}

func sameHeader(t *testing.T, line string) {
	t.Helper()
	got, gotOK := parseHeader(line)
	want, wantOK := parseHeaderByFormat(line)
	if gotOK != wantOK || got.Time != want.Time || got.Thread != want.Thread || got.Level != want.Level ||
		got.Message != want.Message {
		t.Errorf("parseHeader(%q) = %+v, %v; the format says %+v, %v", line, got, gotOK, want, wantOK)
	}
}

// Every line of the fixtures, and lines one edit away from a header, read the
// same as the format says.
func TestParseHeaderMatchesTheFormat(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.log"))
	more, _ := filepath.Glob(filepath.Join("testdata", "enforcement", "*.log"))
	lines := 0
	for _, path := range append(files, more...) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			sameHeader(t, sc.Text())
			lines++
		}
		f.Close()
	}
	if lines < 100 {
		t.Fatalf("only %d fixture lines", lines)
	}
	for _, line := range []string{
		"Nov 29 18:16:33 486627 [7F1C] 0x02 -> SUBNET UP",
		"Nov 29 18:16:33 486627 [7F1C] 0x02 -> ",
		"Nov 29 18:16:33 486627 [7F1C] 0x02 ->",
		"Nov 29 18:16:33 486627 [] 0x02 -> x",
		"Nov 29 18:16:33 486627 [7f1c] 0x02 -> x",
		"Nov 29 18:16:33 486627 [7F1C] 0x2A -> x",
		"Nov 29 18:16:33 486627 [7F1C] 0xff -> x\r",
		"Nov 29 18:16:33 48662 [7F1C] 0x02 -> x",
		"NOV 29 18:16:33 486627 [7F1C] 0x02 -> x",
		"Nov 29 18:16:33 486627 [7F1C]] 0x02 -> x",
		"Nov 29 18:16:33 486627 [7F1C] 0x02 -> a -> b",
		"Nov  9 18:16:33 486627 [7F1C] 0x02 -> x",
		"\tNov 29 18:16:33 486627 [7F1C] 0x02 -> x",
	} {
		sameHeader(t, line)
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add("Nov 29 18:16:33 486627 [7F1C] 0x02 -> SUBNET UP")
	f.Add("Nov 29 18:16:33 486627 [7F1C] 0x04 -> osm_prtn_add_port: port 0x2c90300000101 not found")
	f.Add("*************** INITIATING HEAVY SWEEP ****************")
	f.Fuzz(func(t *testing.T, line string) { sameHeader(t, line) })
}
