package main

import (
	"os"
	"strings"
	"testing"
)

// TestParseReadCost reads BenchmarkReadCost's output (testdata: a real run)
// into rows and the table, and refuses output without a result line.
func TestParseReadCost(t *testing.T) {
	out, err := os.ReadFile("testdata/readcost.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseReadCost(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6: %+v", len(rows), rows)
	}
	storm := rows[2]
	want := readCost{name: "hosts=1500/bootstorm=1000/workers=4", nsPerRead: 308371416, madsPerPort: 7,
		madsPerRead: 7000, cpuPerPort: 164.6}
	if storm != want {
		t.Errorf("row 3: %+v, want %+v", storm, want)
	}
	if storm.ports() != 1000 || rows[4].ports() != 1500 {
		t.Errorf("ports %v and %v, want 1000 and 1500", storm.ports(), rows[4].ports())
	}
	table := readBackTable(rows, "5x")
	for _, line := range []string{
		"| hosts=1500/bootstorm=1000/workers=4 | < 2 s | 308.4 ms ✓ | 3243 | 165 µs | 7.00 | 7000 |",
		"| hosts=4/audit/workers=4 |  | 3.37 ms | 1186 | 626 µs | 7.00 | 28 |",
	} {
		if !strings.Contains(table, line) {
			t.Errorf("the table lacks %q:\n%s", line, table)
		}
	}
	if _, err := parseReadCost([]byte("PASS\nok\n")); err == nil {
		t.Error("output without a result line parsed")
	}
}
