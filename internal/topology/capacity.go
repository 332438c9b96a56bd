package topology

import (
	"cmp"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// A switch port facing a host enforces partitions with a table of the host
// port's pkeys (opensm-reference §3). When the host port carries as many pkeys
// as that table holds, OpenSM turns the port's enforcement off without an error
// line (§3.3): it happens at count >= 32 × ceil(PartEnforceCap / 32), which for
// the usual caps, multiples of 32, is the cap itself; for other caps OpenSM logs
// ERR 0507 from count > cap. Reaching the capacity is therefore already too many:
// a host port may carry at most capacity - 1 pkeys.

// Reached is a host port whose pkeys would fill the table of the switch port it
// is behind.
type Reached struct {
	Host   fabric.GUID // the host port
	Behind SwitchPort  // the switch port facing it
	PKeys  int         // the distinct pkeys it would carry, the default partition included
}

// capacityReached returns the host ports whose pkeys would reach capacity, the
// number of entries of a switch port's pkey table ([opensm] switch_pkey_capacity),
// by host GUID.
//
// pkeys gives, per host port GUID, the partitions it is a member of: the
// partition of each network it is in, the flat partition if it is in a flat
// network, and any other partition listing it (such as a static one in the
// template). What counts is what OpenSM puts in the switch port's table: every
// distinct pkey of the host port, full or limited alike (a full and a limited
// entry of one pkey count once), plus the default partition 0x7fff, which every
// port carries (the default partition line lists ALL); it is added here whether
// or not pkeys lists it. Ports missing from pkeys carry only the default.
//
// Host ports the topology does not place (not on the fabric at the last sweep,
// or not linked to a switch) are behind no switch port to name: PortLimit
// holds each of them below capacity on its own when it is sent (Check), and
// the applier leaves out of the file what would not fit wherever it lands
// (Excess), since OpenSM gives it its pkeys at the sweep that finds it.
//
// The pkeys of extra (when not nil) are added to each port's: the applier
// checks every host port of a large fabric after each sweep (PortLimit's
// Reached, with its Static), and this spares it a copy of the map.
func (t *Topology) capacityReached(pkeys map[fabric.GUID][]fabric.PKey, extra func(fabric.GUID) []fabric.PKey, capacity int) []Reached {
	var out []Reached
	var distinct []fabric.PKey   // reused from port to port
	for host, p := range pkeys { // every port is looked at: sorting the few found is cheaper
		at, placed := t.behind[host]
		if !placed {
			continue
		}
		distinct = appendDistinct(append(distinct[:0], fabric.DefaultPKey&0x7fff), p)
		if extra != nil {
			distinct = appendDistinct(distinct, extra(host))
		}
		if n := len(distinct); n >= capacity {
			out = append(out, Reached{Host: host, Behind: at, PKeys: n})
		}
	}
	slices.SortFunc(out, func(a, b Reached) int { return cmp.Compare(a.Host, b.Host) })
	return out
}

// countPKeys counts the distinct pkeys of a port, the default partition
// included.
func countPKeys(pkeys []fabric.PKey) int {
	return len(appendDistinct([]fabric.PKey{fabric.DefaultPKey & 0x7fff}, pkeys))
}

// appendDistinct appends to distinct each of pkeys it lacks, without the
// membership bit (a full and a limited entry of one pkey are one entry). A
// port has a few: a linear search beats a map.
func appendDistinct(distinct, pkeys []fabric.PKey) []fabric.PKey {
	for _, p := range pkeys {
		if p &= 0x7fff; !slices.Contains(distinct, p) {
			distinct = append(distinct, p)
		}
	}
	return distinct
}
