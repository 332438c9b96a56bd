package partitions

import "github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"

// Network is one Neutron VLAN network's partition.
type Network struct {
	ID      string        // Neutron network UUID
	PKey    fabric.PKey   // = VLAN ID
	Members []fabric.GUID // its ports' GUIDs, full members
}

// FlatPartition is the one partition the ports of every flat network share.
type FlatPartition struct {
	PKey    fabric.PKey   // [opensm] flat_pkey, 0x7ffe by default
	Members []fabric.GUID // the ports of every flat network
}

// FlatPartitionName is the name of the flat networks' partition in the file.
const FlatPartitionName = "flat"

// State is what the recorded state renders from, and what a file is checked against.
type State struct {
	Revision int64
	// DefaultPartition is [opensm] default_partition, written to the file as is: one
	// statement on one line, e.g. "Default=0x7fff, ipoib : ALL=limited, SELF=full ;".
	DefaultPartition string
	Networks         []Network // any order; the built-in template sorts by pkey, members by GUID
	// Flat is the one partition every flat network's ports share ([opensm] flat_pkey).
	Flat FlatPartition
	// Rules are the configured variations of Check's rules.
	Rules Rules
}

// Rules are the knobs of Check that come from configuration. The zero value is
// the strictest: no shared default partition, upstream OpenSM.
type Rules struct {
	// SharedDefaultPartition is [opensm] shared_default_partition: it lets the
	// default partition make every port a full member (ALL=full), for fabrics
	// whose ports rely on it.
	SharedDefaultPartition bool
	// Flavour is the OpenSM that reads the file.
	Flavour fabric.Flavour
}
