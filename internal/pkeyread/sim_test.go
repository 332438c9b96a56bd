package pkeyread_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The partitions of the tests' fabric: H1 a full member of 0x0064, H2 a
// limited one, H3 and H4 only in the default partition.
const testPartitions = "Default=0x7fff,ipoib : ALL=limited, SELF=full ;\n" +
	"net1=0x0064 : %s=full, %s ;\n"

// sweptFabric starts a simulated fabric of hosts hosts on switches switches
// and a real OpenSM on it with testPartitions, and returns once the subnet is
// up: the tables are programmed and OpenSM's cache has the LIDs.
func sweptFabric(t testing.TB, hosts, switches int) *fabricsim.Fabric {
	f, _ := sweptFabricSM(t, hosts, switches)
	return f
}

// sweptFabricSM is sweptFabric, and a function that gives OpenSM new
// partitions and returns once a sweep after them brought the subnet up.
func sweptFabricSM(t testing.TB, hosts, switches int) (*fabricsim.Fabric, func(partitions string)) {
	t.Helper()
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	f := fabricsim.StartT(t, fabricsim.Options{Hosts: hosts, Switches: switches})
	partitions := filepath.Join(f.Dir, "partitions.conf")
	conf := filepath.Join(f.Dir, "opensm.conf")
	logFile := filepath.Join(f.Dir, "opensm.log")
	write(t, partitions, fmt.Sprintf(testPartitions, fabricsim.HostGUID(1), fabricsim.HostGUID(2)))
	write(t, conf, "log_flags 0x03\nforce_log_flush TRUE\nsweep_interval 0\n")
	cmd := exec.Command(opensm, "-F", conf, "-g", f.SMGUID.String(), "-P", partitions, "-f", logFile, "-d", "2",
		"--dump_files_dir", f.Dir)
	cmd.Dir = f.Dir
	cmd.Env = append(os.Environ(), f.Env()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the fabric stops: clean-ups run last first
		cmd.Process.Kill()
		cmd.Wait()
	})
	subnetUp := func(from int) func() bool {
		return func() bool {
			log, _ := os.ReadFile(logFile)
			return len(log) > from && strings.Contains(string(log[from:]), "-> SUBNET UP\n")
		}
	}
	waitFor(t, "OpenSM to bring the subnet up", subnetUp(0))
	return f, func(text string) {
		t.Helper()
		write(t, partitions+".new", text)
		if err := os.Rename(partitions+".new", partitions); err != nil {
			t.Fatal(err)
		}
		log, _ := os.ReadFile(logFile)
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "OpenSM's sweep with the new partitions", subnetUp(len(log)))
	}
}

func write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// targets are the fabric's hosts with their LIDs and the switch ports facing
// them, from OpenSM's cache.
func targets(t testing.TB, f *fabricsim.Fabric) []pkeyread.Target {
	t.Helper()
	var out []pkeyread.Target
	for _, h := range f.Hosts {
		lid, err := f.LID(h.PortGUID)
		if err != nil {
			t.Fatal(err)
		}
		swLID, err := f.LID(h.SwitchGUID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pkeyread.Target{Port: h.PortGUID, LID: uint16(lid),
			Switch: pkeyread.SwitchPort{GUID: h.SwitchGUID, LID: uint16(swLID), Port: h.SwitchPort}})
	}
	return out
}

func simReader(t testing.TB, f *fabricsim.Fabric) *pkeyread.Reader {
	t.Helper()
	d, ok := pkeyread.SimDialerFromEnv(f.Env())
	if !ok {
		t.Fatalf("the fabric's environment names no simulator: %q", f.Env())
	}
	return &pkeyread.Reader{Dialer: d, MKey: 0, Workers: 3}
}

