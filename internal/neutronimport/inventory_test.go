package neutronimport

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// network is a Neutron network dictionary as Neutron's API lists it; vlan
// 0 is a null segmentation id.
func network(id, typ, physnet string, vlan int) json.RawMessage {
	seg := "null"
	if vlan != 0 {
		seg = fmt.Sprint(vlan)
	}
	return json.RawMessage(fmt.Sprintf(`{"id": %q, "name": "n", "status": "ACTIVE", "provider:network_type": %q,
		"provider:physical_network": %q, "provider:segmentation_id": %s, "mtu": 2044}`, id, typ, physnet, seg))
}

// port is a Neutron port dictionary; opt is the name of its client-id
// option ("client-id" or "61"), clientID "" gives it none.
func port(id, networkID, host, opt, clientID string) json.RawMessage {
	opts := "[]"
	if clientID != "" {
		opts = fmt.Sprintf(`[{"opt_name": %q, "opt_value": %q, "ip_version": 4}]`, opt, clientID)
	}
	return json.RawMessage(fmt.Sprintf(`{"id": %q, "network_id": %q, "binding:host_id": %q, "device_owner": "baremetal:none",
		"mac_address": "fa:16:3e:00:00:01", "extra_dhcp_opts": %s}`, id, networkID, host, opts))
}

const (
	guidA = "ff:00:00:00:00:00:02:00:00:02:c9:00:00:02:c9:03:00:00:00:0a"
	guidB = "ff:00:00:00:00:00:02:00:00:02:c9:00:00:02:c9:03:00:00:00:0b"
	// mlnx_infiniband's VM form: 20 octets, the GUID last.
	guidVM = "20:00:55:04:01:fe:80:00:00:00:00:00:00:00:fa:16:3e:00:00:0c"
)

// ibnetRules accept the networks of one InfiniBand physnet, ibnet.
var ibnetRules = store.Rules{PhysicalNetworks: []string{"ibnet"}}

// selectWant is what Select must make of one listing.
type selectWant struct {
	networks map[string]fabric.PKey // id -> partition
	ports    map[string]fabric.GUID // id -> GUID
	refused  []string               // "kind id" of each, with its reason containing the text after ": "
	skipped  []string
	ignored  int
	members  []PKeyMembers
}

// selectTests are Neutron listings and what Select makes of each.
var selectTests = []struct {
	name  string
	rules store.Rules
	nets  []json.RawMessage
	ports []json.RawMessage
	want  selectWant
}{{
	name:  "a VLAN network is its VLAN's partition; a port's GUID is its client-id's last 8 octets",
	rules: ibnetRules,
	nets:  []json.RawMessage{network("n1", "vlan", "ibnet", 150)},
	ports: []json.RawMessage{port("p1", "n1", "h1", "client-id", guidA), port("p2", "n1", "h2", "61", guidVM)},
	want: selectWant{networks: map[string]fabric.PKey{"n1": 0x96},
		ports:   map[string]fabric.GUID{"p1": 0x0002c9030000000a, "p2": 0x0000fa163e00000c},
		members: []PKeyMembers{{0x96, []fabric.GUID{0x0000fa163e00000c, 0x0002c9030000000a}}}},
}, {
	name:  "flat networks share [opensm] flat_pkey",
	rules: store.Rules{PhysicalNetworks: []string{"ibnet"}, FlatPKey: 0x7ff0},
	nets:  []json.RawMessage{network("f1", "flat", "ibnet", 0), network("f2", "flat", "ibnet", 0)},
	ports: []json.RawMessage{port("p1", "f1", "h1", "client-id", guidA), port("p2", "f2", "h2", "client-id", guidB)},
	want: selectWant{networks: map[string]fabric.PKey{"f1": 0x7ff0, "f2": 0x7ff0},
		ports:   map[string]fabric.GUID{"p1": 0x0002c9030000000a, "p2": 0x0002c9030000000b},
		members: []PKeyMembers{{0x7ff0, []fabric.GUID{0x0002c9030000000a, 0x0002c9030000000b}}}},
}, {
	name:  "networks off the InfiniBand physnets, or not VLAN or flat, and their ports are not ours",
	rules: ibnetRules,
	nets: []json.RawMessage{network("eth", "vlan", "ethnet", 150), network("vx", "vxlan", "", 0),
		network("n1", "vlan", "ibnet", 151)},
	ports: []json.RawMessage{port("p1", "eth", "h1", "client-id", guidA), port("p2", "vx", "h2", "client-id", guidB)},
	want: selectWant{networks: map[string]fabric.PKey{"n1": 0x97}, ignored: 4,
		members: []PKeyMembers{{0x97, []fabric.GUID{}}}},
}, {
	name:  "[api] physical_networks = * takes every physnet",
	rules: store.Rules{PhysicalNetworks: []string{"*"}},
	nets:  []json.RawMessage{network("eth", "vlan", "ethnet", 150)},
	want: selectWant{networks: map[string]fabric.PKey{"eth": 0x96},
		members: []PKeyMembers{{0x96, []fabric.GUID{}}}},
}, {
	name:  "ports without a client-id are not imported",
	rules: ibnetRules,
	nets:  []json.RawMessage{network("n1", "vlan", "ibnet", 150)},
	ports: []json.RawMessage{port("dhcp", "n1", "h1", "", ""), port("p1", "n1", "", "client-id", guidA)},
	want: selectWant{networks: map[string]fabric.PKey{"n1": 0x96}, ports: map[string]fabric.GUID{"p1": 0x0002c9030000000a},
		ignored: 1, members: []PKeyMembers{{0x96, []fabric.GUID{0x0002c9030000000a}}}},
}, {
	name:  "a client-id that is not a GUID is refused, as the API refuses it",
	rules: ibnetRules,
	nets:  []json.RawMessage{network("n1", "vlan", "ibnet", 150)},
	ports: []json.RawMessage{port("p1", "n1", "h1", "client-id", "not-a-client-id"), port("p2", "n1", "h1", "client-id", "01:02:03")},
	want: selectWant{networks: map[string]fabric.PKey{"n1": 0x96},
		refused: []string{"port p1: its client-id cannot give a GUID", "port p2: its client-id cannot give a GUID"},
		members: []PKeyMembers{{0x96, []fabric.GUID{}}}},
}, {
	name:  "a network whose VLAN cannot be a pkey is refused, and its ports skipped",
	rules: store.Rules{PhysicalNetworks: []string{"ibnet"}},
	nets:  []json.RawMessage{network("n1", "vlan", "ibnet", 0x7ffe), network("n2", "vlan", "ibnet", 4094)},
	ports: []json.RawMessage{port("p1", "n1", "h1", "client-id", guidA)},
	want: selectWant{networks: map[string]fabric.PKey{"n2": 0xffe},
		refused: []string{"network n1: VLAN ID 32766 is the flat networks' partition key"},
		skipped: []string{"port p1: its network n1 is refused"},
		members: []PKeyMembers{{0xffe, []fabric.GUID{}}}},
}, {
	name:  "two ports with one GUID are both skipped, yet Neutron's ports claim it",
	rules: ibnetRules,
	nets:  []json.RawMessage{network("n1", "vlan", "ibnet", 150), network("n2", "vlan", "ibnet", 151)},
	ports: []json.RawMessage{port("p1", "n1", "h1", "client-id", guidA), port("p2", "n2", "h1", "client-id", guidA),
		port("p3", "n2", "h2", "client-id", guidB)},
	want: selectWant{networks: map[string]fabric.PKey{"n1": 0x96, "n2": 0x97},
		ports: map[string]fabric.GUID{"p3": 0x0002c9030000000b},
		skipped: []string{"port p1: GUID 0x0002c9030000000a is the client-id of ports p1, p2",
			"port p2: GUID 0x0002c9030000000a is the client-id of ports p1, p2"},
		members: []PKeyMembers{{0x96, []fabric.GUID{0x0002c9030000000a}},
			{0x97, []fabric.GUID{0x0002c9030000000a, 0x0002c9030000000b}}}},
}, {
	name:  "a port whose network was not listed (created meanwhile) is skipped",
	rules: ibnetRules,
	ports: []json.RawMessage{port("p1", "later", "h1", "client-id", guidA)},
	want: selectWant{skipped: []string{"port p1: its network later was not listed"},
		members: []PKeyMembers{}},
}}

