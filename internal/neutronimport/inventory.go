package neutronimport

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Network is a Neutron network on one of the InfiniBand physnets, as
// networking-mlnx would have sent it.
type Network struct {
	Spec store.NetworkSpec
	PKey fabric.PKey // its partition: its VLAN ID, or [opensm] flat_pkey
	Raw  json.RawMessage
}

// Port is a Neutron port with a client-id on such a network, as
// networking-mlnx would have sent it.
type Port struct {
	Change store.PortChange
	PKey   fabric.PKey // its network's partition
	Raw    json.RawMessage
}

// Finding is one network or port the import reports.
type Finding struct {
	Kind   string // "network" or "port"
	ID     string
	About  string // what it is: its pkey; its GUID, host and network
	Reason string // why it is reported ("" for a plain record)
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s %s (%s)", f.Kind, f.ID, f.About)
	if f.Reason != "" {
		s += ": " + f.Reason
	}
	return s
}

// PKeyMembers is a partition key and the GUIDs of the Neutron ports whose
// networks have that partition.
type PKeyMembers struct {
	PKey  fabric.PKey
	GUIDs []fabric.GUID // sorted, each once
}

// Inventory is the part of Neutron's listing that is the manager's: the
// networks on the InfiniBand physnets and their ports with a client-id.
type Inventory struct {
	Networks []Network // in id order
	Ports    []Port    // in id order
	// Refused are the objects the rules refuse, as the API would have
	// answered networking-mlnx's request with 400.
	Refused []Finding
	// Skipped are the objects not imported for a reason that is Neutron's
	// to resolve: two ports with one GUID, a port whose network is refused
	// or was not listed.
	Skipped []Finding
	// Ignored counts what is not the manager's: networks on other physnets
	// or of other types, ports without a client-id or on such networks.
	Ignored int
	// members is Members' answer, read before any port was set aside.
	members []PKeyMembers
	// ib are the listed networks on the InfiniBand physnets, refused or not;
	// claimed the GUID of every listed port with a usable client-id on them,
	// by port id, set aside or not: what Neutron has, to tell what it lacks.
	ib      map[string]bool
	claimed map[string]fabric.GUID
}

// Members returns, for each partition key that a Neutron network on the
// InfiniBand physnets has, the GUIDs of every Neutron port with a client-id
// on such a network, whether the import recorded it or not (refused, or one
// of two ports with one GUID: a GUID a port claims is never a stray). A
// partition key whose networks have no port is listed with no GUID; one that
// no Neutron network has is not listed at all: Neutron says nothing of it.
func (inv Inventory) Members() []PKeyMembers { return inv.members }

// Select reads Neutron's listing with the manager's rules: the networks
// whose partition the rules give (VLAN or flat, on [api] physical_networks)
// and the ports with a client-id on them. Each network and port is read as
// the API reads networking-mlnx's request for it. A network whose provider
// attributes Neutron did not show is an error: the credential may not read
// them, and no network could be told apart from another.
func Select(l Listing, rules store.Rules) (Inventory, error) {
	inv := Inventory{ib: make(map[string]bool), claimed: make(map[string]fabric.GUID)}
	nets := make(map[string]*Network) // every network listed, nil when not the manager's
	refused := make(map[string]bool)
	for _, raw := range l.Networks {
		spec, err := api.DecodeNetwork(raw)
		if err != nil {
			return Inventory{}, fmt.Errorf("a network in Neutron's answer: %w", err)
		}
		if spec.Type == "" {
			return Inventory{}, fmt.Errorf("network %s: Neutron's answer has no provider:network_type nor segments; "+
				"the credential may not read provider attributes (Neutron's policy shows them to admins)", spec.ID)
		}
		pkey, ok, err := rules.PartitionOf(spec)
		switch {
		case err != nil:
			inv.Refused = append(inv.Refused, Finding{Kind: "network", ID: spec.ID, About: networkAbout(spec), Reason: err.Error()})
			nets[spec.ID], refused[spec.ID], inv.ib[spec.ID] = nil, true, true
		case !ok:
			nets[spec.ID] = nil
			inv.Ignored++
		default:
			n := Network{Spec: spec, PKey: pkey, Raw: raw}
			inv.Networks = append(inv.Networks, n)
			nets[spec.ID], inv.ib[spec.ID] = &n, true
		}
	}
	ports := inv.selectPorts(l.Ports, nets, refused)
	inv.members = members(inv.Networks, ports)
	for _, p := range ports {
		inv.claimed[p.Change.Port.ID] = *p.Change.Port.GUID
	}
	inv.Ports = inv.setAsideSharedGUIDs(ports)
	slices.SortFunc(inv.Networks, func(a, b Network) int { return cmp.Compare(a.Spec.ID, b.Spec.ID) })
	slices.SortFunc(inv.Ports, func(a, b Port) int { return cmp.Compare(a.Change.Port.ID, b.Change.Port.ID) })
	sortFindings(inv.Refused)
	sortFindings(inv.Skipped)
	return inv, nil
}

