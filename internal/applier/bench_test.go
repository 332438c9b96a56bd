package applier

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// largeDump is OpenSM's subnet dump of a fabric of hosts hosts spread over
// switches switches in a chain, in the format OpenSM writes (each link from
// both ends), as the simulated fabric's would be.
func largeDump(hosts, switches int) (dump string, swList []store.ExpectedSwitch) {
	node := func(kind string, ports int, guid uint64, name string, lid, pn int) string {
		return fmt.Sprintf("{ %s Ports:%02X SystemGUID:%016x NodeGUID:%016x PortGUID:%016x VenID:000000 DevID:0000 Rev:000000A1 {%s} LID:%04X PN:%02X }",
			kind, ports, guid, guid, guid+map[bool]uint64{true: 1, false: 0}[kind == "CA"], name, lid, pn)
	}
	const link = " PHY=4x LOG=ACT SPD=10\n"
	ports := hosts/switches + 3
	var b strings.Builder
	swGUID := func(k int) uint64 { return 0x0002c90300f00000 + uint64(k) }
	for i := 1; i <= hosts; i++ {
		k := (i-1)%switches + 1
		host := node("CA", 1, 0x0002c90300000000+uint64(i)*0x100, fmt.Sprintf("H%d", i), i+switches, 1)
		sw := node("SW", ports, swGUID(k), fmt.Sprintf("S%d", k), k, (i-1)/switches+1)
		b.WriteString(host + " " + sw + link)
		b.WriteString(sw + " " + host + link)
	}
	for k := 1; k <= switches; k++ {
		swList = append(swList, store.ExpectedSwitch{GUID: fabric.GUID(swGUID(k)), Description: fmt.Sprintf("S%d", k)})
		if k < switches {
			a := node("SW", ports, swGUID(k), fmt.Sprintf("S%d", k), k, ports)
			c := node("SW", ports, swGUID(k+1), fmt.Sprintf("S%d", k+1), k+1, ports-1)
			b.WriteString(a + " " + c + link + c + " " + a + link)
		}
	}
	return b.String(), swList
}

// phaseTimes collects the split of every clean apply.
type phaseTimes struct {
	mu     sync.Mutex
	sum    map[string]time.Duration
	counts int
}

func (p *phaseTimes) ApplyFinished(string, time.Duration) {}
func (p *phaseTimes) Alive()                              {}
func (p *phaseTimes) Applied(_, _ int64, phases map[string]time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sum == nil {
		p.sum = map[string]time.Duration{}
	}
	for k, v := range phases {
		p.sum[k] += v
	}
	p.counts++
}

// report reports the split per apply, every apply of the benchmark's loop
// having been a clean one.
func (p *phaseTimes) report(b *testing.B) {
	b.Helper()
	if p.counts != b.N {
		b.Fatalf("%d clean applies of %d", p.counts, b.N)
	}
	for _, k := range []string{"render", "write", "sweep", "complete"} {
		b.ReportMetric(float64(p.sum[k].Microseconds())/float64(p.counts), k+"-µs/op")
	}
}

