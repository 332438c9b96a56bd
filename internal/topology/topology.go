// Package topology reads OpenSM's subnet dump, opensm-subnet.lst, into the
// fabric's switches and the switch port each host port is behind.
//
// OpenSM rewrites the file in its dump_files_dir (option dump_files_dir,
// --dump_files_dir on the command line) at every SUBNET UP. Each line is one
// link, seen from one end, both ends described the same way:
//
//	{ CA Ports:01 SystemGUID:... NodeGUID:... PortGUID:... VenID:... DevID:... Rev:... {H1} LID:0003 PN:01 } { SW Ports:08 ... {S1} LID:0002 PN:02 } PHY=4x LOG=ACT SPD=10
//
// The node type is SW, CA, Rt or ** (unknown), followed by -SM on the subnet
// manager's node; Ports, LID and PN are hexadecimal; the description is the
// node's NodeDescription between braces. A switch's PortGUID is its node GUID
// (port 0), and its PN is the external port of the link.
//
// The parser is strict: a line it cannot read fails the whole file with its line
// number, since a topology read in part would hide switches and host ports.
// OpenSM writes the file in place (not atomically), so a read that races with a
// sweep can see it cut short; that shows as an error (an unterminated last line,
// or an empty file), and reading it again after the next SUBNET UP succeeds.
package topology

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"syscall"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// FileName is the name of the dump in OpenSM's dump_files_dir.
const FileName = "opensm-subnet.lst"

// Switch is one switch of the fabric.
type Switch struct {
	GUID        fabric.GUID // node GUID, the one OpenSM's ERR 0507 names
	Description string      // NodeDescription
	Ports       int         // number of external ports
}

// SwitchPort is an external port of a switch.
type SwitchPort struct {
	Switch fabric.GUID
	Port   int
}

// String is "<switch GUID>:<port>", as operators list switch ports.
func (p SwitchPort) String() string { return fmt.Sprintf("%s:%d", p.Switch, p.Port) }

// Topology is what one dump says about the fabric.
type Topology struct {
	switches map[fabric.GUID]Switch
	// behind maps each host port (port GUID of a CA linked to a switch) to the
	// switch port at the other end of its link.
	behind map[fabric.GUID]SwitchPort
	// portOf maps a CA's node GUID and port number to the port's GUID: OpenSM's
	// pkey errors name the node and the port number.
	portOf map[nodePort]fabric.GUID
	// lids maps a CA port's GUID and a switch's node GUID to the LID OpenSM
	// gave it: where SMPs reach it (package pkeyread).
	lids map[fabric.GUID]uint16
	// links maps each port of the dump to the port at the other end of its
	// link (by node GUID and port number), and sm is the port OpenSM marks
	// as the master SM's (-SM): together they give the directed routes
	// (route.go).
	links  map[nodePort]nodePort
	sm     *nodePort
	routes map[fabric.GUID]string
	// ports are the dump's ports of hosts and switches, by node GUID and
	// port number: what UFM's ports resource lists.
	ports map[nodePort]Port
}

// LID returns the LID of a host port (by port GUID) or of a switch (by node
// GUID: its port 0's) as OpenSM assigned it at the sweep that wrote the dump;
// ok is false when the dump has no such port. A port whose LID is not yet
// assigned has LID 0.
func (t *Topology) LID(guid fabric.GUID) (lid uint16, ok bool) {
	lid, ok = t.lids[guid]
	return lid, ok
}

type nodePort struct {
	node fabric.GUID
	port int
}

// PortGUID returns the GUID of port number port of the CA whose node GUID is
// node; ok is false when the dump has no such port.
func (t *Topology) PortGUID(node fabric.GUID, port int) (guid fabric.GUID, ok bool) {
	guid, ok = t.portOf[nodePort{node, port}]
	return guid, ok
}

// IsSwitch says whether node is a switch of the dump.
func (t *Topology) IsSwitch(node fabric.GUID) bool {
	_, ok := t.switches[node]
	return ok
}

// HostBehind returns the host port linked to port number port of switch sw;
// ok is false when none is (port 0 is the switch itself).
func (t *Topology) HostBehind(sw fabric.GUID, port int) (host fabric.GUID, ok bool) {
	for h, at := range t.behind {
		if at.Switch == sw && at.Port == port {
			return h, true
		}
	}
	return 0, false
}

// Switches returns the fabric's switches, by GUID.
func (t *Topology) Switches() []Switch {
	out := make([]Switch, 0, len(t.switches))
	for _, g := range slices.Sorted(maps.Keys(t.switches)) {
		out = append(out, t.switches[g])
	}
	return out
}

