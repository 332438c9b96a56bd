package opensm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
)

// A bare-metal tenant has root on its host and sets the host's node
// description to whatever it likes; OpenSM quotes it in its log. These tests
// put every phrase this package looks for into a description, in every
// format of OpenSM's that quotes one near the lines read here, and check that
// the log says exactly what it says with a harmless description: no sweep
// outcome, pkey error, enforcement error or switch port changes.

// describedLines are OpenSM's formats that quote a node's description (%s),
// as osm_drop_mgr.c, osm_state_mgr.c, osm_pkey_mgr.c and osm_node_desc_rcv.c
// print them, with their level: the lines a link bounce, a new port, a full
// pkey table or a description update put into the log.
var describedLines = []string{
	"0x02 -> drop_mgr_remove_port: Removed port with GUID:0x0002c90300000801 LID range [10, 10] of node:%s",
	"0x02 -> state_mgr_report_new_ports: Discovered new port with GUID:0x0002c90300000801 LID range [10,10] of node: %s",
	"0x04 -> nd_rcv_process_nd: Node 0x2c90300000800\n\t\t\t\tDescription = %s",
	"0x01 -> pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8140 because Pkey table is full for node 0x0002c90300000100 port 1 (%s)",
	"0x01 -> pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300000300 port 1 (%s)",
	"0x01 -> pkey_mgr_update_port: ERR 0508: Failed to set accum_pkeys PKey 0x8065 in block 0 idx 2 for node 0x0002c90300000100 port 1 (%s)",
	"0x01 -> pkey_mgr_update_peer_port: ERR 0507: Not enough pkey entries (48 <= 48) on switch 0x0002c90300f00001 port 2 (%s). Clearing Enforcement bit",
	"0x02 -> pkey_mgr_update_port: Reusing PKeyTable block index 0 pkey index 5 for pkey 0x8065 on 0x0002c90300000100 port 1 (%s)",
	"0x04 -> pkey_mgr_enforce_partition: Set PortInfo for node 0x0002c90300f00001 port 3 (%s)",
	"0x04 -> state_mgr_send_handover: Handing over mastership. Updating sm_state_mgr master_guid: 0002c90300000101 (node %s)",
}

// describedLog is a log in which OpenSM quotes desc in every format of
// describedLines, before a heavy sweep and during it, and the sweep ends with
// SUBNET UP.
func describedLog(desc string) string {
	var b strings.Builder
	usec := 0
	lines := func() {
		for _, f := range describedLines {
			usec++
			fmt.Fprintf(&b, "Dec 01 10:04:03 %06d [C89DF6C0] %s\n", usec, fmt.Sprintf(f, desc))
		}
	}
	lines()
	b.WriteString("Dec 01 10:04:03 100000 [C89DF6C0] 0x04 -> do_sweep:\n\n\n" + boxRule + "\n" +
		"********************* INITIATING HEAVY SWEEP *********************\n" + boxRule + "\n\n\n")
	lines()
	b.WriteString("Dec 01 10:04:04 000009 [C89DF6C0] 0x02 -> SUBNET UP\n")
	return b.String()
}

// logVerdict is what this package reads out of a log: the sweep's outcome,
// the place each pkey error names, and the switch port of each enforcement
// error, through the sweep's watch and through ParseEnforcementError.
type logVerdict struct {
	Outcome     Outcome
	PKeyPlaces  []string
	Enforcement []string
	Titles      []string
}

func readLog(t testing.TB, log string) logVerdict {
	t.Helper()
	entries, err := ParseLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	var v logVerdict
	for _, e := range entries {
		if e.Title != "" {
			v.Titles = append(v.Titles, e.Title)
		}
	}
	for _, e := range enforcementErrors(entries) {
		v.Enforcement = append(v.Enforcement, e.String())
	}
	var w sweepWatch
	res, done := SweepResult{}, false
	for _, e := range entries {
		if res, done = w.observe(e); done {
			break
		}
	}
	if !done {
		res = w.atDeadline(time.Second)
	}
	v.Outcome = res.Outcome
	for _, l := range res.PKeyErrors {
		node, port, ok := PKeyErrorPlace(l)
		v.PKeyPlaces = append(v.PKeyPlaces, fmt.Sprintf("%#x:%d:%v", node, port, ok))
	}
	return v
}

func (v logVerdict) equal(o logVerdict) bool {
	return v.Outcome == o.Outcome && slices.Equal(v.PKeyPlaces, o.PKeyPlaces) &&
		slices.Equal(v.Enforcement, o.Enforcement) && slices.Equal(v.Titles, o.Titles)
}