// TestTargets builds the targets from OpenSM's subnet dump and finds what the
// harness finds in OpenSM's LID cache and its own topology.
func TestTargets(t *testing.T) {
	f := sweptFabric(t, 6, 2)
	topo, err := topology.Load(filepath.Join(f.Dir, topology.FileName))
	if err != nil {
		t.Fatal(err)
	}
	want := targets(t, f)
	var ports []fabric.GUID
	for _, w := range want {
		ports = append(ports, w.Port)
	}
	absent := fabricsim.HostGUID(7)
	got, missing := pkeyread.Targets(topo, append(ports, absent))
	routed := slices.Clone(got)
	for i := range got { // the routes are checked against smpquery's below
		got[i].Path, got[i].Switch.Path = pkeyread.DRPath{}, pkeyread.DRPath{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Targets:\n%+v\nwant\n%+v", got, want)
	}
	for _, tg := range routed {
		if guid := guidAt(t, f, tg.Path, "PortGuid"); guid != tg.Port {
			t.Errorf("%s: smpquery -D nodeinfo %s answers as port %s", tg.Port, tg.Path, guid)
		}
		if guid := guidAt(t, f, tg.Switch.Path, "Guid"); guid != tg.Switch.GUID {
			t.Errorf("switch %s: smpquery -D nodeinfo %s answers as node %s", tg.Switch.GUID, tg.Switch.Path, guid)
		}
	}
	if len(missing) != 1 || !strings.Contains(missing[0].Error(), absent.String()+": not in OpenSM's subnet dump") {
		t.Errorf("missing %v, want %s", missing, absent)
	}
}

// guidAt is the GUID (field: PortGuid, or Guid, the node's) infiniband-diags'
// smpquery reads at a directed route: the routes' own check, independent of
// this package's SMPs.
func guidAt(t testing.TB, f *fabricsim.Fabric, path pkeyread.DRPath, field string) fabric.GUID {
	t.Helper()
	if !path.Known() {
		t.Fatal("no directed route")
	}
	out, err := f.Run(t.Context(), "smpquery", "-D", "nodeinfo", path.String())
	if err != nil {
		t.Fatalf("smpquery -D nodeinfo %s: %v", path, err)
	}
	for line := range strings.Lines(string(out)) {
		if name, value, ok := strings.Cut(line, ":"); ok && name == field {
			g, err := fabric.ParseGUID(strings.Trim(strings.TrimSpace(value), "."))
			if err != nil {
				t.Fatalf("smpquery -D nodeinfo %s: %s %q: %v", path, field, value, err)
			}
			return g
		}
	}
	t.Fatalf("smpquery -D nodeinfo %s: no %s in %s", path, field, out)
	return 0
}

// TestReadSimulatedFabric reads every host port and the switch port facing it
// on two switches, and compares with the harness's own reads (smpquery's
// equals, checked in e2e/fabricsim) and with the partitions OpenSM applied.
func TestReadSimulatedFabric(t *testing.T) {
	f := sweptFabric(t, 6, 2)
	r := simReader(t, f)
	want := map[fabric.GUID]pkeyread.Membership{
		fabricsim.HostGUID(1): pkeyread.Full, fabricsim.HostGUID(2): pkeyread.Limited,
		fabricsim.HostGUID(3): pkeyread.NotMember,
	}
	tg := targets(t, f)
	results := r.Read(t.Context(), tg)
	if len(results) != len(tg) {
		t.Fatalf("%d results for %d targets", len(results), len(tg))
	}
	for i, res := range results {
		if res.Err != nil {
			t.Errorf("%s: %v", tg[i].Port, res.Err)
			continue
		}
		if res.Target != tg[i] {
			t.Errorf("result %d is of %+v, want %+v", i, res.Target, tg[i])
		}
		harness, err := f.PKeys(t.Context(), tg[i].Port)
		if err != nil || !slices.Equal(harness, res.PKeys) {
			t.Errorf("%s: read %#04x, the harness reads %#04x (%v)", tg[i].Port, res.PKeys, harness, err)
		}
		harness, err = f.SwitchPKeys(t.Context(), tg[i].Port)
		if err != nil || !slices.Equal(harness, res.SwitchPKeys) || len(harness) == 0 {
			t.Errorf("switch port facing %s: read %#04x, the harness reads %#04x (%v)", tg[i].Port, res.SwitchPKeys, harness, err)
		}
		if m, ok := want[tg[i].Port]; ok && res.PKeys.Membership(0x64) != m {
			t.Errorf("%s holds 0x0064 as %s, want %s (table %#04x)", tg[i].Port, res.PKeys.Membership(0x64), m, res.PKeys)
		}
		if res.PKeys.Membership(0x7fff) == pkeyread.NotMember {
			t.Errorf("%s lacks the default partition: %#04x", tg[i].Port, res.PKeys)
		}
	}
}

// TestProveOnSimulatedFabric: a change is proven by the tables once OpenSM
// swept it in, not before: H2 leaves 0x0064, H3 joins it as a full member.
func TestProveOnSimulatedFabric(t *testing.T) {
	f, apply := sweptFabricSM(t, 4, 1)
	r := simReader(t, f)
	tg := targets(t, f)
	wants := []pkeyread.Want{{Port: fabricsim.HostGUID(2), PKey: 0x64, Membership: pkeyread.NotMember},
		{Port: fabricsim.HostGUID(3), PKey: 0x64, Membership: pkeyread.Full}}
	for _, v := range pkeyread.Prove(r.Read(t.Context(), tg), wants) {
		if v.Proven {
			t.Errorf("%v proven before OpenSM applied it", v.Want)
		}
	}
	apply(fmt.Sprintf(testPartitions, fabricsim.HostGUID(1), fabricsim.HostGUID(3).String()+"=full"))
	for _, v := range pkeyread.Prove(r.Read(t.Context(), tg), wants) {
		if !v.Proven {
			t.Errorf("%v not proven after OpenSM's sweep: %s", v.Want, v.Reason)
		}
	}
}

// TestReadFailures: a port whose answers are lost, a port unlinked, a LID
// that answers as another port and a read whose context ends fail that port
// only, saying why; the other ports are read on the same workers. (Each
// failure in a phase of its own: an unlinked port makes OpenSM sweep, and a
// sweep that cannot set a table leaves that port's routes in doubt.)
func TestReadFailures(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	r := simReader(t, f)
	r.PortTimeout = 300 * time.Millisecond
	ctx := t.Context()
	tg := targets(t, f)

	moved := tg[0]
	moved.LID = tg[3].LID // H1 looked for at H4's LID
	moved.Switch = pkeyread.SwitchPort{}
	movedSwitch := tg[1]
	movedSwitch.Switch.LID = tg[2].LID // the switch looked for at H3's LID
	noLID := tg[2]
	noLID.LID = 0
	noSwitchLID := tg[2]
	noSwitchLID.Switch.LID = 0
	results := r.Read(ctx, []pkeyread.Target{moved, movedSwitch, noLID, noSwitchLID})
	for _, res := range results[2:] {
		if !errors.Is(res.Err, pkeyread.ErrNoLID) {
			t.Errorf("%+v: %v, want ErrNoLID", res.Target, res.Err)
		}
	}
	if err := results[0].Err; !errors.Is(err, pkeyread.ErrMoved) || !strings.Contains(err.Error(), fabricsim.HostGUID(4).String()) {
		t.Errorf("H1 at H4's LID: %v, want ErrMoved naming H4", err)
	}
	if err := results[1].Err; !errors.Is(err, pkeyread.ErrMoved) || !strings.Contains(err.Error(), "switch") {
		t.Errorf("H2's switch at H3's LID: %v, want ErrMoved", err)
	}

	if _, err := f.Sim(ctx, `Error "H2"[1] 100 22`); err != nil { // drop every P_KeyTable MAD to H2
		t.Fatal(err)
	}
	results = r.Read(ctx, tg)
	for i, res := range results {
		switch {
		case i == 1 && (res.Err == nil || !strings.Contains(res.Err.Error(), "P_KeyTable block 0: no answer")):
			t.Errorf("H2, whose P_KeyTable MADs are dropped: %v, want no answer", res.Err)
		case i != 1 && res.Err != nil:
			t.Errorf("%s: %v", res.Target.Port, res.Err)
		}
	}
	// Healed, the same reader reads H2 again.
	if _, err := f.Sim(ctx, `Error "H2"[1] 0`); err != nil {
		t.Fatal(err)
	}
	if res := r.Read(ctx, tg[1:2]); res[0].Err != nil || res[0].PKeys.Membership(0x64) != pkeyread.Limited {
		t.Errorf("H2 healed: %#04x, %v", res[0].PKeys, res[0].Err)
	}

	if err := f.Unlink(ctx, "H3"); err != nil {
		t.Fatal(err)
	}
	if res := r.Read(ctx, tg[2:3]); res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "NodeInfo: no answer") {
		t.Errorf("H3, unlinked: %v, want no answer", res[0].Err)
	}
	for _, res := range results {
		if res.Err != nil && (res.PKeys != nil || res.SwitchPKeys != nil) {
			t.Errorf("%s failed (%v) but returned tables", res.Target.Port, res.Err)
		}
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, res := range r.Read(cancelled, tg) {
		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("%s read after cancellation: %v", res.Target.Port, res.Err)
		}
	}
}
