package opensm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The pkey manager's lines, in the formats of osm_pkey_mgr.c, name where the
// error happened (a line without a node and port cannot be attributed) and,
// some of them, the pkey, given without its membership bit; the other lines,
// and a pkey only the node description mentions, give none. 0 is none.
func TestPKeyErrorPKeyAndPlace(t *testing.T) {
	const h1, h2, h3, s1 = 0x0002c90300000100, 0x0002c90300000200, 0x0002c90300000300, 0x0002c90300f00001
	tests := []struct {
		line string
		pkey uint16
		node uint64
		port int
	}{
		{"Nov 29 19:22:59 001500 [8507C6C0] 0x01 -> pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8066 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x0066, h1, 1},
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8065 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x0065, h1, 1},
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x1005 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x1005, h1, 1},
		{"pkey_mgr_update_port: ERR 0503: Failed to obtain P_Key 0x0065 block and index for node 0x0002c90300000200 port 1", 0x0065, h2, 1},
		{"pkey_mgr_update_port: ERR 0505: Failed to set PKey 0x8067 in block 0 idx 3 for node 0x0002c90300000200 port 1 (H2)", 0x0067, h2, 1},
		{"pkey_mgr_update_port: ERR 0508: Failed to set accum_pkeys PKey 0x8065 in block 0 idx 2 for node 0x0002c90300000100 port 1 (H1)", 0x0065, h1, 1},
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0xffff because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0x7fff, h1, 1},
		// No pkey: a whole block, the PortInfo, an allocation.
		{"pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300000300 port 1 (H3)", 0, h3, 1},
		{"pkey_mgr_update_pkey_entry: ERR 0509: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300f00001 port 3 (S1)", 0, s1, 3},
		{"pkey_mgr_update_port: ERR 0502: Failed to allocate new pending pkey entry for node 0x0002c90300000100 port 1", 0, h1, 1},
		{"pkey_mgr_update_peer_port: ERR 0511: Failed to set PortInfo for node 0x0002c90300f00001 port 2 (S1)", 0, s1, 2},
		// Neither pkey nor place.
		{"osm_pkey_mgr_process: ERR 0510: osm_prtn_make_partitions() failed", 0, 0, 0},
		{"sm_mad_ctrl_send_err_cb: ERR 3119: Set method failed for attribute 0x16 (P_KeyTable)", 0, 0, 0},
		// "No pkey" in OpenSM's sense; node 0 is no node.
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8000 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)", 0, h1, 1},
		{"ERR 0512: Failed to set PKey 0x8065 because Pkey table is full for node 0x0 port 1 (H1)", 0x0065, 0, 0},
		// A host names itself so that a whole-block error reads as one pkey's:
		// only OpenSM's own text counts.
		{"pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300000300 port 1 (ERR 0512: Failed to set PKey 0x8065 because)", 0, h3, 1},
		{"pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8066 because Pkey table is full for node 0x0002c90300000100 port 1 (ERR 0512: Failed to set PKey 0x8065 )", 0x0066, h1, 1},
	}
	for _, tt := range tests {
		if pkey, ok := PKeyErrorPKey(tt.line); pkey != tt.pkey || ok != (tt.pkey != 0) {
			t.Errorf("PKeyErrorPKey(%q) = %#04x, %v; want %#04x, %v", tt.line, pkey, ok, tt.pkey, tt.pkey != 0)
		}
		if node, port, ok := PKeyErrorPlace(tt.line); node != tt.node || port != tt.port || ok != (tt.node != 0) {
			t.Errorf("PKeyErrorPlace(%q) = %#x, %d, %v; want %#x, %d, %v", tt.line, node, port, ok, tt.node, tt.port, tt.node != 0)
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
