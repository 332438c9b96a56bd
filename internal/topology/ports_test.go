package topology

import (
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The real dump's ports: every end of every link, once, with the node's
// system GUID, description, LID and the link's state.
func TestPorts(t *testing.T) {
	top := load(t, "good/ibsim-5-hosts-2-switches.lst")
	ports := top.Ports()
	byKey := map[nodePort]Port{}
	hosts := 0
	for _, p := range ports {
		byKey[nodePort{p.NodeGUID, p.Number}] = p
		if p.Host {
			hosts++
		}
	}
	// 6 host ports (5 hosts and the SM's HCA), S1's 1-4 and 8, S2's 1, 2 and 7.
	if len(ports) != 14 || len(byKey) != 14 || hosts != 6 {
		t.Fatalf("Ports() = %d ports (%d distinct, %d hosts), want 14 (14, 6): %+v", len(ports), len(byKey), hosts, ports)
	}
	for _, want := range []Port{
		{GUID: 0x0002c90300000101, NodeGUID: 0x0002c90300000100, SystemGUID: 0x0002c90300000100, Number: 1, Host: true,
			Kind: "CA", Description: "H1", LID: 3, LinkState: "ACT"},
		{GUID: 0x0002c90300f00001, NodeGUID: 0x0002c90300f00001, SystemGUID: 0x0002c90300f00001, Number: 8,
			Kind: "SW", Description: "S1", LID: 2, LinkState: "ACT"},
	} {
		if got := byKey[nodePort{want.NodeGUID, want.Number}]; got != want {
			t.Errorf("port %s:%d = %+v, want %+v", want.NodeGUID, want.Number, got, want)
		}
	}
	for i := 1; i < len(ports); i++ {
		if ports[i-1].GUID > ports[i].GUID {
			t.Errorf("Ports() not in GUID order at %d: %s after %s", i, ports[i].GUID, ports[i-1].GUID)
		}
	}
	if _, ok := byKey[nodePort{fabric.GUID(0x0002c90300f00002), 3}]; ok {
		t.Error("S2 port 3 has no link, but Ports() lists it")
	}
}
