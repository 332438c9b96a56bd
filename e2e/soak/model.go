package soak

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The model's configuration, which the rig writes into afm.conf.
const (
	ourPhysnet   = "ibnet"  // [api] physical_networks
	otherPhysnet = "ethnet" // a physical network the manager leaves alone
	flatPKey     = 0x7ffe   // [opensm] flat_pkey, the default
	defaultPKey  = 0x7fff   // the default partition: every host a limited member
	fullBit      = 0x8000
)

// Network types as Neutron names them.
const (
	typeVLAN  = "vlan"
	typeFlat  = "flat"
	typeVXLAN = "vxlan"
)

// network is a network as the manager records it.
type network struct {
	ID, Type, Physnet string
	VLAN              *int64
}

// manages says whether the network has a partition on the model's fabric
// (the store's rule: a VLAN or flat network on one of the fabric's
// physical_networks).
func (m *Model) manages(n network) bool {
	return (n.Type == typeVLAN || n.Type == typeFlat) && n.Physnet == m.physnet
}

// fabricOf names the fabric a physical network is routed to, by the model's
// physnet: the model's own, or the default fabric's, which the manager also
// records networks on no fabric on. On the default fabric all are one.
func (m *Model) fabricOf(physnet string) string {
	if physnet == m.physnet {
		return m.physnet
	}
	return ourPhysnet
}

// pkey is the partition key of a managed network: its VLAN ID, or the flat one.
func (n network) pkey() uint16 {
	if n.Type == typeFlat {
		return flatPKey
	}
	return uint16(*n.VLAN)
}

// port is a port as the manager records it.
type port struct {
	ID, Network, Host string
	GUID              *fabric.GUID // the GUID it holds in its network's partition
}

// sent is what the driver last sent for a port: a DELETE repeats it.
type sent struct {
	Network, Host, DeviceOwner string
	ClientID                   string // the option's value, "" for none
	GUID                       *fabric.GUID
	// BadClientID: ClientID holds no usable GUID. A move or an unbind sends
	// the port again with its client-id, which the store refuses on a
	// network with a partition whether or not the port is bound.
	BadClientID bool
}

// Model is the recorded state as the answers (202 / 400 / 404) make it. It
// never reads the manager: each accepted request changes it as the store's
// rules say the request changes the database.
type Model struct {
	physnet  string // the physical network of the model's fabric
	networks map[string]network
	ports    map[string]*port
	// sent is the driver's memory of each port it sent, recorded or not.
	sent map[string]sent
}

// NewModel returns the model of an empty database on the default fabric.
func NewModel() *Model { return newModelOn(ourPhysnet) }

// newModelOn is the model of one fabric, serving physnet: each fabric's
// partitions are its own (the same VLAN ID and host GUID on two fabrics).
func newModelOn(physnet string) *Model {
	return &Model{physnet: physnet, networks: map[string]network{}, ports: map[string]*port{}, sent: map[string]sent{}}
}

// Expect is what the model says a request must be answered, and what it
// changes when accepted (apply).
type Expect struct {
	Status int    // 202, 400 or 404
	Why    string // for a refusal: the rule
	apply  func()
}

func accept(apply func()) Expect { return Expect{Status: 202, apply: apply} }
func refuse(why string) Expect   { return Expect{Status: 400, Why: why} }
func notFound(why string) Expect { return Expect{Status: 404, Why: why} }

// Apply records an accepted request in the model.
func (e Expect) Apply() {
	if e.apply != nil {
		e.apply()
	}
}

// PutNetwork is POST or PUT of a network: both make it so.
func (m *Model) PutNetwork(n network) Expect {
	if before, known := m.networks[n.ID]; known && m.fabricOf(before.Physnet) != m.fabricOf(n.Physnet) {
		return refuse("a network cannot move between fabrics")
	}
	if m.manages(n) && n.Type == typeVLAN {
		switch {
		case n.VLAN == nil:
			return refuse("VLAN network without provider:segmentation_id")
		case *n.VLAN < 1 || *n.VLAN > int64(fabric.MaxNetworkPKey):
			return refuse(fmt.Sprintf("VLAN ID %d out of 1..0x7ffe", *n.VLAN))
		case *n.VLAN == flatPKey:
			return refuse("VLAN ID is the flat partition's key")
		}
		for _, o := range m.networks {
			if o.ID != n.ID && m.manages(o) && o.pkey() == n.pkey() && o.Type == typeVLAN {
				return refuse(fmt.Sprintf("VLAN ID %d is network %s's partition", *n.VLAN, o.ID))
			}
		}
	}
	return accept(func() {
		before, known := m.networks[n.ID]
		m.networks[n.ID] = n
		if known && m.manages(before) && !m.manages(n) {
			for _, p := range m.ports {
				if p.Network == n.ID {
					p.GUID = nil
				}
			}
		}
	})
}

// DeleteNetwork deletes a network and its ports.
func (m *Model) DeleteNetwork(id string) Expect {
	if _, ok := m.networks[id]; !ok {
		return notFound("network not recorded")
	}
	return accept(func() {
		delete(m.networks, id)
		for pid, p := range m.ports {
			if p.Network == id {
				delete(m.ports, pid)
			}
		}
	})
}

// portRequest is a POST or PUT of a port as the generator builds it.
type portRequest struct {
	ID string
	s  sent
}

