package topology

import (
	"cmp"
	"maps"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Port is one port of a host (CA) or switch as the dump describes it: what
// UFM's ports resource lists. A line of the dump is a link, so a port is
// listed only while its link is up.
type Port struct {
	// GUID is the port's GUID; a switch's ports share its node GUID.
	GUID       fabric.GUID
	NodeGUID   fabric.GUID
	SystemGUID fabric.GUID
	// Number is the port's number on its node.
	Number int
	// Host: the node is a channel adapter (CA); otherwise a switch, a
	// router or a node of unknown type (Kind).
	Host bool
	Kind string
	// Description is the node's NodeDescription, as the node set it.
	Description string
	LID         uint16
	// LinkState is the logical state of the port's link, as OpenSM writes
	// it: ACT, ARM, INI or DWN.
	LinkState string
}

// addPorts records both ends of a link as ports, with the link's logical
// state.
func (t *Topology) addPorts(ends [2]end, linkState string) {
	for _, e := range ends {
		guid := e.portGUID
		if e.kind == "SW" {
			guid = e.nodeGUID
		}
		t.ports[nodePort{e.nodeGUID, e.port}] = Port{GUID: guid, NodeGUID: e.nodeGUID, SystemGUID: e.systemGUID,
			Number: e.port, Host: e.kind == "CA", Kind: e.kind, Description: e.description, LID: e.lid,
			LinkState: linkState}
	}
}

// Ports returns the dump's ports, by GUID and port number.
func (t *Topology) Ports() []Port {
	out := slices.Collect(maps.Values(t.ports))
	slices.SortFunc(out, func(a, b Port) int {
		return cmp.Or(cmp.Compare(a.GUID, b.GUID), cmp.Compare(a.NodeGUID, b.NodeGUID), cmp.Compare(a.Number, b.Number))
	})
	return out
}
