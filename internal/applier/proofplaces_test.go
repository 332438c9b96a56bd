package applier

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Every job proves the places its change recorded, whatever the term
// remembers: on the simulated fabric, whose OpenSM made H1 a full member of
// 0x0065 and 0x1001 and H2 of none, a change that takes H1 out of a pkey
// waits while H1's table still holds it, on a new term's first apply, after
// a gate reopened, beside another port's pkey error.

// stillHolds is the reason of a place whose port still holds the pkey its
// job took it out of.
func stillHolds(g fabric.GUID, pkey fabric.PKey) string {
	return fmt.Sprintf("port %s still holds pkey %s", g, pkey)
}

// wantWaiting stops the test unless job is Running and its description
// says why.
func (r *readbackRig) wantWaiting(name string, job store.Job, why string) {
	r.t.Helper()
	if j := r.job(job.ID); j.Status != store.StatusRunning || !strings.Contains(j.Description, why) {
		r.t.Fatalf("%s: %s %q %q; want Running, saying %q", name, j.Status, j.Description, j.Error, why)
	}
}

// TestReadBackRemovalOnATermsFirstApply: a port's removal on a new term's
// first apply is read back: H1's removal waits while H1's table holds
// 0x0065; H2's, whose table does not, completes, and so does the job that
// added H2, its place superseded by the removal and proven by it.
func TestReadBackRemovalOnATermsFirstApply(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	r.network(101)
	h1, h2 := fabricsim.HostGUID(1), fabricsim.HostGUID(2)
	r.port("port-h1", uint64(h1))
	added := r.port("port-h2", uint64(h2))
	r.applied("H1's and H2's ports")
	r.wantWaiting("H2's addition", added, "holds pkey 0x0065 as not a member, want full")

	r.newTerm()
	rm1 := r.removePort("port-h1")
	rm2 := r.removePort("port-h2")
	r.applied("the new term's first apply")
	r.wantWaiting("H1's removal", rm1, stillHolds(h1, 0x0065))
	wantStatus(t, r.applyRig, "H2's removal", rm2, store.StatusCompleted)
	wantStatus(t, r.applyRig, "H2's addition, superseded by its removal", added, store.StatusCompleted)
}

// TestReadBackNetworkChangesOnANewTerm: a network's VLAN move and its
// deletion, the first changes a new term applies, wait while H1's table
// still holds the pkey they took it out of.
func TestReadBackNetworkChangesOnANewTerm(t *testing.T) {
	h1 := fabricsim.HostGUID(1)
	for _, tc := range []struct {
		name   string
		change func(r *readbackRig) store.Job
	}{
		{"VLAN move", func(r *readbackRig) store.Job {
			return r.vlan(r.netID, 102)
		}},
		{"network deleted", func(r *readbackRig) store.Job {
			j, err := r.st.RemoveNetwork(r.t.Context(), store.NetworkRemoval{NetworkID: r.netID})
			if err != nil {
				r.t.Fatal(err)
			}
			return j
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReadbackRig(t, time.Minute)
			r.network(101)
			r.port("port-h1", uint64(h1))
			r.applied("H1's port")
			r.newTerm()
			job := tc.change(r)
			r.applied("the new term's first apply")
			r.wantWaiting("the network's change", job, stillHolds(h1, 0x0065))
		})
	}
}

// TestReadBackKubernetesRemovalAfterAGateReopened: a Kubernetes removal
// recorded while a gate held a sweep is read back by the sweep after the
// gate reopens.
func TestReadBackKubernetesRemovalAfterAGateReopened(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	h1 := fabricsim.HostGUID(1)
	r.kubeAdd(0x1001, h1)
	r.applied("H1 into 0x1001")
	s1 := store.ExpectedSwitch{GUID: fabricsim.SwitchGUID(1), Description: "S1"}
	if err := r.st.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{s1, {GUID: fabricsim.SwitchGUID(9), Description: "S9"}}); err != nil {
		t.Fatal(err)
	}
	held := r.network(101)
	r.applied("a sweep the gate holds")
	r.wantWaiting("the network behind the gate", held, "S9")
	j, err := r.kube().RemoveKubernetesGUIDs(t.Context(), store.KubernetesRemoval{PKey: 0x1001, GUIDs: []fabric.GUID{h1}})
	if err != nil {
		t.Fatal(err)
	}
	removal := j
	if err := r.st.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{s1}); err != nil {
		t.Fatal(err)
	}
	r.term.pollGates(t.Context())
	r.applied("the sweep after the gate reopened")
	wantStatus(t, r.applyRig, "the network held by the gate", held, store.StatusCompleted)
	r.wantWaiting("the removal after the gate reopened", removal, stillHolds(h1, 0x1001))
}

