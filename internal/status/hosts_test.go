package status

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The confirmed hosts' part of --status, read from a store and a subnet dump
// in which node04's port renamed itself node02 (testdata/hosts), and, with no
// dump to read, unchecked; the JSON and the text, byte for byte.
func TestStatusHostsGolden(t *testing.T) {
	st := storetest.Open(t, config.EngineSQLite)
	confirmed := []store.ConfirmedHost{
		{GUID: 0x0002c90300000101, Name: "node01", Description: "node01 mlx5_0"},
		{GUID: 0x0002c90300000201, Name: "node02", Description: "node02 mlx5_0"},
		{GUID: 0x0002c90300000301, Name: "node03", Description: "node03 mlx5_0"},
		{GUID: 0x0002c90300000401, Name: "node04", Description: "node04 mlx5_0"},
	}
	var none Status
	if err := readHosts(t.Context(), config.FabricConfig{}, st, &none); err != nil || none.Hosts != nil {
		t.Fatalf("hosts of a fabric without confirmed hosts = %+v, %v; want none", none.Hosts, err)
	}
	if err := st.ConfirmHosts(t.Context(), confirmed); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir string }{
		{"hosts-renamed", filepath.Join("testdata", "hosts")},
		{"hosts-unchecked", t.TempDir()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg config.FabricConfig
			cfg.OpenSM.ConfigDir = tc.dir
			s := Status{Jobs: map[string]int64{"Pending": 0, "Running": 0, "Completed": 0, "Failed": 0},
				NotCompleting: []string{}, Unchecked: []string{}, Adopted: []Adopted{}, ForeignSMs: []ForeignSM{}}
			if err := readHosts(t.Context(), cfg, st, &s); err != nil {
				t.Fatal(err)
			}
			if s.Hosts != nil && s.Hosts.Unchecked != "" {
				s.Hosts.Unchecked = "OpenSM's last sweep cannot be read from this host: (the dump's path)"
			}
			var js, text bytes.Buffer
			if err := WriteJSON(&js, []FabricStatus{{Name: "default", Status: s}}); err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, filepath.Join("testdata", tc.name+".json"), js.Bytes())
			if err := Print(&text, s); err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, filepath.Join("testdata", tc.name+".txt"), text.Bytes())
		})
	}
}

// A node description is the tenant's on that host: a host mismatch's line in
// --status, and a reserved GUID's, print it with every character a terminal
// acts on escaped, so that it cannot hide the lines after it or forge one.
func TestStatusHostLinesEscaped(t *testing.T) {
	hostile := "node02\x1b[8m\u202e\r\njobs complete: every gate is open"
	s := Status{Jobs: map[string]int64{}, Hosts: &Hosts{Names: 4, Ports: 4, Mismatches: []HostMismatch{
		{Kind: "claimed", Host: "node02", GUID: "0x0002c90300000401", Description: hostile, Text: "port 0x0002c90300000401 describes itself as " + hostile}}},
		ReservedHeld: []string{"port p1 of network " + hostile + " holds it"}}
	var text bytes.Buffer
	if err := Print(&text, s); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, c := range []string{"\x1b", "\u202e", "\r"} {
		if strings.Contains(out, c) {
			t.Errorf("--status printed %q raw:\n%s", c, out)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "jobs complete") && i != len(lines)-1 {
			t.Errorf("line %d is a forged %q:\n%s", i+1, l, out)
		}
	}
}
