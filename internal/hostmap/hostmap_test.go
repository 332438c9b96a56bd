package hostmap

import (
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The confirmed map of every case: node01 with two ports, node02, node04.
var confirmed = New([]store.ConfirmedHost{
	{GUID: 0x101, Name: "node01", Description: "node01 mlx5_0"},
	{GUID: 0x102, Name: "node01", Description: "node01 mlx5_1"},
	{GUID: 0x201, Name: "node02", Description: "node02 mlx5_0"},
	{GUID: 0x401, Name: "node04", Description: "node04 mlx5_0"},
})

func live(ports ...topology.NamedPort) []topology.NamedPort { return ports }

func port(guid fabric.GUID, desc string) topology.NamedPort {
	return topology.NamedPort{GUID: guid, Name: topology.HostName(desc), Description: desc}
}

// asConfirmed is the sweep that agrees with the map.
var asConfirmed = live(port(0x101, "node01 mlx5_0"), port(0x102, "node01 mlx5_1"), port(0x201, "node02 mlx5_0"),
	port(0x401, "node04 mlx5_0"), port(0x501, "node05 mlx5_0"))

func TestPorts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  []fabric.GUID
		err   string
	}{
		{"one host, its two ports", []string{"node01"}, []fabric.GUID{0x101, 0x102}, ""},
		{"two hosts, in order", []string{"node04", "node02"}, []fabric.GUID{0x401, 0x201}, ""},
		{"a host not confirmed", []string{"node02", "node05"}, nil, "host node05 is not confirmed"},
		{"several not confirmed", []string{"node07", "node05"}, nil, "hosts node07, node05 are not confirmed"},
		{"a description's whole text is no name", []string{"node01 mlx5_0"}, nil, "not confirmed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := confirmed.Ports(tc.names)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Ports(%q) = %v, %v; want an error saying %q", tc.names, got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Ports(%q) = %v, %v; want %v", tc.names, got, err, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	// node04's port renamed itself node02: node04 is renamed, node02 claimed.
	hostile := live(port(0x101, "node01 mlx5_0"), port(0x201, "node02 mlx5_0"), port(0x401, "node02 mlx5_0"))
	for _, tc := range []struct {
		name  string
		live  []topology.NamedPort
		names []string
		err   []string // parts of the error; none: accepted
	}{
		{"the sweep agrees", asConfirmed, []string{"node01", "node02", "node04"}, nil},
		{"a confirmed port's link down is no mismatch", live(port(0x101, "node01 mlx5_0")), []string{"node01", "node02"}, nil},
		{"a renamed host's name is refused", hostile, []string{"node04"},
			[]string{`host node04: its port 0x0000000000000401 now describes itself as "node02 mlx5_0" (confirmed as "node04 mlx5_0")`}},
		{"the name it claims is refused", hostile, []string{"node01", "node02"},
			[]string{`host node02: port 0x0000000000000401, not confirmed as node02's, describes itself as "node02 mlx5_0"`}},
		{"hosts it does not touch are not", hostile, []string{"node01"}, nil},
		{"a new port claiming a confirmed name", live(port(0x901, "node01 evil")), []string{"node01"},
			[]string{"host node01: port 0x0000000000000901, not confirmed as node01's"}},
		{"a confirmed port renamed to a name no one has", live(port(0x102, "x mlx5_1")), []string{"node01"},
			[]string{`host node01: its port 0x0000000000000102 now describes itself as "x mlx5_1"`}},
		{"a description with a control character is quoted", live(port(0x201, "node02\x1b[2J")), []string{"node02"},
			[]string{`"node02\x1b[2J"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := confirmed.Check(tc.names, tc.live)
			if len(tc.err) == 0 {
				if err != nil {
					t.Fatalf("Check(%q) = %v; want none", tc.names, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check(%q) accepted; want an error saying %q", tc.names, tc.err)
			}
			for _, want := range tc.err {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Check(%q) = %v; want it to say %q", tc.names, err, want)
				}
			}
		})
	}
}

// Mismatches lists every disagreement once, by host then GUID.
func TestMismatches(t *testing.T) {
	got := confirmed.Mismatches(live(port(0x401, "node02 mlx5_0"), port(0x201, "node02 mlx5_0"), port(0x901, "node01 x")))
	var text []string
	for _, m := range got {
		text = append(text, string(m.Kind)+" "+m.Host+" "+m.GUID.String())
	}
	want := []string{"claimed node01 0x0000000000000901", "claimed node02 0x0000000000000401", "renamed node04 0x0000000000000401"}
	if !slices.Equal(text, want) {
		t.Errorf("Mismatches = %q; want %q", text, want)
	}
	if got := confirmed.Mismatches(asConfirmed); len(got) != 0 {
		t.Errorf("Mismatches of the sweep as confirmed = %v; want none", got)
	}
}