func TestSelect(t *testing.T) {
	for _, tt := range selectTests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := Select(Listing{Networks: tt.nets, Ports: tt.ports}, tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			nets := map[string]fabric.PKey{}
			for _, n := range inv.Networks {
				nets[n.Spec.ID] = n.PKey
			}
			ports := map[string]fabric.GUID{}
			for _, p := range inv.Ports {
				ports[p.Change.Port.ID] = *p.Change.Port.GUID
			}
			if !reflect.DeepEqual(nets, orEmpty(tt.want.networks)) {
				t.Errorf("networks %v, want %v", nets, tt.want.networks)
			}
			if !reflect.DeepEqual(ports, orEmpty(tt.want.ports)) {
				t.Errorf("ports %v, want %v", ports, tt.want.ports)
			}
			checkFindings(t, "refused", inv.Refused, tt.want.refused)
			checkFindings(t, "skipped", inv.Skipped, tt.want.skipped)
			if inv.Ignored != tt.want.ignored {
				t.Errorf("ignored %d, want %d", inv.Ignored, tt.want.ignored)
			}
			if !reflect.DeepEqual(inv.Members(), tt.want.members) {
				t.Errorf("members %v, want %v", inv.Members(), tt.want.members)
			}
		})
	}
}

func orEmpty[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

// checkFindings checks each finding against want's "kind id: part of the
// reason", in order.
func checkFindings(t *testing.T, what string, got []Finding, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %v, want %d: %v", what, got, len(want), want)
		return
	}
	for i, f := range got {
		head, reason, _ := strings.Cut(want[i], ": ")
		if f.Kind+" "+f.ID != head || !strings.Contains(f.Reason, reason) {
			t.Errorf("%s[%d] = %s, want %s", what, i, f, want[i])
		}
	}
}

// TestSelectRefusesHiddenProviderAttributes: a credential that may not read
// provider attributes sees networks with no type; importing them as
// untyped would list every recorded network as one Neutron lacks.
func TestSelectRefusesHiddenProviderAttributes(t *testing.T) {
	_, err := Select(Listing{Networks: []json.RawMessage{json.RawMessage(`{"id": "n1", "name": "n"}`)}},
		store.Rules{PhysicalNetworks: []string{"ibnet"}})
	if err == nil || !strings.Contains(err.Error(), "may not read provider attributes") {
		t.Errorf("a network without provider attributes: %v, want an error saying the credential may not read them", err)
	}
}
