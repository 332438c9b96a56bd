package topology

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

func load(t *testing.T, name string) *Topology {
	t.Helper()
	top, err := Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return top
}

// wantSwitches fails the test unless top's switches are want, in order.
func wantSwitches(t *testing.T, top *Topology, want ...Switch) {
	t.Helper()
	if got := top.Switches(); !slices.Equal(got, want) {
		t.Errorf("Switches() = %+v, want %+v", got, want)
	}
}

// The real dump of the simulated fabric: its topology file put H1, H3, H5 and
// the SM's HCA on S1 and H2, H4 on S2, in that order of ports.
func TestRealDump(t *testing.T) {
	top := load(t, "good/ibsim-5-hosts-2-switches.lst")
	wantSwitches(t, top,
		Switch{GUID: 0x0002c90300f00001, Description: "S1", Ports: 8},
		Switch{GUID: 0x0002c90300f00002, Description: "S2", Ports: 8})
	hosts := []struct {
		guid fabric.GUID
		at   SwitchPort
	}{
		{0x0002c90300000101, SwitchPort{0x0002c90300f00001, 2}}, // H1
		{0x0002c90300000201, SwitchPort{0x0002c90300f00002, 1}}, // H2
		{0x0002c90300000301, SwitchPort{0x0002c90300f00001, 3}}, // H3
		{0x0002c90300000401, SwitchPort{0x0002c90300f00002, 2}}, // H4
		{0x0002c90300000501, SwitchPort{0x0002c90300f00001, 4}}, // H5
		{0x0002c90300a00001, SwitchPort{0x0002c90300f00001, 1}}, // SM
	}
	var wantHosts []fabric.GUID
	for _, h := range hosts {
		sw, port, ok := top.HostPort(h.guid)
		if !ok || (SwitchPort{sw, port}) != h.at {
			t.Errorf("HostPort(%s) = %s:%d, %v; want %s", h.guid, sw, port, ok, h.at)
		}
		wantHosts = append(wantHosts, h.guid)
	}
	if got := top.HostPorts(); !slices.Equal(got, wantHosts) {
		t.Errorf("HostPorts() = %v, want %v", got, wantHosts)
	}
	// LIDs, as guid2lid has them: host ports by port GUID, switches by node
	// GUID; a node GUID of an HCA is no port.
	for guid, want := range map[fabric.GUID]uint16{0x0002c90300a00001: 1, 0x0002c90300f00001: 2,
		0x0002c90300000101: 3, 0x0002c90300000201: 4, 0x0002c90300000501: 7, 0x0002c90300f00002: 8} {
		if lid, ok := top.LID(guid); !ok || lid != want {
			t.Errorf("LID(%s) = %d, %v; want %d", guid, lid, ok, want)
		}
	}
	if lid, ok := top.LID(0x0002c90300000100); ok {
		t.Errorf("LID(H1's node GUID) = %d, want not found", lid)
	}
	// A switch is not a host port, nor is a GUID the fabric does not have.
	for _, g := range []fabric.GUID{0x0002c90300f00001, 0x0002c90300000100, 0x0002c90300000601} {
		if sw, port, ok := top.HostPort(g); ok {
			t.Errorf("HostPort(%s) = %s:%d, want not found", g, sw, port)
		}
	}
}

func TestEdgeCases(t *testing.T) {
	top := load(t, "good/edge-cases.lst")
	wantSwitches(t, top,
		Switch{GUID: 0x248a0703009a0b0c, Description: "MF0;leaf-01:MQM8700/U1", Ports: 40},
		Switch{GUID: 0x248a0703009a0b0d, Description: "", Ports: 40})
	// Port 2 of a two-port HCA whose description holds braces, on port 40.
	if sw, port, ok := top.HostPort(0x0002c90300000102); !ok || sw != 0x248a0703009a0b0c || port != 40 {
		t.Errorf("HostPort(h1 port 2) = %s:%d, %v; want 0x248a0703009a0b0c:40", sw, port, ok)
	}
	// Routers, unknown node types and hosts linked back to back are no host
	// port behind a switch.
	if got, want := top.HostPorts(), []fabric.GUID{0x0002c90300000102}; !slices.Equal(got, want) {
		t.Errorf("HostPorts() = %v, want %v", got, want)
	}
}

func TestBadDumps(t *testing.T) {
	tests := []struct {
		file    string
		wantErr string
	}{
		{"empty.lst", "empty: no link"},
		{"cut-short.lst", "line 4: not terminated by a newline"},
		{"not-a-link.lst", "line 2: not a link as OpenSM writes it"},
		{"trailing-text.lst", "line 2: not a link as OpenSM writes it"},
		{"switch-ports-disagree.lst", "line 7: switch 0x0002c90300f00001 is \"S1\" with 16 ports, but line 1 says \"S1\" with 8 ports"},
		{"host-behind-two-ports.lst", "line 3: host port 0x0002c90300000101 (\"H1\") is behind switch port 0x0002c90300f00001:5, but line 2 puts it behind 0x0002c90300f00001:2"},
		{"port-beyond-switch.lst", "line 2: SW 0x0002c90300f00001 \"S1\": port 9 outside its ports 1 to 8"},
		{"zero-guid.lst", "line 2: CA \"H1\": zero GUID"},
		{"lid-disagrees.lst", "line 4: SW 0x0002c90300f00002 \"S2\" has LID 9, but an earlier line gives it LID 8"},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "bad", "*.lst"))
	if err != nil || len(files) != len(tests) {
		t.Fatalf("testdata/bad holds %d files, the table %d (%v)", len(files), len(tests), err)
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "bad", tt.file)
			top, err := Load(path)
			if err == nil {
				t.Fatalf("Load accepted it: %+v", top.Switches())
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q, want the path and %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), FileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v, want a not-exist error", err)
	}
}

// TestDumpNeverReadThroughALink: OpenSM's user owns dump_files_dir and could
// put there, as the dump, a link to a file only the manager may read; neither
// Load nor a Dump reads it, and the error quotes none of it.
func TestDumpNeverReadThroughALink(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "afm.conf")
	if err := os.WriteFile(secret, []byte("token = s3cret-token-never-quoted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Load through a link: %v, want ELOOP without the file's text", err)
	}
	_, err = NewDump(path).Load()
	if err == nil || strings.Contains(err.Error(), "s3cret") || !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Dump.Load through a link: %v, want ELOOP without the file's text", err)
	}
}
