package opensm

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	tests := []struct {
		line      string
		wantOK    bool
		wantLevel Level
		wantMsg   string
	}{
		{"Nov 29 18:16:33 486627 [F89526C0] 0x02 -> SUBNET UP", true, LevelInfo, "SUBNET UP"},
		{"Nov 29 19:22:53 258832 [8507C6C0] 0x80 -> Entering MASTER state", true, LevelSys, "Entering MASTER state"},
		{"Nov 29 19:22:53 236962 [88083740] 0x03 -> OpenSM 3.3.23", true, LevelError | LevelInfo, "OpenSM 3.3.23"},
		{"Nov 29 19:22:53 251392 [8507C6C0] 0x04 -> state_mgr_sweep_hop_0:", true, LevelVerbose, "state_mgr_sweep_hop_0:"},
		{"Jan 01 00:00:00 000000 [0] 0x01 -> ", true, LevelError, ""},
		{"*************************** SUBNET UP ****************************", false, 0, ""},
		{"\t\t\tMethod 0x2, Attr 0x16, TID 0x1312", false, 0, ""},
		{"Nov 29 18:16:33 486627 [f89526c0] 0x02 -> SUBNET UP", false, 0, ""}, // thread id is upper case
		{"Nov 29 18:16:33 48662 [F89526C0] 0x02 -> SUBNET UP", false, 0, ""},  // microseconds have 6 digits
		{"Nov 29 18:16:33 486627 [F89526C0] 0x2 -> SUBNET UP", false, 0, ""},
		{"PARSE ERROR: line 2: bad PortGUID", false, 0, ""}, // stderr copy, no header
	}
	for _, tt := range tests {
		e, ok := parseHeader(tt.line)
		if ok != tt.wantOK || e.Level != tt.wantLevel || e.Message != tt.wantMsg {
			t.Errorf("parseHeader(%q) = (level %#x, %q, %v), want (%#x, %q, %v)",
				tt.line, e.Level, e.Message, ok, tt.wantLevel, tt.wantMsg, tt.wantOK)
		}
	}
}

func TestParseLogRealSweeps(t *testing.T) {
	log, _ := loadFixture(t, "applied.log")
	entries, err := ParseLog(bytes.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	first := entries[0]
	if first.Time != "Nov 29 19:22:53 236962" || first.Thread != "88083740" || first.Message != "OpenSM 3.3.23" {
		t.Errorf("first entry %+v", first)
	}

	var titles []string
	subnetUpHeaders := 0
	for _, e := range entries {
		if e.Title != "" {
			titles = append(titles, e.Title)
			if len(e.More) != 7 { // 2 blank, stars, title, stars, 2 blank
				t.Errorf("box %q has %d continuation lines, want 7: %q", e.Title, len(e.More), e.More)
			}
		}
		if e.Message == "SUBNET UP" {
			subnetUpHeaders++
			if e.Level != LevelInfo || e.Title != "" {
				t.Errorf("SUBNET UP header: %+v", e)
			}
		}
	}
	// Start-up sweep and the SIGHUP sweep, each with the same boxes.
	sweep := []string{
		"INITIATING HEAVY SWEEP", "HEAVY SWEEP COMPLETE",
		"PKEY setup completed - STARTING SM LID CONFIG",
		"SM LID ASSIGNMENT COMPLETE - STARTING SUBNET LID CONFIG",
		"LID ASSIGNMENT COMPLETE - STARTING SWITCH TABLE CONFIG",
		"SWITCHES CONFIGURED FOR UNICAST", "SWITCHES CONFIGURED FOR MULTICAST",
		"ALIAS GUIDS CONFIGURED",
		"LINKS PORTS CONFIGURED - SET LINKS TO ARMED STATE",
		"LINKS ARMED - SET LINKS TO ACTIVE STATE",
		"SUBNET UP",
	}
	startup := slices.Insert(slices.Clone(sweep), 2, "ENTERING SM MASTER STATE")
	if want := append(startup, sweep...); !slices.Equal(titles, want) {
		t.Errorf("box titles\n%q\nwant\n%q", titles, want)
	}
	if subnetUpHeaders != 2 {
		t.Errorf("%d SUBNET UP header lines, want 2", subnetUpHeaders)
	}
}

func TestParseLogContinuationLines(t *testing.T) {
	log, _ := loadFixture(t, "dropped-mads.log")
	entries, err := ParseLog(bytes.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Message, "ERR 5411") {
			want := "log_send_error: ERR 5411: DR SMP Send completed with error (IB_TIMEOUT) -- dropping Method 0x2, Attr 0x16, TID 0x1312"
			if e.Text() != want || len(e.More) != 1 || e.Level != LevelError {
				t.Errorf("ERR 5411 entry: %+v, text %q", e, e.Text())
			}
			return
		}
	}
	t.Error("no ERR 5411 entry")
}

func TestParseLogDropsLinesBeforeFirstHeader(t *testing.T) {
	log := "\n*** HALF A BOX ***\n\nNov 29 19:22:53 283290 [8507C6C0] 0x02 -> SUBNET UP\n"
	entries, err := ParseLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Message != "SUBNET UP" || len(entries[0].More) != 0 {
		t.Errorf("entries %+v, want the SUBNET UP line alone", entries)
	}
}
