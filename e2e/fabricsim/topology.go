package fabricsim

import (
	"fmt"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// SMGUID is the port GUID of the HCA named "SM", where the SM runs.
const SMGUID fabric.GUID = 0x0002c90300a00001

// ExtraSMGUID is the port GUID of the HCA named "SM<k>" (k from 2), an SM
// HCA of its own for each further manager's OpenSM (Options.SMs).
func ExtraSMGUID(k int) fabric.GUID { return SMGUID + fabric.GUID(uint64(k-1)*0x10000) }

// SMName is the name of the k-th SM HCA (1: "SM", its SIM_HOST).
func SMName(k int) string {
	if k == 1 {
		return "SM"
	}
	return fmt.Sprintf("SM%d", k)
}

// HostGUID is the port GUID of host H<i> (H1 = 0x0002c90300000101). Its node
// GUID is one less: ibsim numbers ports from the node GUID.
func HostGUID(i int) fabric.GUID { return fabric.GUID(0x0002c90300000001 + uint64(i)*0x100) }

// SwitchGUID is the node GUID (and port 0 GUID) of switch S<k>.
func SwitchGUID(k int) fabric.GUID { return fabric.GUID(0x0002c90300f00000 + uint64(k)) }

// Host is a host HCA of the fabric and the switch port it is cabled to.
type Host struct {
	Name       string      // "H1"
	PortGUID   fabric.GUID // port 1 of the HCA
	Switch     string      // "S1"
	SwitchPort int         // the switch port facing the host
	SwitchGUID fabric.GUID
}

// maxSwitchPorts is the largest port count a switch in the topology file may
// have (port numbers are one byte in the management datagrams).
const maxSwitchPorts = 254

// topology returns the ibsim topology file for nHosts hosts and nSwitches
// switches, and the hosts it contains. The SM's HCA hangs off S1 port 1; hosts
// take the next free port of their switch, round-robin over the switches;
// switch S<k> is cabled to S<k+1> by its last port.
func topology(nHosts, nSwitches int) (string, []Host, error) {
	return topologySMs(nHosts, nSwitches, 1)
}

// topologySMs is topology with nSMs SM HCAs ("SM", "SM2", ...), all on S1
// after the first, each for one manager's OpenSM.
func topologySMs(nHosts, nSwitches, nSMs int) (string, []Host, error) {
	if nHosts < 1 || nSwitches < 1 || nSMs < 1 {
		return "", nil, fmt.Errorf("topology: want at least 1 host, 1 switch and 1 SM, got %d, %d and %d", nHosts, nSwitches, nSMs)
	}
	// Ports a switch needs: its share of the hosts (S1 also has the SMs), plus
	// two for the chain.
	nPorts := max((nHosts+nSwitches+nSMs-1)/nSwitches+2, 8)
	if nSwitches == 1 {
		nPorts = max(nHosts+nSMs+2, 8)
	}
	if nPorts > maxSwitchPorts {
		return "", nil, fmt.Errorf("topology: %d hosts on %d switches need %d ports per switch, more than %d",
			nHosts, nSwitches, nPorts, maxSwitchPorts)
	}
	const link = " # lid 0 4xQDR"          // width and speed of every link
	links := make([][]string, nSwitches+1) // links[k]: cabling lines of switch S<k>
	next := make([]int, nSwitches+1)       // next free port of each switch
	for k := 1; k <= nSwitches; k++ {
		next[k] = 1
	}
	links[1] = append(links[1], `[1] "SM"[1]`+link)
	next[1] = 2
	for k := 2; k <= nSMs; k++ {
		links[1] = append(links[1], fmt.Sprintf(`[%d] %q[1]`, next[1], SMName(k))+link)
		next[1]++
	}

	var hosts []Host
	for i := 1; i <= nHosts; i++ {
		s := (i-1)%nSwitches + 1
		p := next[s]
		next[s]++
		links[s] = append(links[s], fmt.Sprintf(`[%d] "H%d"[1]`, p, i)+link)
		hosts = append(hosts, Host{
			Name:       fmt.Sprintf("H%d", i),
			PortGUID:   HostGUID(i),
			Switch:     fmt.Sprintf("S%d", s),
			SwitchPort: p,
			SwitchGUID: SwitchGUID(s),
		})
	}
	for k := 1; k < nSwitches; k++ {
		links[k] = append(links[k], fmt.Sprintf(`[%d] "S%d"[%d]`, nPorts, k+1, nPorts-1)+link)
		links[k+1] = append(links[k+1], fmt.Sprintf(`[%d] "S%d"[%d]`, nPorts-1, k, nPorts)+link)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# ibsim topology written by fabricsim: %d hosts, %d switches.\n", nHosts, nSwitches)
	b.WriteString("# caguid is the node GUID of the next HCA; its port 1 GUID is caguid + 1.\n")
	b.WriteString("# The SM's HCA comes first, which makes it the default attach point.\n")
	fmt.Fprintf(&b, "caguid=%s\nHca 1 \"SM\"\n[1] \"S1\"[1]%s\n\n", SMGUID-1, link)
	for k := 2; k <= nSMs; k++ {
		fmt.Fprintf(&b, "caguid=%s\nHca 1 %q\n[1] \"S1\"[%d]%s\n\n", ExtraSMGUID(k)-1, SMName(k), k, link)
	}
	for _, h := range hosts {
		fmt.Fprintf(&b, "caguid=%s\nHca 1 %q\n[1] %q[%d]%s\n\n", h.PortGUID-1, h.Name, h.Switch, h.SwitchPort, link)
	}
	for k := 1; k <= nSwitches; k++ {
		fmt.Fprintf(&b, "switchguid=%s\nSwitch %d \"S%d\"\n%s\n\n", SwitchGUID(k), nPorts, k, strings.Join(links[k], "\n"))
	}
	return b.String(), hosts, nil
}

// describeHosts gives the named HCAs of the topology net the descriptions
// descs holds, in ibsim's syntax: `Hca 1 "H2" # "description"`.
func describeHosts(net string, descs map[string]string) (string, error) {
	for name, desc := range descs {
		if len(desc) > 63 || strings.ContainsAny(desc, "\"\n\x00") {
			return "", fmt.Errorf("topology: description %q of %s: want at most 63 characters, without '\"' or a newline", desc, name)
		}
		line := fmt.Sprintf("Hca 1 %q\n", name)
		if !strings.Contains(net, line) {
			return "", fmt.Errorf("topology: no host %s to describe", name)
		}
		net = strings.Replace(net, line, fmt.Sprintf("Hca 1 %q # \"%s\"\n", name, desc), 1)
	}
	return net, nil
}

// CleanNodeDescription does to a node description what OpenSM does before it
// logs one or writes it into its subnet dump (complib's clean_nodedesc,
// through remap_node_name): at most 63 bytes, up to the first NUL, every byte
// that is not printable ASCII replaced by a space. So no description a tenant
// sets ever puts a newline into the log or the dump; tests of what a hostile
// description can do start from what OpenSM would make of it.
func CleanNodeDescription(raw []byte) string {
	b := make([]byte, 0, 63)
	for _, c := range raw {
		if c == 0 || len(b) == 63 {
			break
		}
		if c < 0x20 || c > 0x7e {
			c = ' '
		}
		b = append(b, c)
	}
	return string(b)
}
