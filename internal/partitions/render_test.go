package partitions

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
)

const defaultPartition = "Default=0x7fff, ipoib : ALL=limited, SELF=full ;"

// flat is the flat partition of the states that have no flat ports.
var flat = FlatPartition{PKey: 0x7ffe}

// render renders s with the built-in template.
func render(s State) ([]byte, error) {
	return BuiltinTemplate().Render(context.Background(), s)
}

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name  string
		state State
	}{
		{"no-networks", State{Revision: 1, DefaultPartition: defaultPartition, Flat: flat}},
		{"check-state", checkState()},
		{
			// Networks and ports in no particular order come out sorted.
			name: "sorted",
			state: State{
				Revision:         123456789,
				DefaultPartition: "Default=0x7fff, ipoib, rate=7, mtu=4 : ALL=limited, SELF=full, 0x0002c90300b00001=full ;",
				Networks: []Network{
					{ID: "ffffffff-0000-4000-8000-000000000002", PKey: fabric.MaxNetworkPKey, Members: []fabric.GUID{0xfa163e00005b7c1d, 0x0002c90300000901}},
					{ID: "00000000-0000-4000-8000-000000000001", PKey: 0x0001, Members: []fabric.GUID{0xf452140300280080, 0x0002c90300001039, 0x01234500006789ab}},
					{ID: "88888888-0000-4000-8000-000000000003", PKey: 0x0bb8},
				},
				// A flat pkey below some networks' still comes last.
				Flat: FlatPartition{PKey: 0x0002, Members: []fabric.GUID{0xfa163e0000000002, 0x0002c90300000a01}},
			},
		},
		{
			// IDs that are not UUIDs still give valid, distinct names.
			name: "odd-ids",
			state: State{
				Revision:         0,
				DefaultPartition: "Default=0x7fff : ALL=limited, SELF=full ; # keep this comment",
				Networks: []Network{
					{ID: "a b:c;d=e,f#g", PKey: 0x0010, Members: []fabric.GUID{1}},
					{ID: "réseau", PKey: 0x0011},
					{ID: "x", PKey: 0x0012, Members: []fabric.GUID{^fabric.GUID(0)}},
				},
				Flat: flat,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(tt.state)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			golden.Compare(t, filepath.Join("testdata", "render", tt.name+".golden"), out)
			if err := Check(out, tt.state); err != nil {
				t.Fatalf("Check(render()): %v\n%s", err, out)
			}
		})
	}
}

// The fixture testdata/check/good/rendered.conf is what Render writes for checkState.
func TestRenderMatchesCheckFixture(t *testing.T) {
	out, err := render(checkState())
	if err != nil {
		t.Fatal(err)
	}
	if want := readFile(t, "testdata/check/good/rendered.conf"); !bytes.Equal(out, want) {
		t.Fatalf("Render:\n%s\nwant:\n%s", out, want)
	}
}

