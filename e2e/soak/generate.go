package soak

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// op is one request as networking-mlnx sends it, with what the model expects.
type op struct {
	Kind         string // what the generator meant: "create VLAN network", ...
	Method, Path string
	Body         string
	expect       Expect
}

func (o op) String() string { return fmt.Sprintf("%s %s (%s)", o.Method, o.Path, o.Kind) }

// generator draws requests from a seeded source against the model.
type generator struct {
	rng   *rand.Rand
	model *Model
	hosts []fabric.GUID
	nets  []string // the network IDs it draws from
	ports []string // the port IDs it draws from
}

// newGenerator draws from 8 network IDs; with collide, two of them share
// their first 27 characters (which partition names keep).
func newGenerator(rng *rand.Rand, model *Model, hosts []fabric.GUID, collide bool) *generator {
	g := &generator{rng: rng, model: model, hosts: hosts}
	for i := range 6 {
		g.nets = append(g.nets, fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", 0x3b9d6a52+i, 0x7c1e, i, i, 0x5a8c4b1f6e73+i))
	}
	if collide {
		g.nets = append(g.nets, "0c4e2a1d-1111-4a7b-8c9d-0e1f2a3b4c5d", "0c4e2a1d-1111-4a7b-8c9d-0e1f2a3b4c5e")
	} else {
		g.nets = append(g.nets, "0c4e2a1d-1111-4a7b-8c9d-0e1f2a3b4c5d", "1c4e2a1d-1111-4a7b-8c9d-0e1f2a3b4c5e")
	}
	for i := range 24 {
		g.ports = append(g.ports, fmt.Sprintf("a%07x-9a7d-4b6e-8c1f-2d4a6b8e%04x", i, i))
	}
	return g
}

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

// vlans are few, so that networks collide on them.
var vlans = []int64{101, 102, 103, 104, 105, 106, 107, 1}

func (g *generator) next() op {
	switch w := g.rng.IntN(100); {
	case w < 16:
		return g.createNetwork()
	case w < 26:
		return g.updateNetwork()
	case w < 31:
		return g.deleteNetwork()
	case w < 56:
		return g.createPort()
	case w < 66:
		return g.movePort()
	case w < 76:
		return g.changeClientID()
	case w < 84:
		return g.unbindPort()
	default:
		return g.deletePort()
	}
}

func (g *generator) knownNetworks() []string {
	var ids []string
	for _, id := range g.nets {
		if _, ok := g.model.networks[id]; ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// knownPorts are the ports both recorded and known to the driver: after a
// restore-db the database may hold a port the driver has since deleted,
// which Neutron no longer has and never sends again.
func (g *generator) knownPorts() []string {
	var ids []string
	for _, id := range g.ports {
		_, recorded := g.model.ports[id]
		_, sent := g.model.sent[id]
		if recorded && sent {
			ids = append(ids, id)
		}
	}
	return ids
}

func (g *generator) randomNetwork(id string) (network, string) {
	v := pick(g.rng, vlans)
	switch w := g.rng.IntN(100); {
	case w < 70:
		return network{ID: id, Type: typeVLAN, Physnet: g.model.physnet, VLAN: &v}, "VLAN network"
	case w < 80:
		return network{ID: id, Type: typeFlat, Physnet: g.model.physnet}, "flat network"
	case w < 88:
		return network{ID: id, Type: typeVLAN, Physnet: otherPhysnet, VLAN: &v}, "VLAN network on another physnet"
	case w < 92:
		return network{ID: id, Type: typeVXLAN, VLAN: &v}, "VXLAN network"
	case w < 95:
		return network{ID: id, Type: typeVLAN, Physnet: g.model.physnet}, "VLAN network without VLAN ID (refused)"
	default:
		bad := pick(g.rng, []int64{0, 0x7ffe, 0x7fff, 4096 * 8, -1})
		return network{ID: id, Type: typeVLAN, Physnet: g.model.physnet, VLAN: &bad}, fmt.Sprintf("VLAN network with VLAN ID %d (refused)", bad)
	}
}

func (g *generator) createNetwork() op {
	n, what := g.randomNetwork(pick(g.rng, g.nets))
	method, path := "POST", "/cloudx/Network"
	if n.Type == typeFlat || g.rng.IntN(4) == 0 {
		// The driver never POSTs a flat network: the manager learns of it from a PUT.
		method, path = "PUT", "/cloudx/Network/"+n.ID
	}
	return op{Kind: "create " + what, Method: method, Path: path, Body: networkBody(n), expect: g.model.PutNetwork(n)}
}

func (g *generator) updateNetwork() op {
	known := g.knownNetworks()
	if len(known) == 0 {
		return g.createNetwork()
	}
	id := pick(g.rng, known)
	n := g.model.networks[id]
	what := "update network"
	switch g.rng.IntN(4) {
	case 0: // a rename: nothing the fabric sees
		what = "rename network"
	case 1:
		v := pick(g.rng, vlans)
		n.VLAN, what = &v, fmt.Sprintf("network to VLAN %d", v)
	default:
		n, what = g.randomNetwork(id)
		what = "network becomes " + what
	}
	return op{Kind: what, Method: "PUT", Path: "/cloudx/Network/" + id, Body: networkBody(n), expect: g.model.PutNetwork(n)}
}

func (g *generator) deleteNetwork() op {
	id := pick(g.rng, g.nets)
	n, ok := g.model.networks[id]
	if !ok {
		v := int64(101)
		n = network{ID: id, Type: typeVLAN, Physnet: g.model.physnet, VLAN: &v}
	}
	return op{Kind: "delete network", Method: "DELETE", Path: "/cloudx/Network/" + id, Body: networkBody(n),
		expect: g.model.DeleteNetwork(id)}
}

// portFor draws a port's fields: a host's GUID in one of the client-id
// forms, bound, as Ironic or Nova sends it; now and then one the manager
// must refuse or take without a GUID.
func (g *generator) portFor(id, networkID string) (portRequest, string) {
	guid := pick(g.rng, g.hosts)
	r := portRequest{ID: id, s: sent{Network: networkID, Host: "compute-" + guid.String()[14:], DeviceOwner: "compute:nova",
		GUID: &guid}}
	what := "VM port"
	if g.rng.IntN(2) == 0 {
		r.s.ClientID, r.s.DeviceOwner, what = vendorClientID(guid), "baremetal:none", "baremetal port"
	} else {
		r.s.ClientID = "20:" + guidOctets(guid)
	}
	switch w := g.rng.IntN(100); {
	case w < 4:
		r.s.ClientID, r.s.GUID, what = "", nil, "bound port without client-id"
	case w < 7:
		r.s.ClientID, r.s.GUID, r.s.BadClientID, what = "20:fa:16", nil, true, "port with an unusable client-id"
	case w < 10:
		r.s.ClientID, r.s.GUID, r.s.DeviceOwner, what = "", nil, "network:dhcp", "DHCP port"
	case w < 14:
		r.s.Host, what = "", "unbound "+what
	}
	return r, what
}

func (g *generator) portOp(kind, method string, r portRequest) op {
	path := "/cloudx/Port"
	if method == "PUT" {
		path += "/" + r.ID
	}
	return op{Kind: kind, Method: method, Path: path, Body: portBody(r), expect: g.model.PutPort(r)}
}

func (g *generator) createPort() op {
	var id string
	for range 10 {
		if id = pick(g.rng, g.ports); g.model.ports[id] == nil {
			break
		}
	}
	networkID := pick(g.rng, g.nets)
	if known := g.knownNetworks(); len(known) > 0 && g.rng.IntN(10) > 0 {
		networkID = pick(g.rng, known)
	}
	r, what := g.portFor(id, networkID)
	method := "POST"
	if g.rng.IntN(3) == 0 {
		method = "PUT" // Nova binding an existing port
	}
	return g.portOp("create "+what, method, r)
}

func (g *generator) existingPort() (string, sent, bool) {
	known := g.knownPorts()
	if len(known) == 0 {
		return "", sent{}, false
	}
	id := pick(g.rng, known)
	return id, g.model.sent[id], true
}

func (g *generator) movePort() op {
	id, s, ok := g.existingPort()
	known := g.knownNetworks()
	if !ok || len(known) == 0 {
		return g.createPort()
	}
	s.Network = pick(g.rng, known)
	if s.Host == "" && s.GUID != nil {
		s.Host = "compute-" + s.GUID.String()[14:]
	}
	return g.portOp("move port to another network", "PUT", portRequest{ID: id, s: s})
}

func (g *generator) changeClientID() op {
	id, s, ok := g.existingPort()
	if !ok {
		return g.createPort()
	}
	r, what := g.portFor(id, s.Network)
	return g.portOp("client-id change ("+what+")", "PUT", r)
}

func (g *generator) unbindPort() op {
	id, s, ok := g.existingPort()
	if !ok {
		return g.createPort()
	}
	if g.rng.IntN(2) == 0 {
		// The driver's unbind: a DELETE with the port as it was.
		return op{Kind: "unbind port (DELETE)", Method: "DELETE", Path: "/cloudx/Port/" + id,
			Body: portBody(portRequest{ID: id, s: s}), expect: g.model.DeletePort(id, s.GUID)}
	}
	s.Host = ""
	return g.portOp("unbind port (host cleared)", "PUT", portRequest{ID: id, s: s})
}

func (g *generator) deletePort() op {
	id, s, ok := g.existingPort()
	switch w := g.rng.IntN(100); {
	case !ok || w < 8:
		id = pick(g.rng, g.ports)
		s, ok = g.model.sent[id]
		if !ok {
			guid := pick(g.rng, g.hosts)
			s = sent{Network: pick(g.rng, g.nets), Host: "compute-x", DeviceOwner: "compute:nova",
				ClientID: "20:" + guidOctets(guid), GUID: &guid}
		}
		return op{Kind: "delete port", Method: "DELETE", Path: "/cloudx/Port/" + id,
			Body: portBody(portRequest{ID: id, s: s}), expect: g.model.DeletePort(id, s.GUID)}
	case w < 14:
		// A late DELETE naming a GUID the port no longer holds.
		others := slices.DeleteFunc(slices.Clone(g.hosts), func(h fabric.GUID) bool { return s.GUID != nil && h == *s.GUID })
		guid := pick(g.rng, others)
		s.GUID, s.ClientID = &guid, "20:"+guidOctets(guid)
		return op{Kind: "stale port DELETE (another GUID)", Method: "DELETE", Path: "/cloudx/Port/" + id,
			Body: portBody(portRequest{ID: id, s: s}), expect: g.model.DeletePort(id, s.GUID)}
	}
	return op{Kind: "delete port", Method: "DELETE", Path: "/cloudx/Port/" + id,
		Body: portBody(portRequest{ID: id, s: s}), expect: g.model.DeletePort(id, s.GUID)}
}

// networkBody is a Neutron network dictionary, with some of the keys the
// manager ignores.
func networkBody(n network) string {
	seg := any(nil)
	if n.VLAN != nil && n.Type != typeFlat {
		seg = *n.VLAN
	}
	physnet := any(n.Physnet)
	if n.Physnet == "" {
		physnet = nil
	}
	b, _ := json.Marshal(map[string]any{
		"id": n.ID, "name": "net-" + n.ID[:8], "tenant_id": "6f0e3c2a9b8d4e71a5c4d3b2a1f09e8d", "admin_state_up": true,
		"mtu": 2044, "status": "ACTIVE", "subnets": []string{}, "shared": false,
		"provider:network_type": n.Type, "provider:physical_network": physnet, "provider:segmentation_id": seg,
		"network_qos_policy": nil,
	})
	return string(b)
}

// portBody is a Neutron port dictionary as networking-mlnx sends it.
func portBody(r portRequest) string {
	opts := []map[string]any{}
	if r.s.ClientID != "" {
		opts = append(opts, map[string]any{"opt_name": "client-id", "opt_value": r.s.ClientID, "ip_version": 4})
	}
	vnic := "direct"
	if r.s.DeviceOwner == "baremetal:none" {
		vnic = "baremetal"
	}
	b, _ := json.Marshal(map[string]any{
		"id": r.ID, "name": "", "network_id": r.s.Network, "tenant_id": "6f0e3c2a9b8d4e71a5c4d3b2a1f09e8d",
		"mac_address": "fa:16:3e:5b:7c:1d", "admin_state_up": true, "status": "DOWN", "device_owner": r.s.DeviceOwner,
		"device_id": "0d9e8f7a-6b5c-4d3e-8f1a-0b9c8d7e6f54", "binding:vnic_type": vnic, "binding:host_id": r.s.Host,
		"extra_dhcp_opts": opts, "network_qos_policy": nil,
	})
	return string(b)
}

func guidOctets(g fabric.GUID) string {
	o := make([]string, 8)
	for i := range 8 {
		o[i] = fmt.Sprintf("%02x", byte(uint64(g)>>(8*(7-i))))
	}
	return strings.Join(o, ":")
}

// vendorClientID is the 20-octet client-id form Ironic uses.
func vendorClientID(g fabric.GUID) string {
	return "ff:00:00:00:00:00:02:00:00:02:c9:00:" + guidOctets(g)
}
