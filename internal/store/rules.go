package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
)

// DefaultFlatPKey is [opensm] flat_pkey's default: the partition every flat
// network shares, just below the default partition's 0x7fff.
const DefaultFlatPKey fabric.PKey = 0x7ffe

// Rules are the settings that decide which networks get a partition and which
// pkeys a network may use. The zero Rules manage every physical network, put
// flat networks on DefaultFlatPKey and know no static partition.
type Rules struct {
	// PhysicalNetworks is [api] physical_networks: nil, or a list holding "*",
	// means every physical network.
	PhysicalNetworks []string
	// FlatPKey is [opensm] flat_pkey; 0 means DefaultFlatPKey.
	FlatPKey fabric.PKey
	// StaticPKey says whether the partitions template defines a static
	// partition with this pkey, and its name. nil: the template defines none.
	StaticPKey func(fabric.PKey) (name string, static bool)
	// StaticMember says whether the partitions template (or the default
	// partition) lists host port guid by its GUID, and in which partition: such
	// a port may be in no network's partition. nil: none is listed.
	StaticMember func(guid fabric.GUID) (partition string, listed bool)
	// PortLimit reads the fabric as it is now (OpenSM's subnet dump) and
	// returns a PortCheck on it; it is called before the change transaction,
	// whose callback does no I/O of its own (topology.PortLimit.Checker).
	// nil: no limit.
	PortLimit func() (PortCheck, error)
	// ReservedGUIDs is [api] reserved_guids: GUIDs no client may name, on
	// either API (smports.go adds every manager's subnet manager port).
	ReservedGUIDs []fabric.GUID
	// CheckHost is [api] check_host: a networking-mlnx port whose GUID is a
	// confirmed host's port is refused unless it is bound to that host
	// (hosts.go, hostCheck).
	CheckHost bool
	// KubernetesRange is [ufm_pkeys] pkey_range: the pkeys Kubernetes
	// partitions may use, and no Neutron VLAN may. Empty: Kubernetes may use
	// none.
	KubernetesRange fabric.PKeyRange
	// KubernetesMaxMembersPerPKey and KubernetesMaxMembers are [ufm_pkeys]
	// max_members_per_pkey and max_members: the most members of one
	// Kubernetes pkey and of all of them. 0: no limit.
	KubernetesMaxMembersPerPKey, KubernetesMaxMembers int
	// PKeysClients are the fabric's further pkeys clients ([ufm_pkeys:NAME])
	// by NAME (principals.go): no Neutron VLAN may use their ranges, and each
	// one's view (Store.PKeysClient) records by its own.
	PKeysClients map[string]PKeysClientRules

	// PartitionFlags renders s, one owner's partition alone, with the
	// partitions template and returns the header flags the file writes pkey's
	// statement with (partitions.Template.HeaderFlags; ok false: none): a
	// network taking an adopted partition over says in its job how the
	// partition's flags change. nil: the job names the adopted partition only.
	PartitionFlags func(ctx context.Context, s partitions.State, pkey fabric.PKey) (flags []partitions.Flag, ok bool, err error)

	// client is the pkeys client whose view these rules are ("": the
	// [ufm_pkeys] client), and deleteEmpty its delete_empty.
	client      string
	deleteEmpty bool

	// fabric is the fabric whose rules these are (set by NewDB): the
	// sections a refusal names are that fabric's.
	fabric string
}

// section is the configuration section of the fabric's settings a refusal
// names: "[opensm]" or "[ufm_pkeys]" for the default fabric, "[fabric:NAME]"
// or "[fabric:NAME:ufm_pkeys]" for another.
func (r Rules) section(name string) string {
	if name == "ufm_pkeys" && r.client != "" {
		return "[ufm_pkeys:" + r.client + "]"
	}
	if r.fabric == "" || r.fabric == DefaultFabric {
		return "[" + name + "]"
	}
	if name == "opensm" {
		return "[fabric:" + r.fabric + "]"
	}
	return "[fabric:" + r.fabric + ":" + name + "]"
}

// PortCheck says why host port guid may not become a member of partitions
// (refusal, "" when it may): its switch port's pkey table would be full.
type PortCheck func(guid fabric.GUID, partitions ...fabric.PKey) (refusal string)

// Network types that get a partition.
const (
	TypeVLAN = "vlan"
	TypeFlat = "flat"
)

// NetworkSpec is a network as networking-mlnx describes it.
type NetworkSpec struct {
	ID              string
	Name            string
	Type            string // provider:network_type
	PhysicalNetwork string // provider:physical_network
	SegmentationID  *int64 // provider:segmentation_id; nil when absent or null
}

// partitionOf is the pkey of network n's partition.
func (r Rules) partitionOf(n Network) fabric.PKey {
	if n.PKey == nil {
		return r.flatPKey()
	}
	return *n.PKey
}

func (r Rules) flatPKey() fabric.PKey {
	if r.FlatPKey == 0 {
		return DefaultFlatPKey
	}
	return r.FlatPKey
}

func (r Rules) managesPhysnet(name string) bool {
	return r.PhysicalNetworks == nil || slices.Contains(r.PhysicalNetworks, "*") ||
		slices.Contains(r.PhysicalNetworks, name)
}

// The sizes of a network's type and physical network columns.
const (
	maxNetworkType     = 16
	maxPhysicalNetwork = 64
)