func TestRenderRefuses(t *testing.T) {
	network := func(id string, pkey fabric.PKey, guids ...fabric.GUID) Network {
		return Network{ID: id, PKey: pkey, Members: guids}
	}
	tests := []struct {
		name  string
		state State
		want  string
	}{
		{"empty default", State{}, "default_partition: empty"},
		{"default on two lines", State{DefaultPartition: "Default=0x7fff :\nALL=limited, SELF=full ;"}, "default_partition: must be one line without control characters; found 0x0a at column 17"},
		{"default with a tab", State{DefaultPartition: "Default=0x7fff :\tALL=limited, SELF=full ;"}, "found 0x09"},
		{"default with a carriage return", State{DefaultPartition: defaultPartition + "\r"}, "found 0x0d"},
		{"default not ASCII", State{DefaultPartition: defaultPartition + " # é"}, "default_partition: non-ASCII byte"},
		{"default without ';'", State{DefaultPartition: "Default=0x7fff : ALL=limited, SELF=full"}, `default_partition: statement "Default" has no terminating ';'`},
		{"default of another pkey", State{DefaultPartition: "storage=0x0200 : SELF=full ;"}, "default_partition: must be exactly one statement, for Default=0x7fff"},
		{"default and another statement", State{DefaultPartition: defaultPartition + " storage=0x0200 : SELF=full ;"}, "must be exactly one statement"},
		{"default only a comment", State{DefaultPartition: "# Default=0x7fff : ALL=limited ;"}, "default_partition: no partition statement"},
		{"default shared", State{DefaultPartition: "Default=0x7fff : ALL=full ;"}, "default_partition: ALL=full in the default partition"},
		{"default without SELF", State{DefaultPartition: "Default=0x7fff : ALL=limited ;"}, "default_partition: the default partition has ALL=limited without SELF=full"},
		{"default SELF first", State{DefaultPartition: "Default=0x7fff : SELF=full, ALL=limited ;"}, "default_partition: ALL=limited after SELF=full"},
		{
			"default lists a network's port",
			State{DefaultPartition: "Default=0x7fff : ALL=limited, SELF=full, 0x0002c90300000101=full ;", Networks: []Network{network("a", 0x10, h1)}},
			"default_partition: port 0x0002c90300000101 of network a may be in no other partition",
		},
		{"network pkey 0", State{DefaultPartition: defaultPartition, Flat: flat, Networks: []Network{network("a", 0)}}, "state: network a has pkey 0x0000"},
		{"network pkey 0x7fff", State{DefaultPartition: defaultPartition, Flat: flat, Networks: []Network{network("a", 0x7fff)}}, "state: network a has pkey 0x7fff"},
		{"shared pkey", State{DefaultPartition: defaultPartition, Flat: flat, Networks: []Network{network("a", 0x10), network("b", 0x10)}}, "state: networks a and b share pkey 0x0010"},
		{"port in two networks", State{DefaultPartition: defaultPartition, Flat: flat, Networks: []Network{network("a", 0x10, h1), network("b", 0x11, h2, h1)}}, "state: port 0x0002c90300000101 is in networks a and b"},
		{"no ID", State{DefaultPartition: defaultPartition, Flat: flat, Networks: []Network{network("", 0x10)}}, "state: the network with pkey 0x0010 has no ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(tt.state)
			if err == nil {
				t.Fatalf("Render accepted it:\n%s", out)
			}
			assertProblems(t, err, []string{tt.want})
		})
	}
}

func TestPartitionName(t *testing.T) {
	tests := []struct {
		id   string
		pkey fabric.PKey
		want string
	}{
		{"3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f", 0x64, "net-0064-3f1c5a9e-8d2b-4c7a-9e6"},
		{"3F1C5A9E-8D2B-4C7A-9E61-0A5B7C9D1E2F", 0xffe, "net-0ffe-3F1C5A9E-8D2B-4C7A-9E6"},
		{"short", 0x7ffe, "net-7ffe-short"},
		{"", 1, "net-0001-"},
		{"a b:c;d=e,f#g/h", 2, "net-0002-a_b_c_d_e_f_g_h"},
		{"under_score.dot-dash", 3, "net-0003-under_score.dot-dash"},
		{"réseau", 4, "net-0004-r_seau"},                                         // one '_' per character, not per byte
		{"éééééééééééééééééééééééééé", 5, "net-0005-" + strings.Repeat("_", 22)}, // 31 characters, more bytes
		{"\xff\xfeab", 6, "net-0006-__ab"},
		{strings.Repeat("x", 22), 7, "net-0007-" + strings.Repeat("x", 22)},
		{strings.Repeat("x", 23), 8, "net-0008-" + strings.Repeat("x", 22)},
	}
	for _, tt := range tests {
		got := PartitionName(tt.id, tt.pkey)
		if got != tt.want {
			t.Errorf("PartitionName(%q, %s) = %q, want %q", tt.id, tt.pkey, got, tt.want)
		}
		if reason := checkName(got); reason != "" {
			t.Errorf("PartitionName(%q, %s) = %q: %s", tt.id, tt.pkey, got, reason)
		}
	}
}

// Two networks whose IDs share their first 27 characters (as many as the
// names once kept) get partitions of different names, and the file passes the
// check: both are applicable.
func TestNetworksWithCommonIDPrefixRender(t *testing.T) {
	s := State{Revision: 2, DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
		Networks: []Network{
			{ID: "11111111-aaaa-4aaa-8aaa-000000000001", PKey: 101, Members: []fabric.GUID{0x0002c90300000101}},
			{ID: "11111111-aaaa-4aaa-8aaa-000000000002", PKey: 102, Members: []fabric.GUID{0x0002c90300000201}},
		},
		Flat: FlatPartition{PKey: 0x7ffe}}
	text, err := BuiltinTemplate().Render(context.Background(), s)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if err := Check(text, s); err != nil {
		t.Fatalf("Check: %v\n%s", err, text)
	}
	f, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := f.Statement(101), f.Statement(102); a == nil || b == nil || a.Name == b.Name {
		t.Errorf("statements %+v and %+v: want two partitions of different names", a, b)
	}
}