// selectPorts returns the ports with a usable client-id on the manager's
// networks (nets maps every listed network to itself, or to nil when it is
// not the manager's), and reports the others that carry a client-id.
func (inv *Inventory) selectPorts(raws []json.RawMessage, nets map[string]*Network, refused map[string]bool) []Port {
	var out []Port
	for _, raw := range raws {
		c, err := api.DecodePort(raw)
		if err != nil {
			inv.Refused = append(inv.Refused, Finding{Kind: "port", ID: portID(raw), About: "unreadable", Reason: err.Error()})
			continue
		}
		if c.Port.GUID == nil && c.ClientIDError == nil {
			inv.Ignored++ // no client-id: no GUID to put in a partition
			continue
		}
		n, listed := nets[c.Port.NetworkID]
		f := Finding{Kind: "port", ID: c.Port.ID, About: portAbout(c)}
		switch {
		case !listed:
			f.Reason = fmt.Sprintf("its network %s was not listed (created while the import ran?): run the import again", c.Port.NetworkID)
			inv.Skipped = append(inv.Skipped, f)
		case refused[c.Port.NetworkID]:
			f.Reason = fmt.Sprintf("its network %s is refused", c.Port.NetworkID)
			inv.Skipped = append(inv.Skipped, f)
		case n == nil:
			inv.Ignored++ // its network is not on an InfiniBand physnet
		case c.ClientIDError != nil:
			f.Reason = fmt.Sprintf("its client-id cannot give a GUID for the partition of network %s: %v", n.Spec.ID, c.ClientIDError)
			inv.Refused = append(inv.Refused, f)
		default:
			c.Operation = store.OpAddPort
			out = append(out, Port{Change: c, PKey: n.PKey, Raw: raw})
		}
	}
	return out
}

// setAsideSharedGUIDs returns ports without those whose GUID another port
// has too, which it reports: networking-mlnx would have moved the GUID to
// whichever port it sent last, and an import has no last.
func (inv *Inventory) setAsideSharedGUIDs(ports []Port) []Port {
	byGUID := make(map[fabric.GUID][]string)
	for _, p := range ports {
		byGUID[*p.Change.Port.GUID] = append(byGUID[*p.Change.Port.GUID], p.Change.Port.ID)
	}
	var out []Port
	for _, p := range ports {
		holders := byGUID[*p.Change.Port.GUID]
		if len(holders) == 1 {
			out = append(out, p)
			continue
		}
		slices.Sort(holders)
		inv.Skipped = append(inv.Skipped, Finding{Kind: "port", ID: p.Change.Port.ID, About: portAbout(p.Change),
			Reason: fmt.Sprintf("GUID %s is the client-id of ports %s: delete the stale one in Neutron",
				p.Change.Port.GUID, strings.Join(holders, ", "))})
	}
	return out
}

// members groups the GUIDs of ports by their networks' partition keys.
func members(nets []Network, ports []Port) []PKeyMembers {
	guids := make(map[fabric.PKey][]fabric.GUID)
	for _, n := range nets {
		if _, ok := guids[n.PKey]; !ok {
			guids[n.PKey] = []fabric.GUID{}
		}
	}
	for _, p := range ports {
		guids[p.PKey] = append(guids[p.PKey], *p.Change.Port.GUID)
	}
	out := make([]PKeyMembers, 0, len(guids))
	for pkey, g := range guids {
		slices.Sort(g)
		out = append(out, PKeyMembers{PKey: pkey, GUIDs: slices.Compact(g)})
	}
	slices.SortFunc(out, func(a, b PKeyMembers) int { return cmp.Compare(a.PKey, b.PKey) })
	return out
}

func networkAbout(spec store.NetworkSpec) string {
	if spec.SegmentationID == nil {
		return fmt.Sprintf("%s on physnet %q", spec.Type, spec.PhysicalNetwork)
	}
	return fmt.Sprintf("%s %d on physnet %q", spec.Type, *spec.SegmentationID, spec.PhysicalNetwork)
}

func portAbout(c store.PortChange) string {
	guid := "no GUID"
	if c.Port.GUID != nil {
		guid = "GUID " + c.Port.GUID.String()
	}
	host := "unbound"
	if c.Port.Host != "" {
		host = "host " + c.Port.Host
	}
	return fmt.Sprintf("%s, %s, network %s", guid, host, c.Port.NetworkID)
}

// portID is the id of a port Neutron listed that does not decode, for its
// report.
func portID(raw json.RawMessage) string {
	var p struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &p) != nil || p.ID == "" {
		return "(no id)"
	}
	return p.ID
}

func sortFindings(f []Finding) {
	slices.SortFunc(f, func(a, b Finding) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID)) })
}