// network turns a spec into the network to record, or refuses it by the rules
// that need no database: a VLAN network's VLAN ID must be a pkey no other kind
// of partition uses.
func (r Rules) network(spec NetworkSpec) (Network, error) {
	n := Network{ID: spec.ID, Name: spec.Name, Type: spec.Type, PhysicalNetwork: spec.PhysicalNetwork}
	// Recorded even when not managed, in columns of 16 and 64 characters;
	// Neutron's own limits are the same.
	if l := utf8.RuneCountInString(spec.Type); l > maxNetworkType {
		return Network{}, rejectf("network %s: provider:network_type of %d characters: want at most %d",
			spec.ID, l, maxNetworkType)
	}
	if l := utf8.RuneCountInString(spec.PhysicalNetwork); l > maxPhysicalNetwork {
		return Network{}, rejectf("network %s: provider:physical_network of %d characters: want at most %d",
			spec.ID, l, maxPhysicalNetwork)
	}
	if (spec.Type != TypeVLAN && spec.Type != TypeFlat) || !r.managesPhysnet(spec.PhysicalNetwork) {
		return n, nil // not ours: recorded, no partition
	}
	n.Managed = true
	if spec.Type == TypeFlat {
		return n, nil // on the shared flat partition
	}
	if spec.SegmentationID == nil {
		return Network{}, rejectf("network %s: provider:segmentation_id is missing: a VLAN network on physical network %q needs a VLAN ID, its partition key",
			spec.ID, spec.PhysicalNetwork)
	}
	vlan := *spec.SegmentationID
	if err := r.checkVLAN(spec.ID, vlan); err != nil {
		return Network{}, err
	}
	pkey := fabric.PKey(vlan)
	n.PKey = &pkey
	return n, nil
}

// checkVLAN refuses a VLAN ID that cannot be network id's partition key: out
// of range, or the pkey of another kind of partition.
func (r Rules) checkVLAN(id string, vlan int64) error {
	if vlan < 1 || vlan > int64(fabric.MaxNetworkPKey) {
		return rejectf("network %s: VLAN ID %d cannot be a partition key: want 1 to %d (0x7fff is the default partition's)",
			id, vlan, fabric.MaxNetworkPKey)
	}
	pkey := fabric.PKey(vlan)
	if pkey == r.flatPKey() {
		return rejectf("network %s: VLAN ID %d is the flat networks' partition key %s (%s flat_pkey)",
			id, vlan, pkey, r.section("opensm"))
	}
	if r.StaticPKey != nil {
		if name, static := r.StaticPKey(pkey); static {
			return rejectf("network %s: VLAN ID %d is the partition key %s of static partition %q of the partitions template",
				id, vlan, pkey, name)
		}
	}
	if section, rng, ok := r.kubernetesRangeOf(pkey); ok {
		return rejectf("network %s: VLAN ID %d (pkey %s) is in %s pkey_range %s, which only Kubernetes partitions may use",
			id, vlan, pkey, section, rng)
	}
	return nil
}

// Conflicts returns, for each recorded network that this configuration would
// refuse if it were sent now, which network, its VLAN and the rule: the
// configuration changed under it (flat_pkey now its VLAN, a static partition
// on its pkey). Such a state renders to no file that passes the check.
func (r Rules) Conflicts(networks []Network) []string {
	var out []string
	for _, n := range networks {
		if !n.Managed || n.PKey == nil {
			continue
		}
		if err := r.checkVLAN(n.ID, int64(*n.PKey)); err != nil {
			out = append(out, err.Error())
		}
	}
	return out
}

// partitionText says which partition a network has, for job texts.
func (r Rules) partitionText(n Network) string {
	switch {
	case !n.Managed:
		return "no partition: " + r.unmanagedReason(n)
	case n.PKey == nil:
		return fmt.Sprintf("flat partition, pkey %s", r.flatPKey())
	}
	return "pkey " + n.PKey.String()
}

// unmanagedReason says why network n has no partition. A network recorded
// before its physical network was given to the fabric keeps none: its VLAN ID
// was never recorded, and only Neutron has it.
func (r Rules) unmanagedReason(n Network) string {
	if n.Type != TypeVLAN && n.Type != TypeFlat {
		return fmt.Sprintf("network type %q is not vlan or flat", n.Type)
	}
	section := "[api]"
	if r.fabric != "" && r.fabric != DefaultFabric {
		section = r.section("opensm")
	}
	if r.managesPhysnet(n.PhysicalNetwork) {
		return fmt.Sprintf("physical network %q was not in %s physical_networks when the network was recorded "+
			"(--import-neutron records its partition)", n.PhysicalNetwork, section)
	}
	return fmt.Sprintf("physical network %q is not in %s physical_networks", n.PhysicalNetwork, section)
}

// networkOwner says whether a port belongs to Neutron's own network services
// (DHCP, routers): such ports legitimately have no client-id.
func networkOwner(deviceOwner string) bool {
	return strings.HasPrefix(deviceOwner, "network:")
}

// PartitionOf says which partition the ports of network spec join: its VLAN
// ID, or [opensm] flat_pkey for a flat network. ok is false when the network
// gets none (neither VLAN nor flat, or its physical network is not in [api]
// physical_networks); err is the refusal RecordNetwork would answer without
// reading the database.
func (r Rules) PartitionOf(spec NetworkSpec) (pkey fabric.PKey, ok bool, err error) {
	n, err := r.network(spec)
	if err != nil || !n.Managed {
		return 0, false, err
	}
	return r.partitionOf(n), true, nil
}
