package topology

import (
	"strconv"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Directed routes: how OpenSM reaches a port without LIDs. A directed-route
// SMP (IBA 14.2.2) carries the port number each node on its way sends it out
// of, from the sender's own port on: the master SM's port, which OpenSM marks
// -SM in the dump and which the manager's reads leave from. It needs no
// forwarding table, so it reaches a port whose LID routes are not set (yet,
// or any more, after a reroute), and one beyond the hops a LID-routed SMP
// crosses. OpenSM discovers the fabric this way, one hop further at a time;
// the routes here are the shortest ones, found the same way.

// MaxRouteHops is the most hops a directed route holds: the SMP's 64-byte
// InitialPath, whose first byte is not a hop.
const MaxRouteHops = 63

// addLink records a link in both directions (the dump lists most links from
// both ends, a few from one) and the master SM's port.
func (t *Topology) addLink(ends [2]end) {
	for i, e := range ends {
		from := nodePort{e.nodeGUID, e.port}
		t.links[from] = nodePort{ends[1-i].nodeGUID, ends[1-i].port}
		if e.sm && t.sm == nil {
			sm := from
			if e.kind == "SW" {
				sm.port = 0 // a switch's SM sends from port 0
			}
			t.sm = &sm
		}
	}
}

// Route returns the directed route from the master SM's port to a host port
// (by port GUID) or a switch (by node GUID): the port each node on the way
// sends the SMP out of, the SM's own port first, one byte a hop. ok is false
// when the dump marks no SM port, or has no route of at most MaxRouteHops to
// the port. The SM's own port has the empty route.
func (t *Topology) Route(guid fabric.GUID) (route string, ok bool) {
	route, ok = t.routes[guid]
	return route, ok
}

// directedRoutes finds the shortest route to every port from the SM's port,
// a breadth-first walk that leaves each switch by its ports in order, as
// OpenSM's discovery does. Only switches forward: a CA or router is the end
// of a route.
func (t *Topology) directedRoutes() map[fabric.GUID]string {
	routes := map[fabric.GUID]string{}
	if t.sm == nil {
		return routes
	}
	type hop struct {
		node  fabric.GUID
		route string
	}
	var queue []hop
	seen := map[fabric.GUID]bool{}
	// reach records the port at the other end of from's link, reached by route.
	reach := func(from nodePort, route string) {
		to, linked := t.links[from]
		if !linked || len(route) > MaxRouteHops {
			return
		}
		if t.IsSwitch(to.node) {
			if !seen[to.node] {
				seen[to.node] = true
				routes[to.node] = route
				queue = append(queue, hop{to.node, route})
			}
			return
		}
		if p, ok := t.portOf[to]; ok {
			if _, known := routes[p]; !known {
				routes[p] = route
			}
		}
	}
	seen[t.sm.node] = true
	if t.IsSwitch(t.sm.node) {
		routes[t.sm.node] = ""
		queue = append(queue, hop{t.sm.node, ""})
	} else {
		if p, ok := t.portOf[*t.sm]; ok {
			routes[p] = ""
		}
		reach(*t.sm, string([]byte{byte(t.sm.port)}))
	}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		for port := 1; port <= t.switches[h.node].Ports; port++ {
			reach(nodePort{h.node, port}, h.route+string([]byte{byte(port)}))
		}
	}
	return routes
}

// RouteString writes a route as infiniband-diags' tools take one (smpquery
// -D): "0" for the SM's port itself, then each hop's port, "0,1,24,3".
func RouteString(route string) string {
	b := make([]byte, 0, 1+4*len(route))
	b = append(b, '0')
	for _, p := range []byte(route) {
		b = strconv.AppendUint(append(b, ','), uint64(p), 10)
	}
	return string(b)
}