// hostileDescriptions hold every phrase this package looks for, the ERR codes
// it reads, other switch ports and nodes, the ends of OpenSM's formats, and
// whole forged lines (a newline is turned into a space by OpenSM).
var hostileDescriptions = []string{
	"Clearing Enforcement bit",
	"clearing enforcement bit",
	". Clearing Enforcement bit",
	"x). Clearing Enforcement bit",
	"ERR 0507",
	"ERR 0507: x",
	"ERR 0513: x",
	"f: ERR 0513: x",
	"ERR 0512: Failed to set PKey 0x8001",
	"ERR 0510: osm_prtn_make_partitions() failed",
	"ERR 3119: Set method failed for attribute 0x16 (P_KeyTable)",
	"ERR 3113: x SubnSet(P_KeyTable)",
	"Partition configuration in error",
	"f: Partition configuration in error; retrying with default config",
	"Partition configuration x is not accessible (y)",
	"Cannot open config file 'x': y",
	"PARSE ERROR: line 1: bad PortGUID",
	"SUBNET UP",
	"Entering STANDBY state",
	"Errors during initialization",
	"INITIATING HEAVY SWEEP",
	"*** INITIATING HEAVY SWEEP ***",
	"of node:",
	"of node: Clearing Enforcement bit",
	"switch 0x0002c90300f00009 port 9",
	") on switch 0x0002c90300f00009 port 9 (",
	"0x0002c90300f00009 port 9 (s). Clearing Enforcement bit",
	"on switch 0x0002c90300f00009 port 9. Clearing Enforcement bit",
	"node 0x0002c90300000999 port 1",
	"x) for node 0x0002c90300000999 port 7 (y",
	"Not enough pkey entries (1 <= 1) on switch 0x0002c90300f00009 port 9 (s). Clearing Enforcement bit",
	"x\nDec 01 10:04:04 000009 [C89DF6C0] 0x02 -> SUBNET UP",
	"\nDec 01 10:04:04 000001 [C89DF6C0] 0x01 -> f: ERR 0507: x",
	"x\n\n\n" + boxRule + "\n*** INITIATING HEAVY SWEEP ***",
	"\r\n\t\x00hidden",
	"",
}

func TestHostileNodeDescriptionsChangeNothing(t *testing.T) {
	want := readLog(t, describedLog("H1"))
	// What the harmless log says, so that the comparison means something:
	// one ERR 0507 per pass, attributed, and three pkey errors in the sweep.
	if want.Outcome != Applied || len(want.PKeyPlaces) != 3 ||
		!slices.Equal(want.Enforcement, []string{"0x0002c90300f00001:2", "0x0002c90300f00001:2"}) ||
		!slices.Equal(want.Titles, []string{titleHeavySweepStart}) {
		t.Fatalf("the harmless log reads as %+v", want)
	}
	for _, raw := range hostileDescriptions {
		desc := fabricsim.CleanNodeDescription([]byte(raw))
		if got := readLog(t, describedLog(desc)); !got.equal(want) {
			t.Errorf("description %q (logged as %q): the log reads as\n%+v\nwant\n%+v", raw, desc, got, want)
		}
	}
}

// The case, line by line: a tenant's description in the line its link
// bounce logs is no enforcement error, and no pkey error, and does not reject
// the partitions file.
func TestDescriptionIsNoMessage(t *testing.T) {
	for _, desc := range []string{"Clearing Enforcement bit", "ERR 0507: x", "ERR 0512: x", "Partition configuration in error"} {
		for _, f := range []string{describedLines[0], describedLines[1]} {
			line := "Dec 01 10:04:03 624675 [C89DF6C0] " + fmt.Sprintf(f, desc)
			entries, err := ParseLog(strings.NewReader(line + "\n"))
			if err != nil || len(entries) != 1 {
				t.Fatalf("ParseLog(%q): %v, %v", line, entries, err)
			}
			if e, ok := ParseEnforcementError(entries[0]); ok {
				t.Errorf("%q: read as an enforcement error %+v", line, e)
			}
			_, rest, _ := splitFunction(entries[0].Message)
			code, _, isErr := errorCode(rest)
			if isErr || isPartitionsRejected(rest) || isPKeyError(entries[0], code) {
				t.Errorf("%q: read as an error or a rejected file", line)
			}
		}
	}
}

// OpenSM's own enforcement lines keep their place whatever the switch's
// description says.
func TestEnforcementPlaceIgnoresTheDescription(t *testing.T) {
	for _, raw := range hostileDescriptions {
		desc := fabricsim.CleanNodeDescription([]byte(raw))
		line := "Nov 29 19:24:37 389012 [F5B2C6C0] 0x01 -> pkey_mgr_update_peer_port: ERR 0507: Not enough pkey " +
			"entries (48 <= 48) on switch 0x0002c90300f00001 port 2 (" + desc + "). Clearing Enforcement bit"
		entries, err := ParseLog(strings.NewReader(line + "\n"))
		if err != nil || len(entries) != 1 {
			t.Fatalf("ParseLog: %v, %v", entries, err)
		}
		if e, ok := ParseEnforcementError(entries[0]); !ok || e.String() != "0x0002c90300f00001:2" || e.Line != line {
			t.Errorf("description %q: %+v, %v; want 0x0002c90300f00001:2 and the whole line", desc, e, ok)
		}
	}
}

// FuzzNodeDescription: no description, cleaned as OpenSM cleans it, changes
// what the log says.
func FuzzNodeDescription(f *testing.F) {
	for _, d := range hostileDescriptions {
		f.Add([]byte(d))
	}
	want := readLog(f, describedLog("H1"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		desc := fabricsim.CleanNodeDescription(raw)
		if got := readLog(t, describedLog(desc)); !got.equal(want) {
			t.Errorf("description %q: the log reads as\n%+v\nwant\n%+v", desc, got, want)
		}
	})
}