// TestReadBackPKeyErrorBesideAnUnprovenJob: a pkey error naming H3, or a
// line that names no port, fails nothing else with verify = tables, and
// completes nothing unread: H2's port, whose table lacks the pkey, waits;
// H1's, whose table holds it, completes.
func TestReadBackPKeyErrorBesideAnUnprovenJob(t *testing.T) {
	h3Full := "pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8066 because Pkey table is full for node " +
		fmt.Sprintf("0x%016x port 1 (H3)", uint64(fabricsim.HostGUID(3))-1)
	for _, line := range []string{h3Full, "osm_pkey_mgr_process: ERR 0510: osm_prtn_make_partitions() failed"} {
		t.Run(line[:30], func(t *testing.T) {
			r := newReadbackRig(t, time.Minute)
			r.network(101)
			r.applied("network")
			r.sm.sweep = func() string { return heavySweep(logLine(0x01, line)) }
			h1 := r.port("port-h1", uint64(fabricsim.HostGUID(1)))
			h2 := r.port("port-h2", uint64(fabricsim.HostGUID(2)))
			r.applied("H1's and H2's ports, with a pkey error")
			wantStatus(t, r.applyRig, "H1's port", h1, store.StatusCompleted)
			r.wantWaiting("H2's port", h2, "holds pkey 0x0065 as not a member, want full")
			if a, err := r.st.LastApply(t.Context()); err != nil || !strings.Contains(a.Detail, line) {
				t.Errorf("the apply's row: %q, %v; want the pkey error in it", a.Detail, err)
			}
		})
	}
}

