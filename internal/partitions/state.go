package partitions

import "github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"

// Network is one Neutron network's partition. Networks that share a partition (the
// flat networks, on [opensm] flat_pkey) are given as one Network.
type Network struct {
	ID      string        // Neutron network UUID
	PKey    fabric.PKey   // = VLAN ID
	Members []fabric.GUID // its ports' GUIDs, full members
}

// State is what the recorded state renders from.
type State struct {
	Revision int64
	// DefaultPartition is [opensm] default_partition, written to the file as is: one
	// statement on one line, e.g. "Default=0x7fff, ipoib : ALL=limited, SELF=full ;".
	DefaultPartition string
	Networks         []Network // any order; Render sorts by pkey, members by GUID
	Flat             FlatPartition
}
