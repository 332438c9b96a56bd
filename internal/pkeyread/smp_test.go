package pkeyread

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// answer reads testdata/<name>.hex: an answer of the simulated fabric (ibsim
// 0.10, 4 hosts on switch S1, H1 a full and H2 a limited member of 0x0064) to
// getSMP(…, tid 7), as hex.Dump wrote it.
func answer(t *testing.T, name string) []byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", name+".hex"))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for line := range strings.Lines(string(text)) {
		// "00000040  7f ff 80 64 00 00 00 00  00 00 ...  |...d....|"
		hexPart, _, _ := strings.Cut(line, "|")
		fields := strings.Fields(hexPart)
		if len(fields) < 2 {
			continue
		}
		b, err := hex.DecodeString(strings.Join(fields[1:], ""))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, b...)
	}
	return out
}

func TestGetSMP(t *testing.T) {
	mad := getSMP(attrPKeyTable, pkeyModifier(17, 3), 0x0102030405060708, 0xa1b2c3d4)
	want := make([]byte, MADSize)
	copy(want, []byte{1, 0x01, 1, 0x01}) // base version, LID-routed SM class, class version, Get
	copy(want[8:], []byte{0, 0, 0, 0, 0xa1, 0xb2, 0xc3, 0xd4})
	copy(want[16:], []byte{0x00, 0x16, 0, 0, 0x00, 0x11, 0x00, 0x03})
	copy(want[24:], []byte{1, 2, 3, 4, 5, 6, 7, 8})
	if !slices.Equal(mad, want) {
		t.Errorf("getSMP:\n%s\nwant\n%s", hex.Dump(mad), hex.Dump(want))
	}
}

func TestAnswerData(t *testing.T) {
	withTID := func(b []byte, hi uint32) []byte { // the transport's high bits
		b = slices.Clone(b)
		binary.BigEndian.PutUint32(b[offTID:], hi)
		return b
	}
	pkeys := answer(t, "pkeytable-hca-block0")
	tests := []struct {
		name    string
		request []byte
		answer  []byte
		want    Table  // of the data, as a P_KeyTable block
		err     string // "" for success
	}{
		{"block 0 of H1", getSMP(attrPKeyTable, 0, 0, 7), pkeys, Table{0x7fff, 0x8064}, ""},
		{"high TID bits are the transport's", getSMP(attrPKeyTable, 0, 0, 7), withTID(pkeys, 0xffff0000), Table{0x7fff, 0x8064}, ""},
		{"another transaction", getSMP(attrPKeyTable, 0, 0, 8), pkeys, nil, "another transaction"},
		{"another attribute", getSMP(attrNodeInfo, 0, 0, 7), pkeys, nil, "another attribute"},
		{"another block", getSMP(attrPKeyTable, 1, 0, 7), pkeys, nil, "another attribute"},
		{"the request back", getSMP(attrPKeyTable, 0, 0, 7), getSMP(attrPKeyTable, 0, 0, 7), nil, "want a SubnGetResp"},
		{"short", getSMP(attrPKeyTable, 0, 0, 7), pkeys[:100], nil, "100 bytes"},
		{"a block past the table", getSMP(attrPKeyTable, 5, 0, 7), answer(t, "pkeytable-bad-block"), nil, "MAD status 0x001c: invalid attribute or modifier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := answerData(tt.request, tt.answer)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := appendPKeys(nil, data); !slices.Equal(got, tt.want) {
				t.Errorf("block holds %#04x, want %#04x", got, tt.want)
			}
		})
	}
	if _, err := answerData(getSMP(attrPKeyTable, 5, 0, 7), answer(t, "pkeytable-bad-block")); !errors.Is(err, errMADStatus) {
		t.Errorf("a status is not errMADStatus: %v", err)
	}
}

func TestStatusText(t *testing.T) {
	for status, want := range map[uint16]string{
		0x0001: "busy", 0x0002: "redirect required", 0x0004: "bad version", 0x0008: "method not supported",
		0x000c: "method and attribute not supported", 0x001c: "invalid attribute or modifier", 0x0010: "unknown status",
	} {
		if got := statusText(status); !strings.HasPrefix(got, want) {
			t.Errorf("status 0x%04x: %q, want %q", status, got, want)
		}
	}
}

func TestParseAttributes(t *testing.T) {
	data := func(name string, attr uint16, modifier uint32) []byte {
		d, err := answerData(getSMP(attr, modifier, 0, 7), answer(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return d
	}
	tests := []struct {
		name string
		got  nodeInfo
		want nodeInfo
	}{
		{"an HCA's port (H1)", parseNodeInfo(data("nodeinfo-hca", attrNodeInfo, 0)),
			nodeInfo{nodeType: nodeCA, ports: 1, nodeGUID: 0x0002c90300000100, portGUID: 0x0002c90300000101, partitionCap: 64}},
		{"a switch (S1)", parseNodeInfo(data("nodeinfo-switch", attrNodeInfo, 0)),
			nodeInfo{nodeType: nodeSwitch, ports: 8, nodeGUID: 0x0002c90300f00001, portGUID: 0x0002c90300f00001, partitionCap: 8}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
	// smpquery switchinfo: PartEnforceCap 64.
	if got := switchPartitionCap(data("switchinfo", attrSwitchInfo, 0)); got != 64 {
		t.Errorf("S1's PartitionEnforcementCap %d, want 64", got)
	}
	// The switch port facing H1 holds what OpenSM put there for H1.
	got := appendPKeys(nil, data("pkeytable-switch-port2-block0", attrPKeyTable, pkeyModifier(2, 0)))
	if !slices.Equal(got, Table{0x7fff, 0x8064}) {
		t.Errorf("S1 port 2's block 0: %#04x", got)
	}
}

func TestMembership(t *testing.T) {
	tests := []struct {
		table Table
		pkey  uint16
		want  Membership
	}{
		{Table{0x7fff, 0x8064}, 0x64, Full},
		{Table{0x7fff, 0x8064}, 0x8064, Full}, // the membership bit of the asked pkey is ignored
		{Table{0xffff, 0x0064}, 0x64, Limited},
		{Table{0xffff, 0x0064}, 0x7fff, Full},
		{Table{0x0064, 0x8064}, 0x64, Full}, // both entries: the port can use full
		{Table{0x8064, 0x0064}, 0x64, Full},
		{Table{0x7fff, 0x8065}, 0x64, NotMember},
		{nil, 0x64, NotMember},
	}
	for _, tt := range tests {
		if got := tt.table.Membership(tt.pkey); got != tt.want {
			t.Errorf("%#04x holding %#04x: %s, want %s", tt.table, tt.pkey, got, tt.want)
		}
	}
}
