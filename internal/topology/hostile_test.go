package topology

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
)

// A bare-metal tenant has root on its host and sets the host's node
// description to whatever it likes; OpenSM writes it into the subnet dump
// between braces, unquoted. These tests put the dump's own tokens into a
// host's description and check that the dump reads exactly as with a harmless
// one: the same switches (GUIDs, descriptions, ports), the same switch port
// behind every host port, the same port GUIDs. So no description can add or
// hide a switch for the expected-switch gate and --confirm-switches, move a
// host port to another switch port for the capacity check and the pkey
// errors' attribution, or make a GUID a switch's.

// hostileDescriptions hold what the dump is made of: its braces, its fields
// and their separators, another node's GUIDs, a switch's description, the end
// of one end and the start of the next, a whole link line.
var hostileDescriptions = []string{
	"",
	"}", "{", "} {", "{}", "}{", "{H1}", "{S1}",
	strings.Repeat("}", 63), strings.Repeat("{", 63), strings.Repeat("} { ", 16),
	"S1", "S2", "SW", "SW-SM", "Switch", "switch 0x0002c90300f00002", `"S2"`, `'S2'`, `\"}`,
	"node_guid 0x0002c90300f00002 port_guid 0x0002c90300f00002",
	"NodeGUID:0002c90300f00002 PortGUID:0002c90300f00002",
	"PortGUID:0002c90300000201",
	"H1} LID:0003 PN:01 }",
	"H1} LID:0003 PN:01 } { SW Ports:08 SystemGUID:0002c90300f00002",
	"} LID:0003 PN:01 } { SW Ports:08 SystemGUID:0002c90300f00002 N",
	"x} LID:0008 PN:07 } PHY=4x LOG=ACT SPD=10",
	"} LID:0002 PN:07 } PHY=4x LOG=ACT SPD=10\n",
	"PN:07 } PHY=4x LOG=ACT SPD=10",
	"DevID:0000 Rev:000000A1 {S2} LID:0008 PN:07 } { CA Ports:01 S",
	"Rev:000000A1 {S2} LID:0008 PN:07 }",
	"{ SW Ports:08 SystemGUID:0002c90300f00002 NodeGUID:0002c90300f00002",
	// A whole link line, which OpenSM cuts to 63 bytes.
	"{ CA Ports:01 SystemGUID:0002c90300000100 NodeGUID:0002c90300000100 PortGUID:0002c90300000101 " +
		"VenID:000000 DevID:0000 Rev:000000A1 {H1} LID:0003 PN:01 } { SW Ports:08 SystemGUID:0002c90300f00002 " +
		"NodeGUID:0002c90300f00002 PortGUID:0002c90300f00002 VenID:00000000 DevID:0000 Rev:000000A1 {S2} " +
		"LID:0008 PN:07 } PHY=4x LOG=ACT SPD=10",
	"H1\n{ CA Ports:01 SystemGUID:0002c90300000900 NodeGUID:0002c90300000900 P",
	"H1\r\x00} { SW",
	"\x1b[2J\x7f\xff\xfe}",
	"PHY=4x LOG=ACT SPD=10",
	" LID:0002 PN:07 ",
}

// describedDump is the dump in testdata/<name> with the descriptions of the
// nodes named in descs (by their description in the file, as "{H1}") replaced.
func describedDump(t testing.TB, name string, descs map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for was, now := range descs {
		if !strings.Contains(string(data), "{"+was+"}") {
			t.Fatalf("%s has no node described %q", name, was)
		}
		pairs = append(pairs, "{"+was+"}", "{"+now+"}")
	}
	// In one pass: a new description is never replaced in turn.
	return strings.NewReplacer(pairs...).Replace(string(data))
}

// sameTopology says how b differs from a; "" when it does not. Host ports'
// descriptions are not part of a Topology, so only what the manager reads is
// compared.
func sameTopology(a, b *Topology) string {
	switch {
	case !maps.Equal(a.switches, b.switches):
		return fmt.Sprintf("switches %+v, want %+v", b.Switches(), a.Switches())
	case !maps.Equal(a.behind, b.behind):
		return fmt.Sprintf("host ports behind switch ports %v, want %v", b.behind, a.behind)
	case !maps.Equal(a.portOf, b.portOf):
		return fmt.Sprintf("port GUIDs %v, want %v", b.portOf, a.portOf)
	case !maps.Equal(a.lids, b.lids):
		return fmt.Sprintf("LIDs %v, want %v", b.lids, a.lids)
	}
	return ""
}

