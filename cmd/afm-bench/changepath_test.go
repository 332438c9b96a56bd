package main

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// at is 2026-12-06 19:07:54 plus ns nanoseconds, UTC: the time of the
// testdata's lines (a --keep run of --only fabric on SQLite, whose OpenSM
// stamped its log in UTC).
func at(ns int) time.Time { return time.Date(2026, time.December, 6, 19, 7, 54, ns, time.UTC) }

// TestSweepsOf pairs the manager's "partitions applied" lines with OpenSM's
// own stamps on the sweeps they started (testdata/changepath: two changes'
// applies and the bare sweep between them). In both, OpenSM logged its
// sweep's start before the manager read its clock after the kill.
func TestSweepsOf(t *testing.T) {
	split, err := readApplySplit("testdata/changepath/manager.log", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(split.at) != 2 {
		t.Fatalf("%d applies, want 2", len(split.at))
	}
	// Revision 19: time .447162308 less took 21639791 is its start;
	// render 309030, write 4483740, sweep 11545432 ns after.
	want0 := applyTimes{started: at(425522517), rendered: at(425831547), signalled: at(430315287),
		swept: at(441860719), logged: at(447162308)}
	if split.at[0] != want0 {
		t.Errorf("apply 1: %+v, want %+v", split.at[0], want0)
	}
	text, err := os.ReadFile("testdata/changepath/opensm.log")
	if err != nil {
		t.Fatal(err)
	}
	full := string(text)
	// The excerpt's third sweep (the second apply's) starts at its line 62.
	lines := strings.SplitAfter(full, "\n")
	withoutLast := strings.Join(lines[:61], "")
	// The second apply's render as its clock read it just after OpenSM
	// stamped that apply's sweep's start: the two clocks' readings a few
	// microseconds apart.
	stampedFirst := append([]applyTimes(nil), split.at...)
	stampedFirst[1].rendered = at(461200000)
	for _, tc := range []struct {
		name    string
		log     string
		loc     *time.Location
		applies []applyTimes // nil: the testdata's
		want    []osmSweep
		wantErr string
	}{
		{"each apply its own sweep, the bare sweep between skipped", full, time.UTC, nil,
			[]osmSweep{{hup: at(430197000), up: at(439741000)}, {hup: at(461150000), up: at(467498000)}}, ""},
		{"a sweep OpenSM stamped as begun before the render: the one whose end the manager read, from the SIGHUP",
			full, time.UTC, stampedFirst,
			[]osmSweep{{hup: at(430197000), up: at(439741000)}, {hup: at(461366652), up: at(467498000)}}, ""},
		{"the second apply's sweep not in the log", withoutLast, time.UTC, nil, nil, "apply 2"},
		{"the stamps read in a zone an hour east of OpenSM's: every sweep before the applies", full,
			time.FixedZone("east", 3600), nil, nil, "no SUBNET UP"},
		{"an hour west: every SUBNET UP after the manager read it", full,
			time.FixedZone("west", -3600), nil, nil, "no SUBNET UP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := opensm.ParseLog(strings.NewReader(tc.log))
			if err != nil {
				t.Fatal(err)
			}
			applies := split.at
			if tc.applies != nil {
				applies = tc.applies
			}
			got, err := sweepsOf(entries, applies, tc.loc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d sweeps, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !got[i].hup.Equal(tc.want[i].hup) || !got[i].up.Equal(tc.want[i].up) {
					t.Errorf("sweep %d: %v → %v, want %v → %v", i+1, got[i].hup, got[i].up, tc.want[i].hup, tc.want[i].up)
				}
			}
		})
	}
}

// TestPathOf splits the testdata's first change along its path: the steps
// follow one another, so that they sum to the change's latency, to its
// job's commit (the apply's line, logged before the client read Completed),
// the client's read after it; the own overhead is the latency less
// OpenSM's sweep, the older figure less the manager's. A client that read
// Completed before the line was logged gives the latency its read.
func TestPathOf(t *testing.T) {
	split, err := readApplySplit("testdata/changepath/manager.log", 0)
	if err != nil {
		t.Fatal(err)
	}
	split = split.last(1) // revision 20
	sweeps := []osmSweep{{hup: at(461150000), up: at(467498000)}}
	c := change{sent: at(457000000), done: at(478300000)} // the bench's clock readings
	p, err := pathOf([]change{c}, split, sweeps)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		got  latencies
		want time.Duration
	}{
		{"wait", p.wait, 1774389},          // started .458774389
		{"render", p.render, 549529},       // as logged
		{"write", p.write, 1826082},        // rendered .459323918 → OpenSM's sweep start .461150
		{"sweep", p.sweep, 6348000},        // → SUBNET UP .467498
		{"end's read", p.endRead, 4941550}, // → swept .472439550
		{"verify", p.verify, 1433455},
		{"complete", p.complete, 3874423},
		{"client's read", p.client, 552041}, // logged .477747959 → done
	}
	var sum time.Duration
	for _, s := range steps {
		if len(s.got) != 1 || s.got[0] != s.want {
			t.Errorf("%s: %v, want %v", s.name, s.got, s.want)
		}
		if s.name != "client's read" {
			sum += s.want
		}
	}
	// verify and complete as logged end a few hundred ns before the line.
	committed := c.committed(split.at[0])
	if total := committed.Sub(c.sent); !committed.Equal(at(477747959)) || sum > total || total-sum > 10*time.Microsecond {
		t.Errorf("the steps sum to %v, the change took %v to %v", sum, total, committed)
	}
	if p.own[0] != 20747959-6348000 || p.ownRead[0] != 20747959-11072898 {
		t.Errorf("own %v, ownRead %v", p.own, p.ownRead)
	}
	early := change{sent: c.sent, done: at(477700000)} // read Completed 48 µs before the line
	if q, err := pathOf([]change{early}, split, sweeps); err != nil || q.own[0] != 20700000-6348000 {
		t.Errorf("read before the line: own %v (%v), want the read's", q.own, err)
	}
	if _, err := pathOf([]change{c, c}, split, sweeps); err == nil {
		t.Error("two changes paired with one apply")
	}
}

