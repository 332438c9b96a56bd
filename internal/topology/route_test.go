package topology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The directed routes of the real dump, from the SM's HCA (S1 port 1): the
// hosts on S1 one switch away, S2 behind S1's port 8, its hosts behind S2.
func TestRoutesRealDump(t *testing.T) {
	top := load(t, "good/ibsim-5-hosts-2-switches.lst")
	for guid, want := range map[fabric.GUID]string{
		0x0002c90300a00001: "0",       // the SM's own port
		0x0002c90300f00001: "0,1",     // S1
		0x0002c90300000101: "0,1,2",   // H1
		0x0002c90300000501: "0,1,4",   // H5
		0x0002c90300f00002: "0,1,8",   // S2
		0x0002c90300000201: "0,1,8,1", // H2
		0x0002c90300000401: "0,1,8,2", // H4
	} {
		route, ok := top.Route(guid)
		if got := RouteString(route); !ok || got != want {
			t.Errorf("Route(%s) = %s, %v; want %s", guid, got, ok, want)
		}
	}
	// A node GUID of an HCA is no port; a GUID the dump lacks has no route.
	for _, g := range []fabric.GUID{0x0002c90300000100, 0x0002c90300000601} {
		if route, ok := top.Route(g); ok {
			t.Errorf("Route(%s) = %s, want none", g, RouteString(route))
		}
	}
}

// A switch marked -SM starts the routes at itself (the empty route); a CA
// reached only through another CA, or a router, has no route (only switches
// forward).
func TestRoutesEdgeCases(t *testing.T) {
	top := load(t, "good/edge-cases.lst")
	if route, ok := top.Route(0x248a0703009a0b0d); !ok || route != "" {
		t.Errorf("the SM's switch: %q, %v; want the empty route", route, ok)
	}
	for _, g := range []fabric.GUID{0x0002c90300000102, 0x0002c90300000301, 0x0002c90300000901} {
		if route, ok := top.Route(g); ok {
			t.Errorf("Route(%s) = %s, want none", g, RouteString(route))
		}
	}
}

// A chain longer than a directed route's 63 hops: the switches up to the
// 62nd from the SM's are reached, the ones past it are not.
func TestRoutesLongChain(t *testing.T) {
	var b strings.Builder
	ca := func(guid uint64, sm string, desc string, pn int) string {
		return "{ CA" + sm + " Ports:01 SystemGUID:" + hex16(guid-1) + " NodeGUID:" + hex16(guid-1) + " PortGUID:" + hex16(guid) +
			" VenID:000000 DevID:0000 Rev:000000A1 {" + desc + "} LID:0001 PN:" + hex2(pn) + " }"
	}
	sw := func(k int, pn int) string {
		g := hex16(0x0002c90300f00000 + uint64(k))
		return "{ SW Ports:03 SystemGUID:" + g + " NodeGUID:" + g + " PortGUID:" + g +
			" VenID:000000 DevID:0000 Rev:000000A1 {S} LID:" + hex4(k+1) + " PN:" + hex2(pn) + " }"
	}
	const tail = " PHY=4x LOG=ACT SPD=10\n"
	b.WriteString(ca(0x0002c90300a00001, "-SM", "SM", 1) + " " + sw(1, 1) + tail)
	const switches = 70
	for k := 1; k < switches; k++ {
		b.WriteString(sw(k, 3) + " " + sw(k+1, 2) + tail) // S<k> port 3 to S<k+1> port 2
	}
	top, err := Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= switches; k++ {
		route, ok := top.Route(fabric.GUID(0x0002c90300f00000 + uint64(k)))
		if want := k <= MaxRouteHops; ok != want || (ok && len(route) != k) {
			t.Errorf("S%d: route of %d hops, %v; want one of %d hops: %v", k, len(route), ok, k, want)
		}
	}
}

func hex16(v uint64) string { return fmt.Sprintf("%016x", v) }
func hex4(v int) string     { return fmt.Sprintf("%04X", v) }
func hex2(v int) string     { return fmt.Sprintf("%02X", v) }
