package opensm

import (
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
			got := enforcementErrors(entries)
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

// Where ParseEnforcementError looks: the code after the function name, the
// two known formats whatever the code, the phrase as the first words; and
// nowhere else in a message.
func TestParseEnforcementErrorFormats(t *testing.T) {
	const s = "0x0002c90300f00001:5"
	tests := []struct {
		message string
		want    string // "" when not an enforcement error
	}{
		{"pkey_mgr_update_peer_port: ERR 0507: Not enough pkey entries (48 <= 48) on switch 0x0002c90300f00001 port 5 (leaf). Clearing Enforcement bit", s},
		{"pkey_mgr_update_peer_port: ERR 0508: Not enough pkey entries (32 < 33) on switch 0x0002c90300f00001 port 5. Clearing Enforcement bit", s},
		{"f: ERR 0B10: Not enough pkey entries (48 <= 48) on switch 0x0002c90300f00001 port 5 (). Clearing Enforcement bit", s},
		{"f: ERR 0507: another text", Unattributed},
		{"f: ERR 0507: Not enough pkey entries (48 <= 48) on switch 0x0002c90300f00001 port 255 (x). Clearing Enforcement bit", Unattributed},
		{"f: ERR 0507: Not enough pkey entries (48 <= 48) on switch 0x00002c90300f000001 port 5 (x). Clearing Enforcement bit", Unattributed},
		{"f: ERR 0513:", Unattributed},
		{"f: clearing enforcement bit on port 3", Unattributed},
		{"f: ERR 0B10: Clearing Enforcement bit", Unattributed},
		{"f: ERR 0508: Failed to set accum_pkeys PKey 0x8065 in block 0 idx 2 for node 0x0002c90300000100 port 1 (H1)", ""},
		{"f: ERR 0508: Not enough pkey entries (32 < 33) on switch 0x0002c90300f00001 port 5. Clearing Enforcement bit now", ""},
		{"f: x Clearing Enforcement bit", ""},
		{"f: ERR 05070: x", ""},
		{"ERR 0507: no function name", ""},
		{"Clearing Enforcement bit", ""},
		{"f : ERR 0507: x", ""},
	}
	for _, tt := range tests {
		e, ok := ParseEnforcementError(Entry{Time: "Jan 05 10:00:00 000001", Thread: "7F00AA00", Level: LevelError, Message: tt.message})
		got := ""
		if ok {
			got = e.String()
		}
		if got != tt.want {
			t.Errorf("ParseEnforcementError(%q) = %q, want %q", tt.message, got, tt.want)
		}
	}
}

// enforcementErrors returns the entries that say enforcement was cleared, in
// log order, as the term's tail hands them to ParseEnforcementError.
func enforcementErrors(entries []Entry) []EnforcementError {
	var out []EnforcementError
	for _, e := range entries {
		if ee, ok := ParseEnforcementError(e); ok {
			out = append(out, ee)
		}
	}
	return out
}
