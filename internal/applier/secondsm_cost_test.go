package applier

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// The cost of finish's second-SM look (confirm): an apply rig on
// largeDump's fabric, its read-back answered by a fake (every port's table
// holds the change) and the look by the fake SMP fabric of the same ports
// (fakesmp_test.go), H1's port being this manager's OpenSM's.

// lookRig is that rig, its term past its first apply (its network's), whose
// look was the term's first full one.
type lookRig struct {
	*applyRig
	smp *fakeSMPFabric
}

func newLookRig(t testing.TB, hosts int) *lookRig {
	return newLookRigOn(t, config.EngineSQLite, hosts)
}

// newLookRigOn is newLookRig on engine's store.
func newLookRigOn(t testing.TB, engine string, hosts int) *lookRig {
	switches := 2 // H<i> at LID 2+i
	if hosts > 500 {
		switches = 40 // at most 255 ports a switch in the dump's format
	}
	r := &lookRig{applyRig: newApplyRigOn(t, engine, false, func() string { return heavySweep("") }),
		smp: newWideFakeSMPFabric(hosts, switches)}
	dump, sws := largeDump(hosts, switches)
	if err := os.WriteFile(r.dump, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.st.ConfirmSwitches(t.Context(), sws); err != nil {
		t.Fatal(err)
	}
	r.term.Cfg.Readback = &pkeyread.Reader{} // verify = tables; the fake reads
	r.term.readTables = &silentPorts{}
	r.term.SecondSM = &SecondSMCheck{Dialer: r.smp, Own: hostPort(1), Store: r.st}
	r.term.secondSM = &secondSMWatch{check: r.term.SecondSM}
	r.term.secondSM.restore(t.Context(), r.term.watchEnv())
	r.network(101)
	r.applied("the network")
	return r
}

// sweepLogs makes every sweep from now on log lines too.
func (r *lookRig) sweepLogs(lines string) {
	r.sm.sweep = func() string { return lines + heavySweep("") }
}

// TestFinishLookDoesNotGrowWithTheFabric: once the term's first full look
// has run, the look before a one-port change's jobs complete sends as many
// SMPs on 1,000 hosts as on 4: this OpenSM's port and the changed port. The
// full look (every host port) runs on its own schedule.
func TestFinishLookDoesNotGrowWithTheFabric(t *testing.T) {
	sent := map[int]int64{}
	for _, hosts := range []int{4, 1000} {
		r := newLookRig(t, hosts)
		r.smp.sent.Store(0)
		j := r.portIn(r.netID, "port-h2", hostPort(2))
		r.applied("H2's port")
		wantStatus(t, r.applyRig, "H2's port", j, store.StatusCompleted)
		sent[hosts] = r.smp.sent.Load()
	}
	if sent[1000] != sent[4] || sent[4] > 8 {
		t.Fatalf("finish's look sent %d SMPs on 4 hosts, %d on 1,000; want the same few (this OpenSM's port, H2's)",
			sent[4], sent[1000])
	}
}

// TestFinishLookSeesTheMasterOfThePlaces: a second SM that took the changed
// port over since the last full look (its MasterSMLID names the SM on H3),
// while this OpenSM's port still names this OpenSM: the short look reads
// the port's MasterSMLID and the SMInfo there, and holds the job, naming it.
func TestFinishLookSeesTheMasterOfThePlaces(t *testing.T) {
	r := newLookRig(t, 40)
	const tenantLID = 2 + 3 // H3's
	r.smp.set(func(p map[uint16]*fakeSMPPort) {
		p[tenantLID].sm = &pkeyread.SMInfo{GUID: hostPort(3), Priority: 0, State: pkeyread.SMMaster}
		p[2+2].masterLID = tenantLID // H2's port
	})
	r.smp.sent.Store(0)
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("H2's port")
	got := wantStatus(t, r.applyRig, "H2's port, mastered by the SM on H3", j, store.StatusRunning)
	if !strings.Contains(got.Description, "Second subnet manager: port "+hostPort(3).String()) {
		t.Fatalf("H2's job says %q; want it waiting for the SM on H3", got.Description)
	}
	if n := r.smp.sent.Load(); n > 10 {
		t.Errorf("the look sent %d SMPs on 40 hosts; want a few, not a scan", n)
	}
}

// TestFinishLookAfterOpenSMNamedAnotherSM: a tenant's SM started since the
// last full look masters ports other than the changed one without
// rewriting their MasterSMLID (no M_Key protection: the simulator's case).
// OpenSM's sweep logged it (ERR 2F18, as it does at every heavy sweep while
// that SM runs): finish's look is a full one, and the job waits.
func TestFinishLookAfterOpenSMNamedAnotherSM(t *testing.T) {
	r := newLookRig(t, 40)
	const tenantLID = 2 + 3
	r.smp.unprotect()
	r.smp.set(func(p map[uint16]*fakeSMPPort) {
		p[tenantLID].sm = &pkeyread.SMInfo{GUID: hostPort(3), Priority: 0, State: pkeyread.SMMaster}
	})
	r.sweepLogs(logLine(0x01, "smi_rcv_process_get_response: ERR 2F18: Got SM (0,1,5) with sm_key 0x0000000000000001 "+
		"that doesn't match our local sm_key. Ignoring SMInfo") + logLine(0x80, "Found remote SM (0,1,5) with non-matching sm_key"))
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("H2's port")
	got := wantStatus(t, r.applyRig, "H2's port, beside the tenant's SM", j, store.StatusRunning)
	if !strings.Contains(got.Description, "Second subnet manager: port "+hostPort(3).String()) {
		t.Fatalf("H2's job says %q; want it waiting for the SM on H3", got.Description)
	}
}

// TestFinishLookFailsClosed: this OpenSM's port does not answer finish's
// look: the job does not complete on that sweep, and says why; the gate
// stays closed until a look reads the fabric.
func TestFinishLookFailsClosed(t *testing.T) {
	r := newLookRig(t, 4)
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[2+1].answersAs = hostPort(4) })
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("H2's port")
	got := wantStatus(t, r.applyRig, "H2's port, the look failed", j, store.StatusRunning)
	if !strings.Contains(got.Description, "which subnet manager is master could not be read") {
		t.Fatalf("H2's job says %q; want it waiting for a look that reads the fabric", got.Description)
	}
	if !strings.Contains(strings.Join(GateTexts(r.term.secondSM.reason()), ""), "could not be read") || r.term.secondSM.holds() {
		t.Fatalf("after the failed look: reason %v, holds %v; want the jobs held, not the applies",
			r.term.secondSM.reason(), r.term.secondSM.holds())
	}
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[2+1].answersAs = 0 })
	r.term.secondSM.detect(t.Context(), r.term.watchEnv())
	if rs := r.term.secondSM.reason(); len(rs) != 0 {
		t.Fatalf("after a look that read the fabric: %v; want the gate open", rs)
	}
}

