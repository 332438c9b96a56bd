package opensm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The pkey manager's lines that name a pkey give it without its membership
// bit; the others, and a pkey only the node description mentions, give none.
func TestPKeyErrorPKey(t *testing.T) {
	tests := []struct {
		line string
		pkey uint16
		ok   bool
	}{
		{"Nov 29 19:22:59 001500 [8507C6C0] 0x01 -> pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8066 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x0066, true},
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x1005 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x1005, true},
		{"pkey_mgr_update_port: ERR 0503: Failed to obtain P_Key 0x0065 block and index for node 0x0002c90300000200 port 1", 0x0065, true},
		{"pkey_mgr_update_port: ERR 0505: Failed to set PKey 0x8067 in block 0 idx 3 for node 0x0002c90300000200 port 1 (H2)", 0x0067, true},
		{"pkey_mgr_update_port: ERR 0508: Failed to set accum_pkeys PKey 0x8065 in block 0 idx 2 for node 0x0002c90300000100 port 1 (H1)", 0x0065, true},
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0xffff because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x7fff, true},
		// No pkey: a whole block, the PortInfo, an allocation.
		{"pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300000300 port 1 (H3)", 0, false},
		{"pkey_mgr_update_pkey_entry: ERR 0509: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300f00001 port 3 (S1)", 0, false},
		{"pkey_mgr_update_port: ERR 0502: Failed to allocate new pending pkey entry for node 0x0002c90300000100 port 1", 0, false},
		{"pkey_mgr_update_peer_port: ERR 0511: Failed to set PortInfo for node 0x0002c90300f00001 port 2 (S1)", 0, false},
		{"osm_pkey_mgr_process: ERR 0510: osm_prtn_make_partitions() failed", 0, false},
		{"sm_mad_ctrl_send_err_cb: ERR 3119: Set method failed for attribute 0x16 (P_KeyTable)", 0, false},
		// "No pkey" in OpenSM's sense.
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8000 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0, false},
		// A host names itself so that a whole-block error reads as one pkey's:
		// only OpenSM's own text counts.
		{"pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300000300 port 1 (ERR 0512: Failed to set PKey 0x8065 because)", 0, false},
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8066 because Pkey table is full for node 0x0002c90300000100 port 1 (ERR 0512: Failed to set PKey 0x8065 )", 0x0066, true},
	}
	for _, tt := range tests {
		pkey, ok := PKeyErrorPKey(tt.line)
		if pkey != tt.pkey || ok != tt.ok {
			t.Errorf("PKeyErrorPKey(%q) = %#04x, %v; want %#04x, %v", tt.line, pkey, ok, tt.pkey, tt.ok)
		}
	}
}

// Every ERR 0512 line of a real log names the pkey it left out.
func TestPKeyErrorPKeyRealLog(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "pkey-table-full.log"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "ERR 0512") {
			continue
		}
		n++
		if pkey, ok := PKeyErrorPKey(l); !ok || pkey < 0x0140 || pkey > 0x0146 {
			t.Errorf("PKeyErrorPKey(%q) = %#04x, %v; want one of 0x0140..0x0146", l, pkey, ok)
		}
	}
	if n == 0 {
		t.Fatal("the fixture has no ERR 0512 line")
	}
}
