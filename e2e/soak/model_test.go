package soak

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

func TestPartitionsOf(t *testing.T) {
	file, err := os.ReadFile("testdata/partitions.conf")
	if err != nil {
		t.Fatal(err)
	}
	got, err := partitionsOf(string(file))
	if err != nil {
		t.Fatal(err)
	}
	want := "0x0064:0x0002c90300000101,0x0002c90300000201;0x0065:;0x7ffe:0x0002c90300000301;"
	if got != want {
		t.Errorf("partitionsOf = %s, want %s", got, want)
	}
	for _, tc := range []struct{ name, file, mention string }{
		{"limited member", "a=0x0010, ipoib : 0x0002c90300000101=limited ;", "not full"},
		{"pkey twice", "a=0x0010 : ; b=0x0010 : ;", "two statements"},
		{"no colon", "a=0x0010 ;", "no ':'"},
		{"bad GUID", "a=0x0010 : 0x12z=full ;", "GUID"},
	} {
		if _, err := partitionsOf(tc.file); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.mention)
		}
	}
}

func vlan(v int64) *int64 { return &v }

// TestModel plays requests whose answers the store's rules decide, and checks
// the model's answers and the tables it renders.
func TestModel(t *testing.T) {
	h1, h2 := fabricsim.HostGUID(1), fabricsim.HostGUID(2)
	hosts := []fabric.GUID{h1, h2}
	const n1, n2, eth = "net-1", "net-2", "net-eth"
	bound := func(id, network string, g fabric.GUID) portRequest {
		return portRequest{ID: id, s: sent{Network: network, Host: "compute-1", DeviceOwner: "compute:nova",
			ClientID: "20:" + guidOctets(g), GUID: &g}}
	}
	steps := []struct {
		name   string
		do     func(m *Model) Expect
		status int
		tables map[fabric.GUID][]uint16 // after the step, when accepted
	}{
		{"VLAN network", func(m *Model) Expect {
			return m.PutNetwork(network{ID: n1, Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(101)})
		}, 202, map[fabric.GUID][]uint16{h1: {0x7fff}, h2: {0x7fff}}},
		{"same VLAN, other network", func(m *Model) Expect {
			return m.PutNetwork(network{ID: n2, Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(101)})
		}, 400, nil},
		{"same VLAN on another physnet", func(m *Model) Expect {
			return m.PutNetwork(network{ID: eth, Type: typeVLAN, Physnet: otherPhysnet, VLAN: vlan(101)})
		}, 202, nil},
		{"VLAN ID of the flat partition", func(m *Model) Expect {
			return m.PutNetwork(network{ID: n2, Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(0x7ffe)})
		}, 400, nil},
		{"no VLAN ID", func(m *Model) Expect {
			return m.PutNetwork(network{ID: n2, Type: typeVLAN, Physnet: ourPhysnet})
		}, 400, nil},
		{"port on n1", func(m *Model) Expect { return m.PutPort(bound("p1", n1, h1)) }, 202,
			map[fabric.GUID][]uint16{h1: {0x7fff, 0x8065}, h2: {0x7fff}}},
		{"flat network", func(m *Model) Expect { return m.PutNetwork(network{ID: n2, Type: typeFlat, Physnet: ourPhysnet}) }, 202, nil},
		{"same GUID on another network", func(m *Model) Expect { return m.PutPort(bound("p2", n2, h1)) }, 400, nil},
		{"same GUID, same network: it moves", func(m *Model) Expect { return m.PutPort(bound("p2", n1, h1)) }, 202,
			map[fabric.GUID][]uint16{h1: {0x7fff, 0x8065}, h2: {0x7fff}}},
		{"DELETE of the port that lost it", func(m *Model) Expect { g := h1; return m.DeletePort("p1", &g) }, 202,
			map[fabric.GUID][]uint16{h1: {0x7fff, 0x8065}, h2: {0x7fff}}},
		{"port on the flat network", func(m *Model) Expect { return m.PutPort(bound("p3", n2, h2)) }, 202,
			map[fabric.GUID][]uint16{h1: {0x7fff, 0x8065}, h2: {0x7fff, 0xfffe}}},
		{"stale DELETE", func(m *Model) Expect { g := h1; return m.DeletePort("p3", &g) }, 202,
			map[fabric.GUID][]uint16{h1: {0x7fff, 0x8065}, h2: {0x7fff, 0xfffe}}},
		{"port on an unknown network without client-id", func(m *Model) Expect {
			return m.PutPort(portRequest{ID: "p4", s: sent{Network: "nowhere", Host: "compute-1"}})
		}, 202, nil},
		{"DELETE of that port", func(m *Model) Expect { return m.DeletePort("p4", nil) }, 404, nil},
		{"bound port without client-id", func(m *Model) Expect {
			return m.PutPort(portRequest{ID: "p4", s: sent{Network: n1, Host: "compute-1", DeviceOwner: "compute:nova"}})
		}, 400, nil},
		{"DHCP port without client-id", func(m *Model) Expect {
			return m.PutPort(portRequest{ID: "p4", s: sent{Network: n1, Host: "compute-1", DeviceOwner: "network:dhcp"}})
		}, 202, nil},
		{"n1 moves to another physnet: its ports lose their GUIDs", func(m *Model) Expect {
			return m.PutNetwork(network{ID: n1, Type: typeVLAN, Physnet: otherPhysnet, VLAN: vlan(101)})
		}, 202, map[fabric.GUID][]uint16{h1: {0x7fff}, h2: {0x7fff, 0xfffe}}},
		{"and back: they stay without", func(m *Model) Expect {
			return m.PutNetwork(network{ID: n1, Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(102)})
		}, 202, map[fabric.GUID][]uint16{h1: {0x7fff}, h2: {0x7fff, 0xfffe}}},
		{"unbound port: no GUID", func(m *Model) Expect {
			r := bound("p2", n1, h1)
			r.s.Host = ""
			return m.PutPort(r)
		}, 202, map[fabric.GUID][]uint16{h1: {0x7fff}, h2: {0x7fff, 0xfffe}}},
		{"unusable client-id on a network without partition", func(m *Model) Expect {
			return m.PutPort(portRequest{ID: "p5", s: sent{Network: eth, Host: "compute-1", DeviceOwner: "compute:nova",
				ClientID: "20:fa:16", BadClientID: true}})
		}, 202, nil},
		{"that port unbound and moved to n1, as sent: its client-id is still unusable", func(m *Model) Expect {
			s := m.sent["p5"]
			s.Host, s.Network = "", n1
			return m.PutPort(portRequest{ID: "p5", s: s})
		}, 400, nil},
		{"delete the flat network and its port", func(m *Model) Expect { return m.DeleteNetwork(n2) }, 202,
			map[fabric.GUID][]uint16{h1: {0x7fff}, h2: {0x7fff}}},
		{"delete it again", func(m *Model) Expect { return m.DeleteNetwork(n2) }, 404, nil},
	}
	m := NewModel()
	for _, st := range steps {
		e := st.do(m)
		if e.Status != st.status {
			t.Fatalf("%s: model answers %d (%s), want %d", st.name, e.Status, e.Why, st.status)
		}
		e.Apply()
		if err := m.check(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for h, want := range st.tables {
			if got := m.Tables(hosts)[h]; !slices.Equal(got, want) {
				t.Errorf("%s: %s's table %s, want %s", st.name, h, hexKeys(got), hexKeys(want))
			}
		}
	}
}

// TestGeneratorSeeded: one seed gives one sequence, and the generator keeps
// the model's invariant whatever it draws.
func TestGeneratorSeeded(t *testing.T) {
	hosts := []fabric.GUID{fabricsim.HostGUID(1), fabricsim.HostGUID(2), fabricsim.HostGUID(3)}
	play := func(seed uint64) []string {
		m := NewModel()
		g := newGenerator(rand.New(rand.NewPCG(seed, 1)), m, hosts, true)
		var seq []string
		statuses := map[int]int{}
		for range 2000 {
			o := g.next()
			seq = append(seq, o.String()+o.Body)
			statuses[o.expect.Status]++
			if o.expect.Status == 202 {
				o.expect.Apply()
			}
			if err := m.check(); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []int{202, 400, 404} {
			if statuses[s] == 0 {
				t.Errorf("seed %d: no request the model answers %d", seed, s)
			}
		}
		return seq
	}
	if !slices.Equal(play(7), play(7)) {
		t.Error("seed 7 gave two different sequences")
	}
	if slices.Equal(play(7), play(8)) {
		t.Error("seeds 7 and 8 gave the same sequence")
	}
}

// After a restore-db, the database may hold a port the driver deleted since
// the backup: Neutron no longer has it, so the driver never sends it again,
// and a request built from its empty memory (no network) would be one no
// driver sends.
func TestGeneratorLeavesPortsTheDriverForgot(t *testing.T) {
	hosts := []fabric.GUID{fabricsim.HostGUID(1), fabricsim.HostGUID(2), fabricsim.HostGUID(3)}
	m := NewModel()
	g := newGenerator(rand.New(rand.NewPCG(3, 1)), m, hosts, true)
	var backup modelState
	for i := range 3000 {
		if i == 1000 {
			backup = m.snapshot()
		}
		if i == 2000 {
			m.restore(backup) // the driver's memory stays
		}
		o := g.next()
		if o.Method == "PUT" && strings.HasPrefix(o.Path, "/cloudx/Port/") && strings.Contains(o.Body, `"network_id":""`) {
			t.Fatalf("request %d: %s with no network: %s", i, o, o.Body)
		}
		if o.expect.Status == 202 {
			o.expect.Apply()
		}
	}
}

// TestStorageModel: the storage fabric's model keeps its own partitions, and
// refuses what the manager refuses across fabrics: a network or a port that
// would move between the storage fabric and the default one (which also
// holds the networks on no fabric).
func TestStorageModel(t *testing.T) {
	h1 := fabricsim.HostGUID(1)
	hosts := []fabric.GUID{h1}
	m := newModelOn(storagePhysnet)
	def := NewModel()
	bound := func(id, network string) portRequest {
		return portRequest{ID: id, s: sent{Network: network, Host: "compute-1", DeviceOwner: "compute:nova",
			ClientID: "20:" + guidOctets(h1), GUID: &h1}}
	}
	for _, step := range []struct {
		name   string
		do     func() Expect
		status int
	}{
		{"VLAN 101 on the default fabric", func() Expect {
			return def.PutNetwork(network{ID: "d", Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(101)})
		}, 202},
		{"VLAN 101 on storage too", func() Expect {
			return m.PutNetwork(network{ID: "s", Type: typeVLAN, Physnet: storagePhysnet, VLAN: vlan(101)})
		}, 202},
		{"the default fabric's network, on ibnet in storage's model", func() Expect {
			return m.PutNetwork(network{ID: "i", Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(102)})
		}, 202},
		{"a network on no fabric", func() Expect {
			return m.PutNetwork(network{ID: "e", Type: typeVLAN, Physnet: otherPhysnet, VLAN: vlan(101)})
		}, 202},
		{"the storage network moved to another physnet", func() Expect {
			return m.PutNetwork(network{ID: "s", Type: typeVLAN, Physnet: otherPhysnet, VLAN: vlan(101)})
		}, 400},
		{"the network on no fabric moved to storage", func() Expect {
			return m.PutNetwork(network{ID: "e", Type: typeVLAN, Physnet: storagePhysnet, VLAN: vlan(103)})
		}, 400},
		{"the network on no fabric moved to ibnet: the same fabric", func() Expect {
			return m.PutNetwork(network{ID: "e", Type: typeVLAN, Physnet: ourPhysnet, VLAN: vlan(104)})
		}, 202},
		{"the same GUID on both fabrics", func() Expect { return def.PutPort(bound("p1", "d")) }, 202},
		{"the same GUID on storage", func() Expect { return m.PutPort(bound("p2", "s")) }, 202},
		{"a storage port moved to the default fabric's network", func() Expect { return m.PutPort(bound("p2", "e")) }, 400},
	} {
		e := step.do()
		if e.Status != step.status {
			t.Fatalf("%s: %d (%s), want %d", step.name, e.Status, e.Why, step.status)
		}
		e.Apply()
	}
	if got := m.Partitions(); got != "0x0065:"+h1.String()+";0x7ffe:;" {
		t.Errorf("storage partitions %s", got)
	}
	if got := m.Tables(hosts)[h1]; !slices.Equal(got, []uint16{0x7fff, 0x8065}) {
		t.Errorf("storage table of H1 %#x, want [0x7fff 0x8065]", got)
	}
}