// HostPort returns the switch port that host port guid is linked to. ok is false
// when the port is not in the dump, or not linked to a switch.
func (t *Topology) HostPort(guid fabric.GUID) (sw fabric.GUID, port int, ok bool) {
	p, ok := t.behind[guid]
	return p.Switch, p.Port, ok
}

// HostPorts returns every host port linked to a switch, by GUID.
func (t *Topology) HostPorts() []fabric.GUID {
	return slices.Sorted(maps.Keys(t.behind))
}

// openNoFollow opens the dump, never through a symbolic link: OpenSM's
// user owns dump_files_dir (config_dir) and could put one there to a file
// only the manager may read, whose lines a parse error would quote.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// Load reads the dump at path, for instance <dump_files_dir>/opensm-subnet.lst.
func Load(path string) (*Topology, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, fmt.Errorf("read OpenSM's subnet dump: %w", err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("read OpenSM's subnet dump: %w", err)
	}
	t, err := Parse(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// nodePattern is the part of the line that describes one end of the link: the
// printf format is "{ %s%s Ports:%02X SystemGUID:%016llx NodeGUID:%016llx
// PortGUID:%016llx VenID:%06X DevID:%04X Rev:%08X {%s} LID:%04X PN:%02X }" (VenID
// has 8 digits for the remote end), desc the pattern of the description.
func nodePattern(desc string) string {
	return `\{ (SW|CA|Rt|\*\*)(-SM)? Ports:([0-9A-F]{2}) SystemGUID:([0-9a-f]{16}) NodeGUID:([0-9a-f]{16}) ` +
		`PortGUID:([0-9a-f]{16}) VenID:[0-9A-F]{6,8} DevID:[0-9A-F]{4,8} Rev:[0-9A-F]{8} \{(` + desc + `)\} ` +
		`LID:([0-9A-F]{4}) PN:([0-9A-F]{2}) \}`
}

// A description is free text, braces included, so the fixed fields around it
// decide where it ends. The first end's starts after the line's fixed start
// and the second end's ends before its fixed end (the spaces of "} LID:...
// PN:.. } PHY=... LOG=... SPD=..." leave it one place); what lies between the
// two, the first end's LID and PN and the second end's fields up to its
// description, takes 151 bytes at least, which a node's description never
// holds: OpenSM keeps 63 bytes of it (clean_nodedesc). So the line reads one
// way, however the descriptions mimic the fields. Only a name from OpenSM's
// node_name_map can be longer, and a line whose first description could end
// in two places is refused rather than read the way that puts another
// switch's fields into it.
const (
	linkTail = ` PHY=\S+ LOG=(\S+) SPD=\S+$`
	// maxNodeDescription is the longest description OpenSM writes of a node's
	// own NodeDescription.
	maxNodeDescription = 63
)

var (
	// linkLine ends the first description at the first place it can end.
	linkLine = regexp.MustCompile(`^` + nodePattern(`.*?`) + ` ` + nodePattern(`.*?`) + linkTail)
	// linkLineLast ends it at the last place it can end.
	linkLineLast = regexp.MustCompile(`^` + nodePattern(`.*`) + ` ` + nodePattern(`.*?`) + linkTail)
)

// end is one end of a link, as a line describes it.
type end struct {
	kind        string // SW, CA, Rt or **
	sm          bool   // -SM: the port is the master SM's
	ports       int
	systemGUID  fabric.GUID
	nodeGUID    fabric.GUID
	portGUID    fabric.GUID
	description string
	lid         uint16
	port        int
}

// parseEnd reads the submatches of one end: type, ports, system GUID, node
// GUID, port GUID, description, LID, port number.
func parseEnd(m []string) (end, error) {
	// The pattern admits only as many hex digits as the types hold.
	ports, _ := strconv.ParseUint(m[1], 16, 8)
	systemGUID, _ := strconv.ParseUint(m[2], 16, 64)
	nodeGUID, _ := strconv.ParseUint(m[3], 16, 64)
	portGUID, _ := strconv.ParseUint(m[4], 16, 64)
	lid, _ := strconv.ParseUint(m[6], 16, 16)
	pn, _ := strconv.ParseUint(m[7], 16, 8)
	e := end{kind: m[0], ports: int(ports), systemGUID: fabric.GUID(systemGUID), nodeGUID: fabric.GUID(nodeGUID),
		portGUID: fabric.GUID(portGUID), description: m[5], lid: uint16(lid), port: int(pn)}
	switch {
	case e.nodeGUID == 0 || e.portGUID == 0:
		return e, fmt.Errorf("%s %q: zero GUID", e.kind, e.description)
	case e.port < 1 || e.port > e.ports:
		return e, fmt.Errorf("%s %s %q: port %d outside its ports 1 to %d", e.kind, e.nodeGUID, e.description,
			e.port, e.ports)
	}
	return e, nil
}

// addLID records the LID of a link's end: a CA's port or a switch. Every line
// that names one must give it the same LID.
func (t *Topology) addLID(e end) error {
	guid := e.portGUID
	switch e.kind {
	case "SW":
		guid = e.nodeGUID
	case "CA":
	default:
		return nil
	}
	if prev, seen := t.lids[guid]; seen && prev != e.lid {
		return fmt.Errorf("%s %s %q has LID %d, but an earlier line gives it LID %d", e.kind, guid, e.description, e.lid, prev)
	}
	t.lids[guid] = e.lid
	return nil
}

// Parse reads a dump. Every line must be a link; the file must end with a newline
// and hold at least one link. Lines must agree with each other: a switch keeps
// one description and number of ports, and a host port is behind one switch port.
func Parse(r io.Reader) (*Topology, error) {
	t := &Topology{switches: map[fabric.GUID]Switch{}, behind: map[fabric.GUID]SwitchPort{},
		portOf: map[nodePort]fabric.GUID{}, lids: map[fabric.GUID]uint16{}, links: map[nodePort]nodePort{},
		ports: map[nodePort]Port{}}
	hostLine := map[fabric.GUID]int{} // the line that placed each host port
	switchLine := map[fabric.GUID]int{}

	br := bufio.NewReader(r)
	n := 0
	for {
		raw, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read OpenSM's subnet dump: %w", err)
		}
		if raw == "" {
			break
		}
		n++
		if raw[len(raw)-1] != '\n' {
			return nil, fmt.Errorf("line %d: not terminated by a newline: the file was cut short (OpenSM may be rewriting it)", n)
		}
		m := linkLine.FindStringSubmatch(raw[:len(raw)-1])
		if m == nil {
			return nil, fmt.Errorf("line %d: not a link as OpenSM writes it "+
				`("{ <node> PN:<port> } { <node> PN:<port> } PHY=... LOG=... SPD=..."): %.120q`, n, raw)
		}
		// A second end's description holds the middle of the line when the
		// first could end later: only one longer than a node can set needs
		// the second reading.
		if len(m[16]) > maxNodeDescription && !slices.Equal(m, linkLineLast.FindStringSubmatch(raw[:len(raw)-1])) {
			return nil, fmt.Errorf("line %d: reads two ways: a node's description of more than %d bytes "+
				"(from OpenSM's node_name_map) holds the fields of a link's end: %.120q", n, maxNodeDescription, raw)
		}
		var ends [2]end
		for i, fields := range [][]string{m[1:10], m[10:19]} {
			sm := fields[1] != ""
			fields = append([]string{fields[0]}, fields[2:]...) // drop -SM
			if ends[i], err = parseEnd(fields); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			ends[i].sm = sm
		}
		t.addLink(ends)
		t.addPorts(ends, m[19])
		if err := t.addEnds(n, ends, switchLine); err != nil {
			return nil, err
		}
		for i, host := range ends {
			sw := ends[1-i]
			if host.kind != "CA" || sw.kind != "SW" {
				continue
			}
			at := SwitchPort{Switch: sw.nodeGUID, Port: sw.port}
			if prev, seen := t.behind[host.portGUID]; seen && prev != at {
				return nil, fmt.Errorf("line %d: host port %s (%q) is behind switch port %s, but line %d puts it behind %s",
					n, host.portGUID, host.description, at, hostLine[host.portGUID], prev)
			}
			t.behind[host.portGUID], hostLine[host.portGUID] = at, n
		}
	}
	if n == 0 {
		return nil, errors.New("empty: no link (OpenSM may be rewriting the file, or has not swept a fabric yet)")
	}
	t.routes = t.directedRoutes()
	return t, nil
}

// addEnds records the LIDs, CA ports and switches of line n's two ends:
// switchLine is the line that first described each switch.
func (t *Topology) addEnds(n int, ends [2]end, switchLine map[fabric.GUID]int) error {
	for _, e := range ends {
		if err := t.addLID(e); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if e.kind == "CA" {
			t.portOf[nodePort{e.nodeGUID, e.port}] = e.portGUID
		}
		if e.kind != "SW" {
			continue
		}
		sw := Switch{GUID: e.nodeGUID, Description: e.description, Ports: e.ports}
		if prev, seen := t.switches[sw.GUID]; seen && prev != sw {
			return fmt.Errorf("line %d: switch %s is %q with %d ports, but line %d says %q with %d ports",
				n, sw.GUID, sw.Description, sw.Ports, switchLine[sw.GUID], prev.Description, prev.Ports)
		}
		if _, seen := t.switches[sw.GUID]; !seen {
			t.switches[sw.GUID], switchLine[sw.GUID] = sw, n
		}
	}
	return nil
}