// BenchmarkFinishLook is the second-SM look of finish on a fabric of 1,500
// hosts, one port changed, against the fake SMP fabric (its answers cost
// nothing: ns/op is the manager's own work; SMPs/op times
// BenchmarkReadSMs' ms/port gives the simulator's time): look=full is the
// full look, which finish ran at every apply before, look=confirm the one
// it runs now.
func BenchmarkFinishLook(b *testing.B) {
	r := newLookRig(b, 1500)
	places := []fabric.GUID{hostPort(2)}
	dump := r.term.readDump()
	for _, full := range []bool{true, false} {
		b.Run(map[bool]string{true: "look=full", false: "look=confirm"}[full], func(b *testing.B) {
			r.smp.sent.Store(0)
			for b.Loop() {
				if full {
					r.term.secondSM.detect(b.Context(), r.term.watchEnv())
				} else if rs := r.term.secondSM.confirm(b.Context(), r.term.watchEnv(), dump.topo, places); len(rs) != 0 {
					b.Fatal(rs)
				}
			}
			b.ReportMetric(float64(r.smp.sent.Load())/float64(b.N), "SMPs/op")
		})
	}
}

// TestFinishLookCutShort: the term ends while the short look waits on the
// changed port: the look records nothing and leaves no reason behind it (the
// next term looks anew), but this finish completes nothing on it.
func TestFinishLookCutShort(t *testing.T) {
	r := newLookRig(t, 4)
	r.smp.hang, r.smp.hung = map[uint16]bool{2 + 1: true}, make(chan struct{}, 1) // only this OpenSM's port answers
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-r.smp.hung // the look waits on H2's port
		cancel()
	}()
	dump := r.term.readDump()
	failed := r.term.secondSM.confirm(ctx, r.term.watchEnv(), dump.topo, []fabric.GUID{hostPort(2)})
	if rs := verdict.Judge(verdict.Evidence{SecondSM: verdict.SecondSMEvidence{LookFailed: failed}}).Of(GateSecondSM); len(rs) != 1 {
		t.Fatalf("confirm cut short = %q, judged %v; want the sweep's jobs held", failed, rs)
	}
	if got := r.term.secondSM.reason(); len(got) != 0 {
		t.Fatalf("gate after a look cut short: %v; want nothing recorded", got)
	}
	if sms, err := r.st.SecondSMs(t.Context()); err != nil || len(sms) != 0 {
		t.Fatalf("recorded second SMs %+v, %v; want none", sms, err)
	}
}
