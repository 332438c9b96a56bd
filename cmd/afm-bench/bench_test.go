package main

import (
	"os"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	l := latencies{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.95, 10}, {0.1, 1}, {0, 1}, {1, 10}} {
		if got := l.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (latencies{}).median(); got != 0 {
		t.Errorf("median of nothing = %v, want 0", got)
	}
}

func TestLogTime(t *testing.T) {
	near := time.Date(2026, time.November, 29, 18, 16, 30, 0, time.Local)
	got, err := logTime("Nov 29 18:16:33 486627", near)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, time.November, 29, 18, 16, 33, 486627000, time.Local); !got.Equal(want) {
		t.Errorf("logTime = %v, want %v", got, want)
	}
	// A stamp from the last day of the year, read on New Year's Day.
	got, err = logTime("Dec 31 23:59:59 000001", time.Date(2027, time.January, 1, 0, 0, 1, 0, time.Local))
	if err != nil {
		t.Fatal(err)
	}
	if got.Year() != 2026 {
		t.Errorf("logTime across New Year: year %d, want 2026", got.Year())
	}
	for _, bad := range []string{"", "Nov 29 18:16:33", "Foo 29 18:16:33 486627", "Nov 29 18:16:33 48662x"} {
		if _, err := logTime(bad, near); err == nil {
			t.Errorf("logTime(%q): no error", bad)
		}
	}
}

func TestReadProcStat(t *testing.T) {
	st, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() {
		t.Errorf("ppid = %d, want %d", st.ppid, os.Getppid())
	}
	if st.comm == "" {
		t.Error("no command name")
	}
}

// TestPgbenchRate reads pgbench's own summaries: a run's rate, and a run too
// short to see a transaction (a loaded machine's --smoke), which is no rate
// and no error, so that the run is made again, longer, instead of failing.
func TestPgbenchRate(t *testing.T) {
	for _, tc := range []struct {
		file    string
		wantTPS float64
		wantRan bool
	}{
		{"pgbench-ran.txt", 17302.570783, true},
		{"pgbench-no-transaction.txt", 0, false},
	} {
		out, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		tps, ran, err := pgbenchRate(out)
		if err != nil || tps != tc.wantTPS || ran != tc.wantRan {
			t.Errorf("%s: %v, %v, %v; want %v, %v, nil", tc.file, tps, ran, err, tc.wantTPS, tc.wantRan)
		}
	}
	if _, _, err := pgbenchRate([]byte("pgbench: error: connection refused\n")); err == nil {
		t.Error("an output without a summary read as a rate")
	}
}
