package applier

import (
	"os"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

// clearedLine is upstream OpenSM's line for switch port 2 of S1, told apart by
// its time stamp (OpenSM repeats the line at every heavy sweep).
func clearedLine(stamp string) string {
	return "Nov 29 19:22:" + stamp + " 251392 [8507C6C0] 0x01 -> pkey_mgr_update_peer_port: ERR 0507: " +
		"Not enough pkey entries (60 <= 60) on switch 0x0002c90300f00001 port 2 (S1). Clearing Enforcement bit\n"
}

// verboseFiller is n bytes or so of the VERBOSE lines a large sweep logs.
func verboseFiller(n int) string {
	line := logLine(0x04, "osm_prtn_add_port: port 0x2c90300010001 already in partition 'Default' (0x7fff). Will overwrite")
	return strings.Repeat(line, n/len(line)+1)
}

// The term's tail reads each byte of the log once across applies and polls
// (opensm's TestTailReadsEachByteOnce counts them, as a term uses its tail):
// the sweeps' stretches, read while their ends were waited for, are not read
// again between sweeps, and yet every enforcement line is recorded once,
// whether it is in a sweep (before its start box, in it) or between sweeps.
func TestEnforcementScanReadsEachByteOnce(t *testing.T) {
	const sweepBytes = 1 << 20
	sweeps := 0
	r := newApplyRig(t, true, func() string {
		sweeps++
		// A line logged between the position and the sweep's start, and one
		// in the middle of a megabyte of VERBOSE lines.
		if sweeps == 1 {
			return clearedLine("01") + heavySweep(verboseFiller(sweepBytes/2)+clearedLine("02")+verboseFiller(sweepBytes/2))
		}
		return heavySweep(verboseFiller(sweepBytes))
	})
	r.network(101)
	ctx := t.Context()
	if res := r.term.apply(ctx); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if got := recorded(t, r.st); len(got) != 1 || got[0] != "0x0002c90300f00001:2 xII" {
		t.Fatalf("after the first sweep: %q, want S1 port 2 seen twice", got)
	}
	// Between applies, a line of its own, read by the watch at the next poll.
	opensmtest.AppendLog(t, r.sm.log, clearedLine("03"))
	r.term.pollGates(ctx)
	if got := recorded(t, r.st); len(got) != 1 || got[0] != "0x0002c90300f00001:2 xIII" {
		t.Fatalf("after a line between sweeps: %q, want S1 port 2 seen three times", got)
	}
	// One line just before the next apply's position: read by the apply's
	// wait, before the sweep's lines.
	opensmtest.AppendLog(t, r.sm.log, clearedLine("04"))
	if _, err := r.st.ClearEnforcementErrors(ctx); err != nil { // the operator repaired it
		t.Fatal(err)
	}
	r.port("p1", 0x0002c90300000101)
	if res := r.term.apply(ctx); res != applyDone {
		t.Fatalf("second apply: %v, want done", res)
	}
	r.term.pollGates(ctx)
	if got := recorded(t, r.st); len(got) != 1 || got[0] != "0x0002c90300f00001:2 xI" {
		t.Errorf("after the second sweep: %q, want S1 port 2 seen once (the line before its position)", got)
	}
}

// After a sweep, a truncation in place and a rotation are read from the
// start of what the log holds: nothing the new file says is skipped because
// of the offset the old one had reached.
func TestEnforcementScanAfterSweepTruncationAndRotation(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep(verboseFiller(64 << 10)) })
	r.network(101)
	ctx := t.Context()
	if res := r.term.apply(ctx); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if got := recorded(t, r.st); len(got) != 0 {
		t.Fatalf("recorded %q, want nothing", got)
	}
	// log_max_size: truncated to nothing, then a short line: shorter than
	// where the watch was.
	if err := os.Truncate(r.sm.log, 0); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, r.sm.log, clearedLine("05"))
	r.term.pollGates(ctx)
	if got := recorded(t, r.st); len(got) != 1 || got[0] != "0x0002c90300f00001:2 xI" {
		t.Fatalf("after truncation: %q, want the new line recorded", got)
	}
	// Rotation by renaming: a last line in the old file, then the new file.
	if err := os.Rename(r.sm.log, r.sm.log+".1"); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, r.sm.log+".1", clearedLine("06"))
	opensmtest.AppendLog(t, r.sm.log, clearedLine("07"))
	r.term.pollGates(ctx)
	if got := recorded(t, r.st); len(got) != 1 || got[0] != "0x0002c90300f00001:2 xIII" {
		t.Errorf("after rotation: %q, want both lines recorded", got)
	}
}

// A tail that starts after an earlier term's (a manager restarted, a new
// term) reads everything from where it starts, the stretches the earlier
// term's sweeps read included.
func TestEnforcementScanNewTailReadsEverything(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep(verboseFiller(64<<10) + clearedLine("08")) })
	r.network(101)
	ctx := t.Context()
	if res := r.term.apply(ctx); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	if _, err := r.st.ClearEnforcementErrors(ctx); err != nil {
		t.Fatal(err)
	}
	// The new term's tail, started at the beginning of the log.
	var found enforcementLog
	tail, err := opensm.OpenTail(r.sm.log, opensm.Position{}, found.observe)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	if err := tail.Pump(); err != nil {
		t.Fatal(err)
	}
	if err := found.record(ctx, r.term.id, r.st, r.term.Log); err != nil {
		t.Fatal(err)
	}
	if got := recorded(t, r.st); len(got) != 1 || got[0] != "0x0002c90300f00001:2 xI" {
		t.Errorf("a fresh tail: %q, want the sweep's line recorded", got)
	}
}
