package partitions

import "github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"

// FlatPartition is the one partition every flat network shares.
type FlatPartition struct {
	PKey    fabric.PKey   // [opensm] flat_pkey
	Members []fabric.GUID // the ports of every flat network
}
