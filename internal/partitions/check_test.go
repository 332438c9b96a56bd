package partitions

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Ports of the fabric in the check fixtures: H1 and H2 in network A, H3 in network
// B, network C empty, H4 in no network, H5 in a flat network.
const (
	h1 fabric.GUID = 0x0002c90300000101
	h2 fabric.GUID = 0x0002c90300000201
	h3 fabric.GUID = 0x0002c90300000301
	h4 fabric.GUID = 0x0002c90300000401
	h5 fabric.GUID = 0x0002c90300000501
)

// checkState is the state every file of testdata/check is checked against.
func checkState() State {
	return State{
		Revision:         7,
		DefaultPartition: "Default=0x7fff, ipoib : ALL=limited, SELF=full ;",
		Networks: []Network{
			{ID: "7a2b4c6d-1e3f-4a5b-8c7d-9e0f1a2b3c4d", PKey: 0x0065, Members: []fabric.GUID{h3}},
			{ID: "3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f", PKey: 0x0064, Members: []fabric.GUID{h2, h1}},
			{ID: "c0ffee00-1234-4abc-8def-0123456789ab", PKey: 0x0066},
		},
		Flat: FlatPartition{PKey: 0x7ffe, Members: []fabric.GUID{h5}},
	}
}

// fixtureState is checkState with the rules a fixture asks for on its
// "# rules: " lines: shared-default-partition, nvidia.
func fixtureState(t *testing.T, text []byte) State {
	t.Helper()
	s := checkState()
	for _, line := range strings.Split(string(text), "\n") {
		words, ok := strings.CutPrefix(line, "# rules: ")
		if !ok {
			continue
		}
		for _, w := range strings.Fields(words) {
			switch w {
			case "shared-default-partition":
				s.Rules.SharedDefaultPartition = true
			case "nvidia":
				s.Rules.Flavour = fabric.NVIDIA
			default:
				t.Fatalf("fixture asks for unknown rule %q", w)
			}
		}
	}
	return s
}

func TestCheckGood(t *testing.T) {
	forEachFixture(t, "testdata/check/good/*.conf", func(t *testing.T, _ string, text []byte) {
		if err := Check(text, fixtureState(t, text)); err != nil {
			t.Fatalf("Check: %v", err)
		}
	})
}

func TestCheckBad(t *testing.T) {
	forEachFixture(t, "testdata/check/bad/*.conf", func(t *testing.T, path string, text []byte) {
		s := fixtureState(t, text)
		if _, err := ParseFor(text, s.Rules.Flavour); err != nil && !strings.HasPrefix(filepath.Base(path), "parse-error") {
			t.Fatalf("fixture should fail Check's rules, not Parse: %v", err)
		}
		err := Check(text, s)
		if err == nil {
			t.Fatal("Check accepted it")
		}
		assertProblems(t, err, wantedProblems(t, text))
	})
}

// The same file passes or fails depending on the state it is checked against.
func TestCheckFollowsState(t *testing.T) {
	text := readFile(t, "testdata/check/good/rendered.conf")
	tests := []struct {
		name  string
		edit  func(*State)
		wants []string
	}{
		{
			name:  "a port joined network A",
			edit:  func(s *State) { s.Networks[1].Members = append(s.Networks[1].Members, h4) },
			wants: []string{"line 3: port 0x0002c90300000401 of network 3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f is missing"},
		},
		{
			name: "a port moved from A to B",
			edit: func(s *State) {
				s.Networks[1].Members = []fabric.GUID{h1}
				s.Networks[0].Members = []fabric.GUID{h3, h2}
			},
			wants: []string{"line 5: port 0x0002c90300000201 of network 7a2b4c6d-1e3f-4a5b-8c7d-9e0f1a2b3c4d may be in no other partition", "line 6: port 0x0002c90300000201 of network 7a2b4c6d-1e3f-4a5b-8c7d-9e0f1a2b3c4d is missing"},
		},
		{
			name:  "a network was added",
			edit:  func(s *State) { s.Networks = append(s.Networks, Network{ID: "d", PKey: 0x0067}) },
			wants: []string{"network d has no partition statement for pkey 0x0067"},
		},
		{
			name:  "network C was deleted: its statement is a static partition now",
			edit:  func(s *State) { s.Networks = s.Networks[:2] },
			wants: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := checkState()
			tt.edit(&s)
			err := Check(text, s)
			if tt.wants == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			assertProblems(t, err, tt.wants)
		})
	}
}

// A state that no file can satisfy is reported as such, not as file problems.
func TestCheckInconsistentState(t *testing.T) {
	text := readFile(t, "testdata/check/good/rendered.conf")
	tests := []struct {
		name string
		edit func(*State)
		want string
	}{
		{"shared pkey", func(s *State) { s.Networks[2].PKey = 0x0064 }, "state: networks 3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f and c0ffee00-1234-4abc-8def-0123456789ab share pkey 0x0064"},
		{"pkey zero", func(s *State) { s.Networks[2].PKey = 0 }, "state: network c0ffee00-1234-4abc-8def-0123456789ab has pkey 0x0000, outside 0x0001-0x7ffe"},
		{"default pkey", func(s *State) { s.Networks[2].PKey = fabric.DefaultPKey }, "has pkey 0x7fff, outside"},
		{"full-member bit", func(s *State) { s.Networks[2].PKey = 0x8066 }, "has pkey 0x8066, outside"},
		{"port in two networks", func(s *State) { s.Networks[2].Members = []fabric.GUID{h1} }, "state: port 0x0002c90300000101 is in networks 3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f and c0ffee00-1234-4abc-8def-0123456789ab"},
		{"port twice in a network", func(s *State) { s.Networks[0].Members = []fabric.GUID{h3, h3} }, "state: network 7a2b4c6d-1e3f-4a5b-8c7d-9e0f1a2b3c4d lists port 0x0002c90300000301 twice"},
		{"GUID zero", func(s *State) { s.Networks[2].Members = []fabric.GUID{0} }, "state: network c0ffee00-1234-4abc-8def-0123456789ab has a port with GUID 0"},
		{"no flat pkey", func(s *State) { s.Flat.PKey = 0 }, "state: the flat partition has no pkey ([opensm] flat_pkey)"},
		{"flat pkey 0x7fff", func(s *State) { s.Flat.PKey = fabric.DefaultPKey }, "state: the flat partition has pkey 0x7fff, outside 0x0001-0x7ffe"},
		{"flat pkey is a network's", func(s *State) { s.Flat.PKey = 0x0065 }, "state: network 7a2b4c6d-1e3f-4a5b-8c7d-9e0f1a2b3c4d has the flat partition's pkey 0x0065"},
		{"port in a network and flat", func(s *State) { s.Flat.Members = append(s.Flat.Members, h1) }, "state: port 0x0002c90300000101 is in network 3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f and in the flat partition"},
		{"flat port twice", func(s *State) { s.Flat.Members = append(s.Flat.Members, h5) }, "state: the flat partition lists port 0x0002c90300000501 twice"},
		{"flat GUID zero", func(s *State) { s.Flat.Members = []fabric.GUID{0} }, "state: the flat partition has a port with GUID 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := checkState()
			tt.edit(&s)
			assertProblems(t, Check(text, s), []string{tt.want})
			if out, err := render(s); err == nil {
				t.Fatalf("Render accepted the state:\n%s", out)
			} else {
				assertProblems(t, err, []string{tt.want})
			}
		})
	}
}
