package pkeyread

import (
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// TestGetDRSMP: a directed-route SubnGet (IBA 14.2.2) as ibsim and the
// kernel's SMI take one: class 0x81, hop pointer 0 and the hop count in the
// second word, both directed-route LIDs permissive, InitialPath[1..] the
// route (byte 0 no hop), the rest as a LID-routed Get.
func TestGetDRSMP(t *testing.T) {
	mad := getDRSMP(attrNodeInfo, 0, 0x0102030405060708, 0xa1b2c3d4, NewDRPath("\x01\x08\x08\x02"))
	want := getSMP(attrNodeInfo, 0, 0x0102030405060708, 0xa1b2c3d4)
	want[1] = 0x81
	want[7] = 4                                     // hop count; hop pointer (byte 6) 0
	copy(want[32:], []byte{0xff, 0xff, 0xff, 0xff}) // DrSLID, DrDLID
	copy(want[128:], []byte{0, 1, 8, 8, 2})         // InitialPath
	if !slices.Equal(mad, want) {
		t.Errorf("getDRSMP:\n%s\nwant\n%s", hex.Dump(mad), hex.Dump(want))
	}
	if got := NewDRPath("\x01\x08\x08\x02").String(); got != "0,1,8,8,2" {
		t.Errorf("String() = %s, want 0,1,8,8,2", got)
	}
	if p := NewDRPath(strings.Repeat("\x08", 64)); p.Known() {
		t.Errorf("a route of 64 hops is known: %s (InitialPath holds 63)", p)
	}
	if p := NewDRPath(strings.Repeat("\x08", 63)); !p.Known() {
		t.Error("a route of 63 hops is not known")
	}
}

// TestAnswerDataDirectedRoute: a directed-route answer (its D bit set in the
// status word) is the answer to a directed-route request, not to a
// LID-routed one, and the D bit is no error status.
func TestAnswerDataDirectedRoute(t *testing.T) {
	req := getDRSMP(attrPKeyTable, 0, 0, 7, NewDRPath("\x01\x02"))
	answer := slices.Clone(answer(t, "pkeytable-hca-block0"))
	answer[1] = 0x81
	binary.BigEndian.PutUint16(answer[offStatus:], 0x8000) // D: the way back
	if data, err := answerData(req, answer); err != nil || !slices.Equal(appendPKeys(nil, data), Table{0x7fff, 0x8064}) {
		t.Errorf("directed-route answer: %#04x, %v", appendPKeys(nil, data), err)
	}
	if _, err := answerData(getSMP(attrPKeyTable, 0, 0, 7), answer); err == nil || !strings.Contains(err.Error(), "want a SubnGetResp of class 0x01") {
		t.Errorf("a directed-route answer to a LID-routed request: %v", err)
	}
}
