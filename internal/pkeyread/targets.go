package pkeyread

import (
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Targets are the host ports ports as OpenSM's subnet dump places them: each
// with its LID, its directed route from the master SM's port (the manager's
// OpenSM's, which the reads leave from) and the switch port facing it (none
// for a port linked to no switch). A port the dump does not have is in missing: it was not on the
// fabric at OpenSM's last sweep, so nothing can be read from it.
func Targets(topo *topology.Topology, ports []fabric.GUID) (targets []Target, missing []error) {
	for _, p := range ports {
		lid, ok := topo.LID(p)
		if !ok {
			missing = append(missing, fmt.Errorf("port %s: not in OpenSM's subnet dump (not on the fabric at its last sweep)", p))
			continue
		}
		t := Target{Port: p, LID: lid, Path: routeTo(topo, p)}
		if sw, port, ok := topo.HostPort(p); ok {
			swLID, _ := topo.LID(sw) // every switch of the dump has one
			t.Switch = SwitchPort{GUID: sw, LID: swLID, Path: routeTo(topo, sw), Port: port}
		}
		targets = append(targets, t)
	}
	return targets, missing
}

// routeTo is the directed route the dump gives to guid; none when the dump
// marks no SM port or has no route to it.
func routeTo(topo *topology.Topology, guid fabric.GUID) DRPath {
	if hops, ok := topo.Route(guid); ok {
		return NewDRPath(hops)
	}
	return DRPath{}
}