// TestReadBackAdoption: an adopted partition's job is read back: H2, which
// OpenSM did not make a member of 0x0070, holds it.
func TestReadBackAdoption(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	h2 := fabricsim.HostGUID(2)
	f, err := partitions.Parse([]byte(fmt.Sprintf("adopted=0x0070 : %s=full ;\n", h2)))
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.st.AdoptPartitions(t.Context(), store.Adoption{Partitions: f.Statements, CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	job := out.Job
	r.applied("the adoption")
	r.wantWaiting("the adoption", job, fmt.Sprintf("port %s holds pkey 0x0070 as not a member, want full", h2))
}

// silentPorts is a fake tableReader of a fabric larger than the
// simulator's, where some ports never answer: it reads the targets one at a
// time, in order, as one worker of pkeyread.Reader does; a silent port's
// read lasts portTimeout (or until ctx ends), and a target whose turn comes
// after ctx ended is not read (pkeyread.ErrNotRead). Every other port's
// table holds pkey 0x0065, full, and so does its switch port's.
type silentPorts struct {
	silent      map[fabric.GUID]bool
	portTimeout time.Duration
}

func (s *silentPorts) Read(ctx context.Context, targets []pkeyread.Target) []pkeyread.Result {
	out := make([]pkeyread.Result, len(targets))
	for i, t := range targets {
		out[i].Target = t
		switch {
		case ctx.Err() != nil:
			out[i].Err = fmt.Errorf("port %s %w: %w", t.Port, pkeyread.ErrNotRead, ctx.Err())
		case s.silent[t.Port]:
			select {
			case <-ctx.Done():
			case <-time.After(s.portTimeout):
			}
			out[i].Err = fmt.Errorf("port %s at LID %d: NodeInfo: %w", t.Port, t.LID, context.DeadlineExceeded)
		default:
			out[i].PKeys, out[i].SwitchPKeys = pkeyread.Table{0x8065}, pkeyread.Table{0x8065}
		}
	}
	return out
}

// wideDump is the subnet dump of n hosts H<i> (hostPort(i), LID 2+i) on
// switch S1's port i+1.
func wideDump(n int) string {
	const sw = "{ SW Ports:24 SystemGUID:0002c90300f00001 NodeGUID:0002c90300f00001 PortGUID:0002c90300f00001 VenID:00000000 DevID:0000 Rev:000000A1 {S1} LID:0002 PN:%02X }"
	const ca = "{ CA Ports:01 SystemGUID:%016x NodeGUID:%016x PortGUID:%016x VenID:000000 DevID:0000 Rev:000000A1 {H%d} LID:%04X PN:01 }"
	var b strings.Builder
	for i := 1; i <= n; i++ {
		host := fmt.Sprintf(ca, hostNode(i), hostNode(i), uint64(hostPort(i)), i, 2+i)
		fmt.Fprintf(&b, "%s %s PHY=4x LOG=ACT SPD=10\n", host, fmt.Sprintf(sw, i+1))
		fmt.Fprintf(&b, "%s %s PHY=4x LOG=ACT SPD=10\n", fmt.Sprintf(sw, i+1), host)
	}
	return b.String()
}

// TestReadBackSilentPortsDoNotStarve: ten ports that never answer, read
// first (their jobs are the oldest, their GUIDs the lowest), take more than
// the read's bound; at the first poll after the apply's read every
// answering port is read and its job completes, and the silent ports' jobs
// wait, naming them.
func TestReadBackSilentPortsDoNotStarve(t *testing.T) {
	if testing.Short() {
		t.Skip("reads for proofReadBound")
	}
	const hosts, silent = 12, 10
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	if err := os.WriteFile(r.dump, []byte(wideDump(hosts)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.st.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"}}); err != nil {
		t.Fatal(err)
	}
	fake := &silentPorts{silent: map[fabric.GUID]bool{}, portTimeout: time.Second}
	for h := 1; h <= silent; h++ {
		fake.silent[hostPort(h)] = true
	}
	r.term.Cfg.Readback = &pkeyread.Reader{} // verify = tables; the fake reads
	r.term.Cfg.VerifyTimeout = time.Hour
	r.term.readTables = fake
	r.network(101)
	var jobs []store.Job
	for h := 1; h <= hosts; h++ {
		jobs = append(jobs, r.portIn(r.netID, fmt.Sprintf("port-h%d", h), hostPort(h)))
	}
	r.applied("twelve ports, ten of them silent")
	r.term.pollProof(t.Context())
	for h := silent + 1; h <= hosts; h++ {
		wantStatus(t, r, fmt.Sprintf("H%d's port, which answers", h), jobs[h-1], store.StatusCompleted)
	}
	for h := 1; h <= silent; h++ {
		j := wantStatus(t, r, fmt.Sprintf("H%d's port, which never answers", h), jobs[h-1], store.StatusRunning)
		if h == 1 && !strings.Contains(j.Description, "port "+hostPort(h).String()) {
			t.Errorf("H%d's waiting job does not name its port: %q", h, j.Description)
		}
	}
}

// failedSweep is the log of a heavy sweep some Set of which was not answered.
func failedSweep() string {
	return logBox("state_mgr_sweep_hop_0", "INITIATING HEAVY SWEEP") +
		logLine(0x01, "sm_mad_ctrl_send_err_cb: ERR 3113: MAD completed in error (IB_TIMEOUT): SubnSet(P_KeyTable), attr_mod 0x0, TID 0x1234") +
		logLine(0x02, "Errors during initialization")
}

// TestReadBackDroppedSets: a sweep that ends with "Errors during
// initialization" (one host drops OpenSM's Sets) fails no job with verify =
// tables: H1's port, whose table shows its change, completes; H2's, whose
// table does not, waits, naming H2, and the state is applied again. With
// verify = log every job of the sweep fails, as the log proves none.
func TestReadBackDroppedSets(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	r.network(101)
	r.applied("network")
	r.sm.sweep = failedSweep
	r.term.Cfg.SweepTimeout = 300 * time.Millisecond
	h1 := r.port("port-h1", uint64(fabricsim.HostGUID(1)))
	h2 := r.port("port-h2", uint64(fabricsim.HostGUID(2)))
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Fatalf("apply of a sweep that dropped Sets: %v, want a retry", res)
	}
	wantStatus(t, r.applyRig, "H1's port, whose table shows it", h1, store.StatusCompleted)
	r.wantWaiting("H2's port", h2, fmt.Sprintf("port %s holds pkey 0x0065 as not a member, want full", fabricsim.HostGUID(2)))

	r.term.Cfg.Readback = nil // verify = log
	h3 := r.port("port-h3", uint64(fabricsim.HostGUID(3)))
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Fatalf("apply with verify = log: %v, want a retry", res)
	}
	wantStatus(t, r.applyRig, "H3's port, with verify = log", h3, store.StatusFailed)
}

// TestReadBackJobsOfThePreviousRelease: jobs the previous release wrote
// recorded no places. A port's job falls back to its GUID in its network's
// pkey as the applied state holds it, and is read: H2's, whose table lacks
// the pkey, waits. A removal has nothing to fall back to and rests on the
// log.
func TestReadBackJobsOfThePreviousRelease(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	r.network(101)
	r.port("port-h1", uint64(fabricsim.HostGUID(1)))
	r.applied("network and H1's port")
	h2 := r.writtenBefore(r.port("port-h2", uint64(fabricsim.HostGUID(2))))
	removal := r.writtenBefore(r.removePort("port-h1"))
	r.applied("H2's port and H1's removal, written by the previous release")
	r.wantWaiting("H2's port", h2, "holds pkey 0x0065 as not a member, want full")
	wantStatus(t, r.applyRig, "H1's removal", removal, store.StatusCompleted)
}

// TestReadBackRemovalOffAStaleDump: OpenSM rewrites its subnet dump only at
// SUBNET UP. H1's removal, applied while the dump is one written before its
// sweep that lacks H1 (H1 bounced its link then, and every sweep since ended
// with errors: H1 drops OpenSM's Sets), waits: H1 is on the fabric, its
// table still holds 0x0065, and nothing was read. A dump written after the
// sweep that still lacks H1 (a sweep came up without it) proves it.
func TestReadBackRemovalOffAStaleDump(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	r.network(101)
	h1 := fabricsim.HostGUID(1)
	r.port("port-h1", uint64(h1))
	r.applied("H1's port")
	var without []string
	for _, l := range strings.Split(string(r.realDump), "\n") {
		if !strings.Contains(l, "{H1}") {
			without = append(without, l)
		}
	}
	noH1 := []byte(strings.Join(without, "\n"))
	old := time.Now().Add(-time.Minute)
	if err := os.WriteFile(r.dump, noH1, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(r.dump, old, old); err != nil {
		t.Fatal(err)
	}
	rm := r.removePort("port-h1")
	r.applied("H1's removal, the dump older than its sweep")
	r.wantWaiting("H1's removal on a dump older than its sweep", rm,
		fmt.Sprintf("port %s: not in OpenSM's subnet dump", h1))
	r.term.proof.lastRead = time.Time{} // the next poll reads now
	r.term.pollProof(t.Context())
	r.wantWaiting("H1's removal polled again on the same dump", rm, "a dump older than the sweep of this change")
	// A sweep that came up without H1, later than the signal by more than the
	// kernel's tick, which file times are taken from.
	time.Sleep(20 * time.Millisecond)
	if err := os.WriteFile(r.dump, noH1, 0o644); err != nil {
		t.Fatal(err)
	}
	if j := r.settle(rm.ID); j.Status != store.StatusCompleted {
		t.Fatalf("H1's removal once a sweep came up without H1: %s %q %q", j.Status, j.Description, j.Error)
	}
}

// TestReadBackChangeDuringTheSweep: the open jobs are read while OpenSM
// sweeps (readWantsDuringSweep). A change recorded during the sweep has a
// later revision than the file OpenSM sweeps with: its job is neither judged
// nor described by this sweep, and stays Pending; the next apply judges it
// (H2's table lacks 0x0065: it waits). The sweep's own job completes.
func TestReadBackChangeDuringTheSweep(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	r.network(101)
	r.applied("the network")
	var during store.Job
	r.sm.sweep = func() string {
		during = r.port("port-h2", uint64(fabricsim.HostGUID(2)))
		return heavySweep("")
	}
	own := r.port("port-h1", uint64(fabricsim.HostGUID(1)))
	r.applied("H1's port, with H2's recorded during its sweep")
	wantStatus(t, r.applyRig, "the sweep's own job", own, store.StatusCompleted)
	if j := r.job(during.ID); j.Status != store.StatusPending || strings.Contains(j.Description, "P_Key tables") {
		t.Fatalf("the change recorded during the sweep: %s %q; want Pending, not judged", j.Status, j.Description)
	}
	r.sm.sweep = func() string { return heavySweep("") }
	r.applied("the next apply")
	r.wantWaiting("the change recorded during the previous sweep", during, "holds pkey 0x0065 as not a member, want full")
}