// PutPort is POST or PUT of a port (the store's RecordPort).
func (m *Model) PutPort(r portRequest) Expect {
	remember := func() { m.sent[r.ID] = r.s }
	n, known := m.networks[r.s.Network]
	if !known {
		if r.s.GUID == nil && !r.s.BadClientID {
			return accept(remember) // nothing to do: not recorded
		}
		return refuse("network unknown")
	}
	if o, recorded := m.ports[r.ID]; recorded && m.fabricOf(m.networks[o.Network].Physnet) != m.fabricOf(n.Physnet) {
		return refuse("a port cannot move between fabrics")
	}
	p := port{ID: r.ID, Network: r.s.Network, Host: r.s.Host, GUID: r.s.GUID}
	record := func() {
		remember()
		if p.GUID != nil {
			for _, o := range m.ports {
				if o.ID != p.ID && o.GUID != nil && *o.GUID == *p.GUID {
					o.GUID = nil // same network: the GUID moves to this port
				}
			}
		}
		m.ports[p.ID] = &p
	}
	if !m.manages(n) {
		p.GUID = nil
		return accept(record)
	}
	switch {
	case r.s.BadClientID:
		return refuse("unusable client-id")
	case p.GUID == nil && p.Host != "" && !strings.HasPrefix(r.s.DeviceOwner, "network:"):
		return refuse("bound port without client-id")
	case p.GUID == nil:
		return accept(record)
	case p.Host == "":
		p.GUID = nil
		return accept(record)
	}
	for _, o := range m.ports {
		if o.ID != p.ID && o.GUID != nil && *o.GUID == *p.GUID && o.Network != p.Network {
			return refuse(fmt.Sprintf("GUID %s is in network %s's partition", p.GUID, o.Network))
		}
	}
	return accept(record)
}

// DeletePort is a DELETE of a port whose body carries guid (nil: none).
func (m *Model) DeletePort(id string, guid *fabric.GUID) Expect {
	p, ok := m.ports[id]
	if !ok {
		return notFound("port not recorded")
	}
	if guid != nil && p.GUID != nil && *guid != *p.GUID {
		return accept(func() {}) // a stale DELETE: the port keeps its current GUID
	}
	return accept(func() { delete(m.ports, id); delete(m.sent, id) })
}

// Tables is what every host's pkey table holds: its non-zero entries, full
// membership bit included, sorted.
type Tables map[fabric.GUID][]uint16

// Tables renders the model onto the hosts.
func (m *Model) Tables(hosts []fabric.GUID) Tables {
	t := Tables{}
	for _, h := range hosts {
		t[h] = []uint16{defaultPKey}
	}
	for _, p := range m.ports {
		if p.GUID == nil {
			continue
		}
		n := m.networks[p.Network]
		if _, onFabric := t[*p.GUID]; onFabric && m.manages(n) {
			t[*p.GUID] = append(t[*p.GUID], fullBit|n.pkey())
		}
	}
	for h := range t {
		slices.Sort(t[h])
	}
	return t
}

// Partitions is the model's partitions file in short: each partition's key
// and its members, in one string (the flat partition always exists).
func (m *Model) Partitions() string {
	members := map[uint16][]string{flatPKey: nil}
	for _, n := range m.networks {
		if m.manages(n) {
			members[n.pkey()] = members[n.pkey()]
		}
	}
	for _, p := range m.ports {
		if p.GUID != nil && m.manages(m.networks[p.Network]) {
			k := m.networks[p.Network].pkey()
			members[k] = append(members[k], p.GUID.String())
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(members)) {
		sort.Strings(members[k])
		fmt.Fprintf(&b, "0x%04x:%s;", k, strings.Join(members[k], ","))
	}
	return b.String()
}

// check verifies the model's own invariant: a GUID is held by one port at most.
func (m *Model) check() error {
	holders := map[fabric.GUID]string{}
	for _, p := range m.ports {
		if p.GUID == nil {
			continue
		}
		if o, ok := holders[*p.GUID]; ok {
			return fmt.Errorf("model: GUID %s held by ports %s and %s", p.GUID, o, p.ID)
		}
		holders[*p.GUID] = p.ID
	}
	return nil
}

func hexKeys(keys []uint16) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = fmt.Sprintf("0x%04x", k)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// modelState is the recorded part of the model (not the driver's memory of
// what it sent), as a database backup holds it.
type modelState struct {
	networks map[string]network
	ports    map[string]port
}

// snapshot copies the recorded state.
func (m *Model) snapshot() modelState {
	s := modelState{networks: maps.Clone(m.networks), ports: map[string]port{}}
	for id, p := range m.ports {
		s.ports[id] = *p
	}
	return s
}

// recorded is s as the manager records it: a network without a VLAN
// partition (not the fabric's, or flat) keeps no VLAN ID.
func (m *Model) recorded(s modelState) modelState {
	networks := maps.Clone(s.networks)
	for id, n := range networks {
		if !m.manages(n) || n.Type == typeFlat {
			n.VLAN = nil
			networks[id] = n
		}
	}
	return modelState{networks: networks, ports: s.ports}
}

// restore puts a snapshot's recorded state back, as restoring the backup
// does to the database; the driver's memory stays.
func (m *Model) restore(s modelState) {
	m.networks = maps.Clone(s.networks)
	m.ports = map[string]*port{}
	for id, p := range s.ports {
		m.ports[id] = &p
	}
}
