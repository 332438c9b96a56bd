package applier

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The read-back proof's windows, on the tables a real OpenSM programmed on
// the simulated fabric: the term is driven step by step (the rig's scripted
// OpenSM only logs the sweep), and its reads go to the real fabric, whose
// OpenSM made H1 a full member of 0x0065 and 0x1001, and H2 of none.

// readbackPartitions is what the fabric's OpenSM applied.
const readbackPartitions = "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\nnet=0x0065 : %[1]s=full ;\n" +
	"k8s=0x1001 : %[1]s=full ;\n"

// readbackRig is an applyRig whose term reads back from a simulated fabric
// swept by a real OpenSM; the subnet dump the term reads is a copy of
// OpenSM's (dump), which a test may edit.
type readbackRig struct {
	*applyRig
	fabric   *fabricsim.Fabric
	realDump []byte // OpenSM's subnet dump
}

func newReadbackRig(t *testing.T, timeout time.Duration) *readbackRig {
	t.Helper()
	f := sweptSimFabric(t)
	real, err := os.ReadFile(filepath.Join(f.Dir, topology.FileName))
	if err != nil {
		t.Fatal(err)
	}
	r := &readbackRig{applyRig: newApplyRig(t, false, func() string { return heavySweep("") }), fabric: f, realDump: real}
	if err := os.WriteFile(r.dump, real, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.st.ConfirmSwitches(t.Context(), []store.ExpectedSwitch{{GUID: fabricsim.SwitchGUID(1), Description: "S1"}}); err != nil {
		t.Fatal(err)
	}
	d, ok := pkeyread.SimDialerFromEnv(f.Env())
	if !ok {
		t.Fatalf("the fabric's environment names no simulator: %q", f.Env())
	}
	r.term.Cfg.Readback = &pkeyread.Reader{Dialer: d, Workers: 2, PortTimeout: 500 * time.Millisecond}
	r.term.Cfg.VerifyTimeout = timeout
	return r
}

// sweptSimFabric starts a fabric of three hosts and a real OpenSM that makes
// H1 a full member of 0x0065 and 0x1001, and returns once the subnet is up.
func sweptSimFabric(t *testing.T) *fabricsim.Fabric {
	t.Helper()
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	f := fabricsim.StartT(t, fabricsim.Options{Hosts: 3})
	parts, conf, logFile := filepath.Join(f.Dir, "partitions.conf"), filepath.Join(f.Dir, "opensm.conf"), filepath.Join(f.Dir, "opensm.log")
	for path, text := range map[string]string{parts: fmt.Sprintf(readbackPartitions, fabricsim.HostGUID(1)),
		conf: "log_flags 0x03\nforce_log_flush TRUE\nsweep_interval 0\n"} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(opensm, "-F", conf, "-g", f.SMGUID.String(), "-P", parts, "-f", logFile, "-d", "2",
		"--dump_files_dir", f.Dir)
	cmd.Dir, cmd.Env = f.Dir, append(os.Environ(), f.Env()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	waitUntil(t, "OpenSM to bring the subnet up", func() bool {
		log, _ := os.ReadFile(logFile)
		_, err := os.Stat(filepath.Join(f.Dir, topology.FileName))
		return strings.Contains(string(log), "-> SUBNET UP\n") && err == nil
	})
	return f
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle polls the term's waiting proof until job is no longer open.
func (r *readbackRig) settle(id int64) store.Job {
	r.t.Helper()
	var j store.Job
	waitUntil(r.t.(*testing.T), fmt.Sprintf("job %d to finish", id), func() bool {
		r.term.pollProof(r.t.Context())
		j = r.job(id)
		return j.Status == store.StatusCompleted || j.Status == store.StatusFailed
	})
	return j
}

// TestReadBackProof: a port whose table holds the pkey completes its job; a
// port whose table lacks it, though the log shows the sweep clean, keeps its
// job Running, naming the port, until verify_timeout fails it.
func TestReadBackProof(t *testing.T) {
	r := newReadbackRig(t, 2*time.Second)
	r.network(101)
	r.applied("network")
	h1 := r.port("port-h1", uint64(fabricsim.HostGUID(1)))
	r.applied("H1's port")
	if j := r.job(h1.ID); j.Status != store.StatusCompleted {
		t.Fatalf("H1's job, whose table holds 0x8065: %s %q", j.Status, j.Description)
	}

	h2 := r.port("port-h2", uint64(fabricsim.HostGUID(2)))
	r.applied("H2's port")
	j := r.job(h2.ID)
	want := fmt.Sprintf("port %s holds pkey 0x0065 as not a member, want full", fabricsim.HostGUID(2))
	if j.Status != store.StatusRunning || !strings.Contains(j.Description, want) {
		t.Fatalf("H2's job, whose table lacks 0x0065: %s %q; want Running, saying %q", j.Status, j.Description, want)
	}
	j = r.settle(h2.ID)
	if j.Status != store.StatusFailed || !strings.Contains(j.Error, "within verify_timeout (2s): "+want) {
		t.Fatalf("H2's job after verify_timeout: %s %q; want Failed saying why", j.Status, j.Error)
	}
}

// TestReadBackHoldsOnlyTheUnprovenJob: two ports in one sweep, H1's table
// showing its change and H2's not: H1's job completes at once, not after
// H2's verify_timeout; a later change applied and proven meanwhile completes
// its own job and not H2's; H2's fails after verify_timeout.
func TestReadBackHoldsOnlyTheUnprovenJob(t *testing.T) {
	r := newReadbackRig(t, 5*time.Second)
	r.network(101)
	r.applied("network")
	h1 := r.port("port-h1", uint64(fabricsim.HostGUID(1)))
	h2 := r.port("port-h2", uint64(fabricsim.HostGUID(2)))
	r.applied("H1's and H2's ports")
	if j := r.job(h1.ID); j.Status != store.StatusCompleted {
		t.Fatalf("H1's job, whose table holds 0x8065, beside H2's unproven one: %s %q", j.Status, j.Description)
	}
	want := fmt.Sprintf("port %s holds pkey 0x0065 as not a member, want full", fabricsim.HostGUID(2))
	if j := r.job(h2.ID); j.Status != store.StatusRunning || !strings.Contains(j.Description, want) {
		t.Fatalf("H2's job: %s %q; want Running, saying %q", j.Status, j.Description, want)
	}
	vlan := int64(102)
	later, err := r.st.RecordNetwork(t.Context(), store.NetworkChange{Operation: store.OpCreateNetwork,
		Network: store.NetworkSpec{ID: "other-tenant", Name: "o", Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &vlan}})
	if err != nil {
		t.Fatal(err)
	}
	r.applied("a later change, proven")
	if j := r.job(later.ID); j.Status != store.StatusCompleted {
		t.Fatalf("the later change's job: %s %q", j.Status, j.Description)
	}
	if j := r.job(h2.ID); j.Status != store.StatusRunning {
		t.Fatalf("H2's job after a later revision's apply: %s %q; want still Running", j.Status, j.Error)
	}
	if j := r.settle(h2.ID); j.Status != store.StatusFailed || !strings.Contains(j.Error, "within verify_timeout (5s): "+want) {
		t.Fatalf("H2's job after verify_timeout: %s %q; want Failed saying why", j.Status, j.Error)
	}
}

// TestReadBackNamesOnlyTheJobsOwnPorts: two tenants' jobs wait in one
// sweep, H2's and H3's (neither table holds 0x0065): each job's description
// names its own port and not the other's, so that a tenant reading its job
// learns nothing of another tenant's hosts.
func TestReadBackNamesOnlyTheJobsOwnPorts(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	r.network(101)
	r.applied("network")
	h2 := r.port("port-h2", uint64(fabricsim.HostGUID(2)))
	h3 := r.port("port-h3", uint64(fabricsim.HostGUID(3)))
	r.applied("H2's and H3's ports")
	for _, c := range []struct {
		id         int64
		own, other fabric.GUID
	}{{h2.ID, fabricsim.HostGUID(2), fabricsim.HostGUID(3)}, {h3.ID, fabricsim.HostGUID(3), fabricsim.HostGUID(2)}} {
		j := r.job(c.id)
		if j.Status != store.StatusRunning || !strings.Contains(j.Description, "port "+c.own.String()) {
			t.Errorf("job %d: %s %q; want Running, naming port %s", c.id, j.Status, j.Description, c.own)
		}
		if strings.Contains(j.Description, c.other.String()) {
			t.Errorf("job %d of port %s names the other tenant's port %s: %q", c.id, c.own, c.other, j.Description)
		}
	}
}

// newTerm ends the rig's term and starts the next, as a restarted manager
// (or a new leader) does: what the old term kept in memory is gone.
func (r *readbackRig) newTerm() {
	r.t.Helper()
	r.term.tail.Close()
	id, err := r.st.NewTerm(r.t.Context(), "restarted")
	if err != nil {
		r.t.Fatal(err)
	}
	r.term = &term{Applier: r.term.Applier, id: id, applied: -1}
	if err := r.term.startLog(""); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { r.term.tail.Close() })
}

// TestReadBackHeldJobAcrossANewTerm: a job held for its port's table by one
// term is not completed by the next term's first apply, which reads its
// recorded place again: nothing of what a job must show is the term's.
func TestReadBackHeldJobAcrossANewTerm(t *testing.T) {
	r := newReadbackRig(t, 3*time.Second)
	r.network(101)
	r.applied("network")
	h2 := r.port("port-h2", uint64(fabricsim.HostGUID(2)))
	r.applied("H2's port")
	if j := r.job(h2.ID); j.Status != store.StatusRunning {
		t.Fatalf("H2's job: %s %q; want Running", j.Status, j.Description)
	}
	r.newTerm()
	r.applied("the new term's first apply")
	want := fmt.Sprintf("port %s holds pkey 0x0065 as not a member, want full", fabricsim.HostGUID(2))
	if j := r.job(h2.ID); j.Status != store.StatusRunning || !strings.Contains(j.Description, want) {
		t.Fatalf("H2's job after a new term's apply: %s %q; want Running, saying %q", j.Status, j.Description, want)
	}
	if j := r.settle(h2.ID); j.Status != store.StatusFailed || !strings.Contains(j.Error, want) {
		t.Fatalf("H2's job after verify_timeout: %s %q", j.Status, j.Error)
	}
}

// cancelOnDial is the fabric's dialer, ending the term (cancel) as a read
// starts: the window of a term that ends mid-read.
type cancelOnDial struct {
	pkeyread.Dialer
	cancel context.CancelFunc
}

func (d cancelOnDial) Dial(ctx context.Context) (pkeyread.Conn, error) {
	d.cancel()
	return d.Dialer.Dial(ctx)
}

// TestReadBackTermEndsMidRead: reads cut by the term's end prove nothing and
// fail nothing, even past verify_timeout (every write of the proof must stay
// bound to the term's context); a read on a live context takes it up again.
func TestReadBackTermEndsMidRead(t *testing.T) {
	r := newReadbackRig(t, time.Nanosecond)
	r.network(101)
	r.applied("network")
	h2 := r.port("port-h2", uint64(fabricsim.HostGUID(2)))
	ctx, cancel := context.WithCancel(t.Context())
	r.term.Cfg.Readback.Dialer = cancelOnDial{Dialer: r.term.Cfg.Readback.Dialer, cancel: cancel}
	if res := r.term.apply(ctx); res != applyRetry && res != applyDone {
		t.Fatalf("apply: %v", res)
	}
	if j := r.job(h2.ID); j.Status != store.StatusRunning || strings.Contains(j.Description, "P_Key") {
		t.Fatalf("job after a read the term's end cut: %s %q %q; want Running, untouched", j.Status, j.Description, j.Error)
	}
	// The proof resumes at the next read on a live context: H2's table
	// lacks the pkey, and verify_timeout has passed.
	r.term.Cfg.Readback.Dialer = r.term.Cfg.Readback.Dialer.(cancelOnDial).Dialer
	if j := r.settle(h2.ID); j.Status != store.StatusFailed || !strings.Contains(j.Error, "verify_timeout") {
		t.Fatalf("job read again after the cut: %s %q", j.Status, j.Error)
	}
}

// TestReadBackPortMoved: a dump that places H1 at another port's LID (a
// port re-LIDed since OpenSM's last sweep) fails the read, saying so; the
// next dump (OpenSM's next sweep) places it again, and the job completes.
func TestReadBackPortMoved(t *testing.T) {
	r := newReadbackRig(t, time.Minute)
	r.network(101)
	r.applied("network")
	lid := regexp.MustCompile(`\{H2\} LID:(\w+)`).FindSubmatch(r.realDump)
	moved := regexp.MustCompile(`\{H1\} LID:\w+`).ReplaceAll(r.realDump, []byte("{H1} LID:"+string(lid[1])))
	if err := os.WriteFile(r.dump, moved, 0o644); err != nil {
		t.Fatal(err)
	}
	h1 := r.port("port-h1", uint64(fabricsim.HostGUID(1)))
	r.applied("H1's port")
	j := r.job(h1.ID)
	if j.Status != store.StatusRunning || !strings.Contains(j.Description, "not at its LID: the LID answers as port "+fabricsim.HostGUID(2).String()) {
		t.Fatalf("H1's job, with H1 at H2's LID: %s %q; want Running, saying H1 moved", j.Status, j.Description)
	}
	if err := os.WriteFile(r.dump, r.realDump, 0o644); err != nil {
		t.Fatal(err)
	}
	if j = r.settle(h1.ID); j.Status != store.StatusCompleted {
		t.Fatalf("H1's job once the dump places it: %s %q", j.Status, j.Error)
	}
}

// TestWantOf: a place's expectation is the file's membership of the GUID in
// the pkey's statement; a keyword that may name it leaves it to the log.
func TestWantOf(t *testing.T) {
	g := fabric.GUID(0x0002c90300000101)
	file := func(t *testing.T, text string) *partitions.File {
		f, err := partitions.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name, text string
		want       pkeyread.Membership
		ok         bool
	}{
		{"full", "a=0x0065 : 0x0002c90300000101=full ;", pkeyread.Full, true},
		{"limited", "a=0x0065 : 0x0002c90300000101=limited ;", pkeyread.Limited, true},
		{"absent", "a=0x0065 : 0x0002c90300000201=full ;", pkeyread.NotMember, true},
		{"no statement", "a=0x0066 : 0x0002c90300000101=full ;", pkeyread.NotMember, true},
		{"switches only", "a=0x0065 : ALL_SWITCHES=full ;", pkeyread.NotMember, true},
		{"keyword", "a=0x0065 : ALL=limited ;", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, ok := wantOf(file(t, tc.text), place{port: g, pkey: 0x0065})
			if ok != tc.ok || ok && (w.Membership != tc.want || w.Port != g || w.PKey != 0x0065) {
				t.Errorf("wantOf = %+v, %v; want %s, %v", w, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestReadBackPKeyJobReadsItsChangeOnly: a Kubernetes pkey's job is proven
// on the GUIDs its request changed, not on every member: a member whose
// table lacks the pkey, whose own job failed, holds no later job of the pkey.
func TestReadBackPKeyJobReadsItsChangeOnly(t *testing.T) {
	r := newReadbackRig(t, time.Second)
	r.network(101)
	r.applied("network") // a state to compare the next sweeps with
	h2 := r.kubeAdd(0x1001, fabricsim.HostGUID(2))
	r.applied("H2, whose table OpenSM did not give the pkey")
	want := fmt.Sprintf("port %s holds pkey 0x1001 as not a member, want full", fabricsim.HostGUID(2))
	if j := r.settle(h2.ID); j.Status != store.StatusFailed || !strings.Contains(j.Error, want) {
		t.Fatalf("the job of H2: %s %q; want Failed, saying %q", j.Status, j.Error, want)
	}
	h1 := r.kubeAdd(0x1001, fabricsim.HostGUID(1))
	r.applied("H1 into the pkey")
	if j := r.settle(h1.ID); j.Status != store.StatusCompleted {
		t.Fatalf("H1's job, whose table holds 0x9001: %s %q %q", j.Status, j.Description, j.Error)
	}
}

// TestReadBackGUIDNotAPort: a Kubernetes GUID that OpenSM's subnet dump does
// not list (an SR-IOV VF's, which no SMP can read) is proven by the log, and
// its job completes at once; a Neutron port's GUID not in the dump (a host
// down or gone) holds its job, saying so, until verify_timeout fails it.
func TestReadBackGUIDNotAPort(t *testing.T) {
	r := newReadbackRig(t, 2*time.Second)
	r.network(101)
	r.applied("network")
	vf := r.kubeAdd(0x1001, 0x0002c90300009901)
	gone := r.port("port-gone", 0x0002c90300009902)
	r.applied("a VF's GUID and a port of a host gone")
	note := "(0x0002c90300009901: not a port on the fabric: proven by OpenSM's log)"
	if j := r.job(vf.ID); j.Status != store.StatusCompleted || !strings.HasSuffix(j.Description, note) ||
		strings.Contains(j.Description, "\n") {
		t.Fatalf("the Kubernetes job of a GUID that is not a port: %s %q; want Completed on the log, saying so", j.Status, j.Description)
	}
	want := "port 0x0002c90300009902: not in OpenSM's subnet dump"
	if j := r.job(gone.ID); j.Status != store.StatusRunning || !strings.Contains(j.Description, want) {
		t.Fatalf("the Neutron port's job: %s %q; want Running, saying %q", j.Status, j.Description, want)
	}
	if j := r.settle(gone.ID); j.Status != store.StatusFailed || !strings.Contains(j.Error, want) {
		t.Fatalf("the Neutron port's job after verify_timeout: %s %q", j.Status, j.Error)
	}
}
