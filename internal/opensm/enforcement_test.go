package opensm

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEnforcementErrors(t *testing.T) {
	tests := []struct {
		file string
		want []string // EnforcementError.String() of each, in log order
	}{
		{"enforcement/err-0507.log", []string{"0x0002c90300f00001:2", "0x0002c90300f0abcd:17", "0x0002c90300f00001:2"}},
		{"enforcement/old-0508.log", []string{"0x0002c90300f00001:7"}},
		// ERR 0513's format is unknown: where it would quote a description
		// is unknown too, so no place is read out of it, only its code.
		{"enforcement/nvidia-0513.log", []string{
			Unattributed, // a switch port named, in an unknown format
			Unattributed, // only the host's node
			Unattributed, // the phrase, no place
			Unattributed, // GUID 0
			Unattributed, // port 0 is the switch itself
			Unattributed, // a switch port on the continuation line
		}},
		// Real logs without enforcement errors (ERR 0512 is the host's own table).
		{"pkey-table-full.log", nil},
		{"applied.log", nil},
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
			got := EnforcementErrors(entries)
			var places []string
			for _, e := range got {
				places = append(places, e.String())
				// The line is the entry as written: its header line is in the file.
				header, _, _ := strings.Cut(e.Line, " -> ")
				if !strings.Contains(string(data), header+" -> ") {
					t.Errorf("line %q: its header is not in the log", e.Line)
				}
				if e.Attributed() != (e.Port != 0) || (e.Switch == Unattributed) == e.Attributed() {
					t.Errorf("%+v: Attributed and Port disagree", e)
				}
			}
			if !slices.Equal(places, tt.want) {
				t.Errorf("switch ports %q, want %q", places, tt.want)
			}
		})
	}
}

func TestEnforcementErrorKeepsTheWholeLine(t *testing.T) {
	const line = "Nov 29 19:24:37 389012 [F5B2C6C0] 0x01 -> pkey_mgr_update_peer_port: ERR 0507: Not enough pkey " +
		"entries (48 <= 48) on switch 0x0002c90300f00001 port 2 (MF0;leaf-01:MQM8700/U1). Clearing Enforcement bit"
	entries, err := ParseLog(strings.NewReader(line + "\n"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("ParseLog: %v, %v", entries, err)
	}
	e, ok := ParseEnforcementError(entries[0])
	if !ok || e.Line != line || e.Switch != "0x0002c90300f00001" || e.Port != 2 {
		t.Errorf("ParseEnforcementError = %+v, %v; want the line kept whole, switch port 0x0002c90300f00001:2", e, ok)
	}
}

// The cheap test never hides an enforcement error from EnforcementErrors, and
// lets a log without any pass unparsed.
func TestMayHoldEnforcementErrors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("testdata", "enforcement", "*.log"))
	sawNone, sawSome := false, false
	for _, path := range append(files, more...) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := ParseLog(bytes.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		found := len(EnforcementErrors(entries)) > 0
		may := MayHoldEnforcementErrors(text)
		if found && !may {
			t.Errorf("%s: holds enforcement errors, but MayHoldEnforcementErrors says no", path)
		}
		sawSome = sawSome || found
		sawNone = sawNone || !may
	}
	if !sawSome || !sawNone {
		t.Errorf("the fixtures should include logs with and without enforcement errors (with: %v, without: %v)", sawSome, sawNone)
	}
}
