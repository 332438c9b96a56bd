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
	for _, tc := range []struct {
		name   string
		sweeps map[string]latencies
		lines  []string
	}{
		{"the storm read within a sweep", map[string]latencies{"hosts=4": {4e6, 5e6, 6e6},
			"hosts=1500": {400e6, 350e6, 500e6}}, []string{
			"| hosts=1500/bootstorm=1000/workers=4 | ≤ one sweep | 308.4 ms ✓ | 400.0 ms | 3243 | 165 µs | 7.00 | 7000 |",
			"| hosts=4/audit/workers=4 |  | 3.37 ms | 5.00 ms | 1186 | 626 µs | 7.00 | 28 |",
		}},
		{"a sweep quicker than the storm's read", map[string]latencies{"hosts=1500": {300e6}}, []string{
			"| hosts=1500/bootstorm=1000/workers=4 | ≤ one sweep | 308.4 ms ✗ | 300.0 ms |",
			"| hosts=4/audit/workers=4 |  | 3.37 ms | n/a |",
		}},
		{"no sweep of the storm's fabric", nil, []string{
			"| hosts=1500/bootstorm=1000/workers=4 | ≤ one sweep | 308.4 ms ✗ | n/a |",
		}},
	} {
		table := readBackTable(rows, tc.sweeps, "5x")
		for _, line := range tc.lines {
			if !strings.Contains(table, line) {
				t.Errorf("%s: the table lacks %q:\n%s", tc.name, line, table)
			}
		}
	}
	for _, r := range rows {
		if _, _, err := readCostFabric(r.name); err != nil {
			t.Error(err)
		}
	}
	if _, _, err := readCostFabric("hosts=7/audit/workers=4"); err == nil {
		t.Error("a fabric BenchmarkReadCost does not start was given a size")
	}
	if _, err := parseReadCost([]byte("PASS\nok\n")); err == nil {
		t.Error("output without a result line parsed")
	}
}
