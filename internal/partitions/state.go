package partitions

import (
	"fmt"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Network is one Neutron VLAN network's partition.
type Network struct {
	ID      string        // Neutron network UUID
	PKey    fabric.PKey   // = VLAN ID
	Members []fabric.GUID // its ports' GUIDs, full members
}

// PartitionName is the name of a network's partition: "net-", its pkey in four
// hex digits, '-' and the first 22 characters of the network ID, 31 characters
// in all for a UUID, which is as many as OpenSM keeps. The pkey makes names
// unique by construction (no two networks share a pkey), however alike the IDs
// are: two UUIDs may share any prefix. A character of the ID outside
// [A-Za-z0-9_.-] becomes '_'.
func PartitionName(networkID string, pkey fabric.PKey) string {
	const idChars = 31 - len("net-0000-")
	b := make([]byte, 0, 31)
	b = fmt.Appendf(b, "net-%04x-", uint16(pkey))
	kept := 0
	for _, r := range networkID {
		if kept == idChars {
			break
		}
		if r < utf8.RuneSelf && isNameByte(byte(r)) {
			b = append(b, byte(r))
		} else {
			b = append(b, '_')
		}
		kept++
	}
	return string(b)
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
	// Kubernetes are the partitions ib-kubernetes asked for (any order; the
	// built-in template sorts by pkey, members by GUID).
	Kubernetes []KubernetesPartition
	// Adopted are the partitions --adopt-partitions recorded (adopted.go):
	// each is written as it is while no network, flat partition or
	// Kubernetes pkey has its pkey, and its members are written beside the
	// owner's once one has. Any order.
	Adopted []Statement
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

// KubernetesPartition is one pkey ib-kubernetes gives pods' GUIDs. Unlike a
// network's partition, a member may be limited, and a GUID may be in several
// Kubernetes partitions (but in no network's).
type KubernetesPartition struct {
	PKey    fabric.PKey
	IPoIB   bool // the ipoib flag: the partition carries an IPoIB broadcast group
	Members []KubernetesMember
	// QoS is the partition's QoS as UFM's API set it: its statement carries
	// mtu=, rate= and sl= (IBTA codes), and the QoS policy file a qos-level
	// for the pkey (qospolicy.go). The zero value gives neither.
	QoS fabric.QoS
}

// HasQoS says whether the partition has a QoS to write.
func (k KubernetesPartition) HasQoS() bool { return k.QoS.MTUCode() != 0 }

// KubernetesMember is one GUID of a Kubernetes partition.
type KubernetesMember struct {
	GUID       fabric.GUID
	Membership Membership
	// Index0: ib-kubernetes asked for the pkey at index 0 of the GUID's table.
	Index0 bool
}

// Index0 says whether the partition's statement carries indx0: only for
// NVIDIA's OpenSM (whose pods' virtual ports have pkey tables of their own;
// on a physical port index 0 belongs to the default partition, and Parse
// refuses indx0 for upstream OpenSM), and only when every member asked for it,
// since OpenSM's indx0 is the whole partition's.
func (k KubernetesPartition) Index0(f fabric.Flavour) bool {
	if f != fabric.NVIDIA || len(k.Members) == 0 {
		return false
	}
	for _, m := range k.Members {
		if !m.Index0 {
			return false
		}
	}
	return true
}

// KubernetesPartitionName is the name of a Kubernetes partition in the file:
// "k8s-" and its pkey in four hex digits, unique as the pkey is.
func KubernetesPartitionName(pkey fabric.PKey) string {
	return fmt.Sprintf("k8s-%04x", uint16(pkey))
}