// Whatever Render writes passes Check against the same state, and Parse reads back
// exactly the state's networks.
func TestRenderPassesCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		s := randomState(rng, rng.IntN(30), rng.IntN(300))
		out, err := render(s)
		if err != nil {
			t.Fatalf("state %d: Render: %v", i, err)
		}
		if err := Check(out, s); err != nil {
			t.Fatalf("state %d: Check(render()): %v\n%s", i, err, out)
		}
		assertFileHoldsNetworks(t, out, s)
	}
}

func assertFileHoldsNetworks(t *testing.T, out []byte, s State) {
	t.Helper()
	f, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(f.Statements), len(s.Networks)+2; got != want {
		t.Fatalf("%d statements, want %d", got, want)
	}
	for _, n := range s.Networks {
		st := f.Statement(n.PKey)
		if st == nil || st.Name != PartitionName(n.ID, n.PKey) || len(st.Members) != len(n.Members) {
			t.Fatalf("network %s: statement %+v", n.ID, st)
		}
	}
	if st := f.Statement(s.Flat.PKey); st == nil || st.Name != FlatPartitionName || len(st.Members) != len(s.Flat.Members) {
		t.Fatalf("flat partition: statement %+v", st)
	}
	if last := f.Statements[len(f.Statements)-1]; last.Name != FlatPartitionName {
		t.Fatalf("last statement %s, want the flat partition", last.Name)
	}
	for i := 1; i < len(f.Statements); i++ {
		prev, st := f.Statements[i-1], f.Statements[i]
		if i >= 2 && i < len(f.Statements)-1 && prev.PKey >= st.PKey {
			t.Fatalf("statement %s (%s) after %s (%s): want pkey order", st.Name, st.PKey, prev.Name, prev.PKey)
		}
		for j := 1; j < len(st.Members); j++ {
			if st.Members[j-1].GUID >= st.Members[j].GUID {
				t.Fatalf("partition %s: %s after %s: want GUID order", st.Name, st.Members[j].GUID, st.Members[j-1].GUID)
			}
		}
	}
}

// randomState spreads ports over networks with distinct random pkeys, IDs and
// GUIDs, and the flat partition.
func randomState(rng *rand.Rand, networks, ports int) State {
	s := State{Revision: rng.Int64(), DefaultPartition: defaultPartition, Flat: flat}
	usedPKey := map[fabric.PKey]bool{flat.PKey: true}
	for len(s.Networks) < networks {
		pkey := fabric.PKey(1 + rng.IntN(int(fabric.MaxNetworkPKey)))
		if usedPKey[pkey] {
			continue
		}
		usedPKey[pkey] = true
		id := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Int64N(1<<48))
		s.Networks = append(s.Networks, Network{ID: id, PKey: pkey})
	}
	if networks == 0 {
		return s
	}
	usedGUID := map[fabric.GUID]bool{}
	for len(usedGUID) < ports {
		g := fabric.GUID(rng.Uint64())
		if g == 0 || usedGUID[g] {
			continue
		}
		usedGUID[g] = true
		// The flat partition gets as many ports as a network, on average.
		if k := rng.IntN(networks + 1); k < networks {
			s.Networks[k].Members = append(s.Networks[k].Members, g)
		} else {
			s.Flat.Members = append(s.Flat.Members, g)
		}
	}
	return s
}