// hostileCases are the dumps and the hosts whose descriptions a tenant sets:
// on the real dump a host behind a switch (its link listed from both ends);
// on the hand-made one a host with braces in its description behind a
// switch, and two hosts linked back to back, both descriptions hostile on one
// line.
var hostileCases = []struct {
	file  string
	hosts [2]string // the descriptions in the file the two fuzzed ones replace
}{
	{"good/ibsim-5-hosts-2-switches.lst", [2]string{"H1", "H2"}},
	{"good/edge-cases.lst", [2]string{"back to back", "sm"}},
	{"good/edge-cases.lst", [2]string{"h1 mlx5_0 {port 2}", "odd"}},
}

// checkDescribed parses each case's dump with the two descriptions put in
// and compares it with the unmodified dump's topology.
func checkDescribed(t *testing.T, want map[string]*Topology, d1, d2 string) {
	t.Helper()
	for _, c := range hostileCases {
		dump := describedDump(t, c.file, map[string]string{c.hosts[0]: d1, c.hosts[1]: d2})
		got, err := Parse(strings.NewReader(dump))
		if err != nil {
			t.Errorf("%s, %q described %q and %q %q: %v", c.file, c.hosts[0], d1, c.hosts[1], d2, err)
			continue
		}
		if diff := sameTopology(want[c.file], got); diff != "" {
			t.Errorf("%s, %q described %q and %q %q: %s", c.file, c.hosts[0], d1, c.hosts[1], d2, diff)
		}
	}
}

func unmodified(t testing.TB) map[string]*Topology {
	t.Helper()
	want := map[string]*Topology{}
	for _, c := range hostileCases {
		top, err := Load(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		want[c.file] = top
	}
	return want
}

func TestHostileNodeDescriptions(t *testing.T) {
	want := unmodified(t)
	for _, raw := range hostileDescriptions {
		desc := fabricsim.CleanNodeDescription([]byte(raw))
		t.Run(desc, func(t *testing.T) {
			checkDescribed(t, want, desc, "harmless")
			checkDescribed(t, want, "harmless", desc)
			checkDescribed(t, want, desc, desc)
		})
	}
}

// FuzzDumpNodeDescription: no pair of descriptions, cleaned as OpenSM cleans
// them, changes what the dump says about any node or link.
func FuzzDumpNodeDescription(f *testing.F) {
	for _, d := range hostileDescriptions {
		f.Add([]byte(d), []byte("harmless"))
		f.Add([]byte("harmless"), []byte(d))
	}
	want := unmodified(f)
	f.Fuzz(func(t *testing.T, raw1, raw2 []byte) {
		checkDescribed(t, want, fabricsim.CleanNodeDescription(raw1), fabricsim.CleanNodeDescription(raw2))
	})
}

// A description that holds a whole middle of a link line, the first end's
// LID and PN and a second end's fields, makes the line read two ways. OpenSM
// never writes a node's own description that long; a node_name_map name can
// be. Such a line is refused, not read as a switch that is not there; a long
// name that is not a middle reads as any other.
func TestLongDescriptionReadsOneWayOrIsRefused(t *testing.T) {
	middle := "} LID:0003 PN:01 } { SW Ports:08 SystemGUID:0002c90300f000ff NodeGUID:0002c90300f000ff " +
		"PortGUID:0002c90300f000ff VenID:00000000 DevID:0000 Rev:000000A1 {"
	want := unmodified(t)
	tests := []struct {
		file, host, desc string
		wantErr          string // "": reads as the unmodified dump
	}{
		// On a line of its own, a host linked back to back would be behind a
		// switch that does not exist.
		{"good/edge-cases.lst", "back to back", "x" + middle + "fake", "line 4: reads two ways"},
		// In the second end's, the first end's description could end there.
		{"good/edge-cases.lst", "sm", "x" + middle + "fake", "line 4: reads two ways"},
		{"good/ibsim-5-hosts-2-switches.lst", "H1", "x" + middle + "fake", "line 2: reads two ways"},
		{"good/ibsim-5-hosts-2-switches.lst", "H1", strings.Repeat("rack 4 {row 2} } { SW ", 12), ""},
		{"good/edge-cases.lst", "back to back", strings.Repeat("} LID:0003 PN:01 } { SW ", 10), ""},
	}
	for _, tt := range tests {
		dump := describedDump(t, tt.file, map[string]string{tt.host: tt.desc})
		got, err := Parse(strings.NewReader(dump))
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s, %q described %q: %v", tt.file, tt.host, tt.desc, err)
		case tt.wantErr == "":
			if diff := sameTopology(want[tt.file], got); diff != "" {
				t.Errorf("%s, %q described %q: %s", tt.file, tt.host, tt.desc, diff)
			}
		case err == nil:
			t.Errorf("%s, %q described %q: read as switches %+v, host ports %v; want an error %q",
				tt.file, tt.host, tt.desc, got.Switches(), got.behind, tt.wantErr)
		case !strings.Contains(err.Error(), tt.wantErr):
			t.Errorf("%s, %q described %q: error %v, want %q", tt.file, tt.host, tt.desc, err, tt.wantErr)
		}
	}
}