// TestAwaitApplySplit waits for the last change's line: the client may read
// its job Completed, committed, before the manager logs the apply's line.
func TestAwaitApplySplit(t *testing.T) {
	lines, err := os.ReadFile("testdata/changepath/manager.log")
	if err != nil {
		t.Fatal(err)
	}
	last := strings.Index(string(lines), `"revision":20`)
	cut := strings.LastIndex(string(lines[:last]), "\n") + 1 // the second apply's line starts here
	path := t.TempDir() + "/manager.log"
	if err := os.WriteFile(path, lines[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			f.Write(lines[cut:])
			f.Close()
		}
	}()
	split, err := awaitApplySplit(t.Context(), path, 0, time.Time{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(split.at) != 2 {
		t.Errorf("%d applies read, want 2: the second's line was written after the read began", len(split.at))
	}
	// An apply logged before the first change was sent (the enrollment's
	// last) is none of the changes': only the second is awaited and read.
	split, err = awaitApplySplit(t.Context(), path, 0, at(450000000), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(split.at) != 1 || !split.at[0].logged.Equal(at(477747959)) || len(split.render) != 1 || len(split.verify) != 1 {
		t.Errorf("the applies logged since the first change: %+v, want revision 20's alone", split)
	}
}

// TestFabricRowsNotMeasured: an engine whose fabric could not be measured
// shows no figure and no ✓ beside one that was.
func TestFabricRowsNotMeasured(t *testing.T) {
	ok := fabricResult{hosts: 6, switches: 1, path: changePath{own: latencies{3e6}, complete: latencies{1e6}},
		overhead: overheadResult{sweep: latencies{2e6}, change: latencies{5e6}}}
	failed := fabricResult{hosts: 6, switches: 1, err: errors.New("the manager logged 1 line for 2 changes")}
	results := []engineResult{{engine: "sqlite", fabric: []fabricResult{ok}}, {engine: "postgres", fabric: []fabricResult{failed}}}
	o := options{samples: 2, only: map[string]bool{"fabric": true}}
	text := table(results, renderResult{}, o)
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| measure") {
			continue
		}
		cells := strings.Split(line, " | ")
		if pg := cells[len(cells)-1]; pg != "✗ not measured |" {
			t.Errorf("postgres's cell %q, want ✗ not measured, in %s", pg, line)
		}
	}
	if !strings.Contains(text, "3.00 ms / 3.00 ms ✓ | ✗ not measured |") {
		t.Errorf("the overhead's row lacks the measured engine's figure:\n%s", text)
	}
}

// TestFabricTargetSubtractsTheBareSweep: the target row is the change's
// latency less OpenSM's bare sweep; an apply's own sweep, which the
// manager's work beside it lengthens, gives only the row after it.
func TestFabricTargetSubtractsTheBareSweep(t *testing.T) {
	f := fabricResult{hosts: 24, switches: 1, path: changePath{own: latencies{4e6}, complete: latencies{1e6}},
		overhead: overheadResult{sweep: latencies{4e6}, change: latencies{10e6}}}
	o := options{samples: 1, only: map[string]bool{"fabric": true}}
	text := table([]engineResult{{engine: "sqlite", fabric: []fabricResult{f}}}, renderResult{}, o)
	for line := range strings.SplitSeq(text, "\n") {
		switch {
		case strings.HasPrefix(line, "| the manager's overhead: POST → Completed − OpenSM's bare sweep"):
			if !strings.HasSuffix(line, "| 6.00 ms / 6.00 ms ✗ |") {
				t.Errorf("the target row: %s; want 10 ms less the 4 ms bare sweep, over 5 ms", line)
			}
		case strings.HasPrefix(line, "| the same less OpenSM's own sweep"):
			if !strings.HasSuffix(line, "|  | 4.00 ms / 4.00 ms |") {
				t.Errorf("the own sweep's row: %s; want 4 ms and no mark", line)
			}
		}
	}
	if !strings.Contains(text, "OpenSM's bare sweep (median)") {
		t.Errorf("no target row against the bare sweep:\n%s", text)
	}
}
