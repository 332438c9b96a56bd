package fabricsim

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestGUIDScheme(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{SMGUID.String(), "0x0002c90300a00001"},
		{HostGUID(1).String(), "0x0002c90300000101"},
		{HostGUID(16).String(), "0x0002c90300001001"},
		{SwitchGUID(1).String(), "0x0002c90300f00001"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %s, want %s", tt.got, tt.want)
		}
	}
}

func TestTopologyGolden(t *testing.T) {
	net, _, err := topology(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "net-3-hosts-2-switches"))
	if err != nil {
		t.Fatal(err)
	}
	if net != string(want) {
		t.Errorf("topology differs from testdata:\n%s", net)
	}
}

// A node of a topology file ("Hca 1 "H1"", "Switch 8 "S1"") is followed by its
// cabling lines ("[port] "peer"[peer port]").
var (
	nodeLine = regexp.MustCompile(`^(Hca|Switch) (\d+) "(\w+)"$`)
	linkLine = regexp.MustCompile(`^\[(\d+)\] "(\w+)"\[(\d+)\]`)
)

// Every cable appears at both ends, no port is used twice, every host is
// where the Host list says.
func TestTopologyIsConsistent(t *testing.T) {
	for _, size := range [][2]int{{1, 1}, {4, 1}, {5, 2}, {21, 2}, {7, 3}, {2, 4}, {100, 5}} {
		nHosts, nSwitches := size[0], size[1]
		t.Run(fmt.Sprintf("%d hosts %d switches", nHosts, nSwitches), func(t *testing.T) {
			net, hosts, err := topology(nHosts, nSwitches)
			if err != nil {
				t.Fatal(err)
			}
			type end struct {
				node string
				port int
			}
			peer := map[end]end{}
			ports := map[string]int{}
			var node string
			for _, line := range strings.Split(net, "\n") {
				if m := nodeLine.FindStringSubmatch(line); m != nil {
					node = m[3]
					ports[node], _ = strconv.Atoi(m[2])
					continue
				}
				m := linkLine.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				p, _ := strconv.Atoi(m[1])
				pp, _ := strconv.Atoi(m[3])
				here := end{node, p}
				if _, dup := peer[here]; dup {
					t.Errorf("%s port %d cabled twice", node, p)
				}
				if p < 1 || p > ports[node] {
					t.Errorf("%s has %d ports, cable on port %d", node, ports[node], p)
				}
				peer[here] = end{m[2], pp}
			}
			for a, b := range peer {
				if back, ok := peer[b]; !ok || back != a {
					t.Errorf("cable %v -> %v has no matching line at %v", a, b, b)
				}
			}
			if len(hosts) != nHosts {
				t.Fatalf("%d hosts listed, want %d", len(hosts), nHosts)
			}
			for i, h := range hosts {
				if h.PortGUID != HostGUID(i+1) || h.Name != fmt.Sprintf("H%d", i+1) {
					t.Errorf("host %d: %+v", i+1, h)
				}
				if got := peer[end{h.Switch, h.SwitchPort}]; got != (end{h.Name, 1}) {
					t.Errorf("%s port %d leads to %v, want %s port 1", h.Switch, h.SwitchPort, got, h.Name)
				}
				if k, _ := strconv.Atoi(strings.TrimPrefix(h.Switch, "S")); h.SwitchGUID != SwitchGUID(k) {
					t.Errorf("%s: switch GUID %s", h.Name, h.SwitchGUID)
				}
			}
			if got := peer[end{"SM", 1}]; got != (end{"S1", 1}) {
				t.Errorf("SM port 1 leads to %v, want S1 port 1", got)
			}
		})
	}
}

func TestTopologyRejects(t *testing.T) {
	for _, size := range [][2]int{{0, 1}, {1, 0}, {300, 1}} {
		if _, _, err := topology(size[0], size[1]); err == nil {
			t.Errorf("topology(%d, %d): no error", size[0], size[1])
		}
	}
}

// A host's description is written in ibsim's syntax; one ibsim would cut or
// misread is refused.
func TestDescribeHosts(t *testing.T) {
	net, _, err := topology(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := describeHosts(net, map[string]string{"H2": "Clearing Enforcement bit"})
	if err != nil || !strings.Contains(got, "Hca 1 \"H2\" # \"Clearing Enforcement bit\"\n") || !strings.Contains(got, "Hca 1 \"H1\"\n") {
		t.Fatalf("describeHosts: %v\n%s", err, got)
	}
	for _, bad := range []map[string]string{
		{"H2": strings.Repeat("x", 64)},
		{"H2": "a \"quote\""},
		{"H2": "a\nnewline"},
		{"H9": "no such host"},
	} {
		if _, err := describeHosts(net, bad); err == nil {
			t.Errorf("describeHosts(%q): no error", bad)
		}
	}
}