// FuzzRenderCheck builds a state from the fuzzer's bytes (a default partition, the
// flat pkey, the rules, and 3 bytes per port: network or flat, then GUID bits) and
// checks that whatever the built-in template renders, Check accepts.
func FuzzRenderCheck(f *testing.F) {
	f.Add(defaultPartition, uint16(0x7ffe), byte(0), []byte{0, 1, 2, 1, 3, 4, 2, 5, 6, 8, 5, 7})
	f.Add("Default=0x7fff : ALL=limited, SELF=full, 0x0002c90300000101=full ;", uint16(0x7ffe), byte(0), []byte{0, 1, 1})
	f.Add("Default=0x7fff, ipoib, rate=7, mtu=4 : ALL=limited, SELF=full ;", uint16(3), byte(0), []byte{7, 0, 0, 7, 0, 1, 8, 0, 2})
	f.Add("Default=0x7fff : ALL=full ;", uint16(0x7ffe), byte(1), []byte{8, 0, 1})
	f.Add("Default=0x7fff : ALL_VCAS=limited, ALL=limited, SELF=full ;", uint16(0x7ffe), byte(2), []byte{})
	f.Fuzz(func(t *testing.T, defaultLine string, flatPKey uint16, rules byte, ports []byte) {
		s := State{DefaultPartition: defaultLine, Flat: FlatPartition{PKey: fabric.PKey(flatPKey)}}
		s.Rules.SharedDefaultPartition = rules&1 != 0
		if rules&2 != 0 {
			s.Rules.Flavour = fabric.NVIDIA
		}
		for i := 0; i+3 <= len(ports); i += 3 {
			// At most 8 networks on pkeys 1..8, so that ports collide on networks,
			// or the flat partition; GUIDs 0x0002c903000000xx like the simulator's
			// hosts, plus a high byte.
			g := fabric.GUID(0x0002c90300000000 | binary.BigEndian.Uint64([]byte{0, 0, 0, 0, 0, 0, ports[i+1], ports[i+2]}))
			k := int(ports[i] % 9)
			if k == 8 {
				s.Flat.Members = append(s.Flat.Members, g)
				continue
			}
			for len(s.Networks) <= k {
				s.Networks = append(s.Networks, Network{ID: fmt.Sprintf("network-%d", len(s.Networks)), PKey: fabric.PKey(len(s.Networks) + 1)})
			}
			s.Networks[k].Members = append(s.Networks[k].Members, g)
		}
		out, err := render(s)
		if err != nil {
			return
		}
		if err := Check(out, s); err != nil {
			t.Fatalf("Check(render()): %v\n%s", err, out)
		}
	})
}

// BenchmarkRenderCheck renders with the built-in template and checks the largest
// fabric we plan for: 50,000 ports in 4,000 networks and the flat partition.
func BenchmarkRenderCheck(b *testing.B) {
	s := randomState(rand.New(rand.NewPCG(3, 4)), 4000, 50000)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		out, err := render(s)
		if err != nil {
			b.Fatal(err)
		}
		if err := Check(out, s); err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "file-bytes")
}

// The configured rules decide which default partitions the built-in template
// writes, as they decide what Check accepts.
func TestRenderFollowsRules(t *testing.T) {
	tests := []struct {
		name        string
		defaultLine string
		rules       Rules
		want        string // "" when accepted
	}{
		{"shared refused", "Default=0x7fff, ipoib : ALL=full ;", Rules{}, "default_partition: ALL=full in the default partition"},
		{"shared allowed", "Default=0x7fff, ipoib : ALL=full ;", Rules{SharedDefaultPartition: true}, ""},
		{"ALL_VCAS upstream", "Default=0x7fff : ALL_VCAS=limited, ALL=limited, SELF=full ;", Rules{}, "default_partition: ALL_VCAS is not an upstream OpenSM keyword"},
		{"ALL_VCAS on fabric.NVIDIA", "Default=0x7fff : ALL_VCAS=limited, ALL=limited, SELF=full ;", Rules{Flavour: fabric.NVIDIA}, ""},
		{"ALL_VCAS full on fabric.NVIDIA", "Default=0x7fff : ALL_VCAS=full, ALL=limited, SELF=full ;", Rules{Flavour: fabric.NVIDIA}, "default_partition: ALL_VCAS=full in the default partition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := checkState()
			s.DefaultPartition, s.Rules = tt.defaultLine, tt.rules
			out, err := render(s)
			if tt.want != "" {
				assertProblems(t, err, []string{tt.want})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(out, s); err != nil {
				t.Fatalf("Check: %v\n%s", err, out)
			}
			if !bytes.Contains(out, []byte("\n"+tt.defaultLine+"\n")) {
				t.Fatalf("the default partition is not written as is:\n%s", out)
			}
		})
	}
}