// BenchmarkApplyLargeFabric is one apply of a one-port change on a fabric of
// 1,500 hosts and 40 switches whose host ports are members of 10 partitions,
// on SQLite, with a scripted OpenSM that, at each SIGHUP, rewrites its subnet
// dump (the same content: the fabric is unchanged) and logs a heavy sweep
// with the VERBOSE line per port that the manager's log levels give: what the
// manager does per apply, without OpenSM's own time. It reports the
// manager's split per apply; -cpuprofile shows where the complete step goes.
func BenchmarkApplyLargeFabric(b *testing.B) {
	const hosts, switches, nets = 1500, 40, 10
	dump, sws := largeDump(hosts, switches)
	var verbose strings.Builder
	for i := 1; i <= hosts+switches; i++ {
		verbose.WriteString(logLine(0x04, fmt.Sprintf("osm_prtn_add_port: port 0x%x already in partition 'Default' (0x7fff). Will overwrite",
			0x0002c90300000001+uint64(i)*0x100)))
	}
	var r *applyRig
	r = newApplyRig(b, false, func() string {
		if err := os.WriteFile(r.dump, []byte(dump), 0o644); err != nil {
			b.Error(err)
		}
		return heavySweep(verbose.String())
	})
	ctx := b.Context()
	if err := os.WriteFile(r.dump, []byte(dump), 0o644); err != nil {
		b.Fatal(err)
	}
	// As the manager wires it: one reader of the dump for the gates and the
	// capacity check.
	r.term.Cfg.Dump = topology.NewDump(r.dump)
	r.term.Cfg.PortLimit = &topology.PortLimit{DumpFile: r.dump, Dump: r.term.Cfg.Dump, Capacity: 32}
	if err := r.st.ConfirmSwitches(ctx, sws); err != nil {
		b.Fatal(err)
	}
	netIDs := make([]string, nets)
	for n := range netIDs {
		netIDs[n] = fmt.Sprintf("3b9d6a52-7c1e-4f0a-9e2d-0000000f%04d", n)
		vlan := int64(201 + n)
		if _, err := r.st.RecordNetwork(ctx, store.NetworkChange{Operation: store.OpCreateNetwork,
			Network: store.NetworkSpec{ID: netIDs[n], Name: "n", Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &vlan}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 1; i <= hosts; i++ {
		g := fabric.GUID(0x0002c90300000001 + uint64(i)*0x100)
		if _, err := r.st.RecordPort(ctx, store.PortChange{Operation: store.OpAddPort,
			Port: store.Port{ID: fmt.Sprintf("p%d", i), NetworkID: netIDs[i%nets], GUID: &g, Host: fmt.Sprintf("h%d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	measureApplies(ctx, b, r, func(i int) {
		// A port whose GUID is not on the fabric: the state grows by one port
		// per apply, the fabric does not.
		benchPort(ctx, b, r, fmt.Sprintf("q%d", i), netIDs[i%nets], fabric.GUID(0x0002c90400000000+uint64(i)))
	})
}

// benchPort records a port of network net.
func benchPort(ctx context.Context, b *testing.B, r *applyRig, id, net string, g fabric.GUID) {
	if _, err := r.st.RecordPort(ctx, store.PortChange{Operation: store.OpAddPort,
		Port: store.Port{ID: id, NetworkID: net, GUID: &g, Host: "h"}}); err != nil {
		b.Fatal(err)
	}
}

// measureApplies applies the recorded state once, then measures one apply of
// the change that change(i) records in each round, and reports the manager's
// split per apply.
func measureApplies(ctx context.Context, b *testing.B, r *applyRig, change func(i int)) {
	if res := r.term.apply(ctx); res != applyDone {
		b.Fatalf("first apply: %v", res)
	}
	phases := &phaseTimes{}
	r.term.Observer = phases
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		change(i)
		if res := r.term.apply(ctx); res != applyDone {
			b.Fatalf("apply: %v", res)
		}
	}
	b.StopTimer()
	phases.report(b)
}

// BenchmarkApplyManyPorts is one apply of a one-port change with 10,000 ports
// recorded in one VLAN network on the small fabric, as afm-bench's poll storm
// has them: their GUIDs are not on the fabric, so the scripted OpenSM's sweep
// logs the VERBOSE line real OpenSM logs for every absent member of a
// partition ("port ... not found"). It reports the manager's split per apply.
func BenchmarkApplyManyPorts(b *testing.B) {
	const ports = 10000
	// The lines are written as the members are recorded, so that the fake's
	// Reload costs a copy, not the formatting of 10,000 lines.
	var (
		mu       sync.Mutex
		notFound strings.Builder
	)
	member := func(g fabric.GUID) {
		mu.Lock()
		defer mu.Unlock()
		notFound.WriteString(logLine(0x04, fmt.Sprintf("osm_prtn_add_port: port 0x%x not found", uint64(g))))
	}
	r := newApplyRig(b, true, func() string {
		mu.Lock()
		defer mu.Unlock()
		return heavySweep(notFound.String())
	})
	// Recording 10,000 ports takes seconds, minutes on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r.network(101)
	// In groups, as the API's clients would send them: one at a time would
	// take a commit (an fsync) each.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for c := range 16 {
		wg.Go(func() {
			for i := c; i < ports; i += 16 {
				g := fabric.GUID(0x0002c90400000000 + uint64(i))
				if _, err := r.st.RecordPort(ctx, store.PortChange{Operation: store.OpAddPort,
					Port: store.Port{ID: fmt.Sprintf("p%d", i), NetworkID: r.netID, GUID: &g, Host: "h"}}); err != nil {
					errs <- err
					return
				}
				member(g)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	measureApplies(ctx, b, r, func(i int) {
		g := fabric.GUID(0x0002c90500000000 + uint64(i))
		benchPort(ctx, b, r, fmt.Sprintf("q%d", i), r.netID, g)
		member(g)
	})
}
