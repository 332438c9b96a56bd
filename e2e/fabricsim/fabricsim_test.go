package fabricsim

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// portGUIDAt asks for the NodeInfo at a directed route ("0" is the SM's own
// HCA, "0,1,2" is S1 port 2's neighbour) and returns its port GUID. Directed
// routes need no SM and no LIDs.
func portGUIDAt(ctx context.Context, f *Fabric, route string) (string, error) {
	out, err := f.Run(ctx, "smpquery", "-D", "nodeinfo", route)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && name == "PortGuid" {
			return strings.Trim(value, "."), nil
		}
	}
	return "", nil
}

func TestFabricWithoutSM(t *testing.T) {
	f := StartT(t, Options{Hosts: 2})
	ctx := t.Context()

	env := strings.Join(f.Env(), "\n")
	for _, want := range []string{"LD_PRELOAD=/", "IBSIM_SOCKNAME=fabsim", "SIM_HOST=SM", "OSM_CACHE_DIR=" + f.Dir, "OSM_TMP_DIR=" + f.Dir} {
		if !strings.Contains(env, want) {
			t.Errorf("environment lacks %q:\n%s", want, env)
		}
	}
	if data, err := os.ReadFile(f.EnvFile()); err != nil || strings.TrimSpace(string(data)) != env {
		t.Errorf("env file %q, %v; want the lines of Env()", data, err)
	}
	if h := f.Host("H2"); h.PortGUID != HostGUID(2) || h.Switch != "S1" || h.SwitchPort != 3 {
		t.Errorf("H2 = %+v", h)
	}

	if got, err := portGUIDAt(ctx, f, "0"); err != nil || got != SMGUID.String() {
		t.Errorf("port at route 0: %q, %v; want the SM's %s", got, err, SMGUID)
	}
	h1Route := "0,1,2" // out of the SM's port 1, into S1, out of S1 port 2
	if got, err := portGUIDAt(ctx, f, h1Route); err != nil || got != HostGUID(1).String() {
		t.Errorf("port at route %s: %q, %v; want H1's %s", h1Route, got, err, HostGUID(1))
	}

	// Console commands change the fabric.
	if help, err := f.Sim(ctx, "help"); err != nil || !strings.Contains(help, "Unlink") {
		t.Errorf("help: %q, %v", help, err)
	}
	if _, err := f.Sim(ctx, `Unlink "H1"`); err != nil {
		t.Fatal(err)
	}
	if got, err := portGUIDAt(ctx, f, h1Route); err == nil {
		t.Errorf("H1 unlinked, but route %s still answers %q", h1Route, got)
	}
	if _, err := f.Sim(ctx, `ReLink "H1"`); err != nil {
		t.Fatal(err)
	}
	if got, err := portGUIDAt(ctx, f, h1Route); err != nil || got != HostGUID(1).String() {
		t.Errorf("H1 relinked: %q, %v", got, err)
	}
	if _, err := f.Sim(ctx, "two\nlines"); err == nil {
		t.Error("a command with a newline was sent")
	}

	// Another process sees the same fabric through its directory.
	opened, err := Open(f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opened.Hosts, f.Hosts) || !slices.Equal(opened.Env(), f.Env()) || !opened.IbsimRunning() {
		t.Errorf("Open: hosts %+v env %q running %v", opened.Hosts, opened.Env(), opened.IbsimRunning())
	}
	if _, err := Start(ctx, f.Dir, Options{}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Start in the same directory: %v", err)
	}

	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if f.IbsimRunning() || opened.IbsimRunning() {
		t.Error("ibsim still runs after Stop")
	}
	leftovers, _ := filepath.Glob(filepath.Join(f.Dir, "sys-*"))
	for _, name := range []string{envFileName, ibsimCtlFileName, ibsimPIDFileName} {
		if _, err := os.Stat(filepath.Join(f.Dir, name)); err == nil {
			leftovers = append(leftovers, name)
		}
	}
	if len(leftovers) > 0 {
		t.Errorf("left behind after Stop: %q", leftovers)
	}
	if _, err := f.Sim(ctx, "help"); err == nil {
		t.Error("Sim works on a stopped fabric")
	}
}

// PKeys needs the LIDs an SM assigns: run OpenSM the way the program under
// test will, and read the tables it programs.
func TestPKeysWithOpenSM(t *testing.T) {
	f := StartT(t, Options{Hosts: 2})
	ctx := t.Context()
	startOpenSM(t, f, "net=0x0065 : "+HostGUID(1).String()+"=full, "+HostGUID(2).String()+" ;\n")

	check := func(what string, got []uint16, err error, want []uint16) {
		t.Helper()
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %#04x, %v; want %#04x", what, got, err, want)
		}
	}
	keys, err := f.PKeys(ctx, HostGUID(1))
	check("H1", keys, err, []uint16{0x7fff, 0x8065})
	keys, err = f.PKeys(ctx, HostGUID(2))
	check("H2", keys, err, []uint16{0x7fff, 0x0065})
	keys, err = f.SwitchPKeys(ctx, HostGUID(1))
	check("switch port facing H1", keys, err, []uint16{0x7fff, 0x8065})
	keys, err = f.PKeys(ctx, SMGUID)
	check("SM", keys, err, []uint16{0xffff})

	// The reads over the simulator's protocol are what smpquery reads.
	for _, q := range []struct {
		what string
		guid fabric.GUID
		port []int
	}{{"H1", HostGUID(1), nil}, {"H2", HostGUID(2), nil}, {"SM", SMGUID, nil}, {"switch port facing H2", HostGUID(2), []int{3}}} {
		var lid int
		var err error
		if q.port == nil {
			lid, err = f.LID(q.guid)
		} else {
			lid, err = f.LID(f.Host("H2").SwitchGUID)
		}
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.pkeysBySMPQuery(ctx, lid, q.port...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.smpClient().pkeys(ctx, lid, append(q.port, 0)[0])
		check(q.what+" read over the simulator's protocol", got, err, want)
	}

	// A dropped MAD fails the read (no hang); once healed, the next read
	// attaches again and succeeds.
	if _, err := f.Sim(ctx, `Error "H1"[1] 100 22`); err != nil {
		t.Fatal(err)
	}
	if keys, err := f.PKeys(ctx, HostGUID(1)); err == nil {
		t.Errorf("H1's table read while the simulator drops its P_KeyTable MADs: %#04x", keys)
	}
	if _, err := f.Sim(ctx, `Error "H1"[1] 0`); err != nil {
		t.Fatal(err)
	}
	keys, err = f.PKeys(ctx, HostGUID(1))
	check("H1 once healed", keys, err, []uint16{0x7fff, 0x8065})

	if _, err := f.PKeys(ctx, HostGUID(9)); err == nil {
		t.Error("PKeys of a port that is not on the fabric")
	}
	if _, err := f.SwitchPKeys(ctx, SMGUID); err == nil {
		t.Error("SwitchPKeys of the SM, which is no host")
	}
}

// startOpenSM runs OpenSM on f, as the program under test will, with the
// Default partition and partitions (lines of partitions.conf), until the test
// ends; it returns once OpenSM has brought the subnet up.
func startOpenSM(t *testing.T, f *Fabric, partitions string) {
	t.Helper()
	opensm := RequireProgram(t, "opensm", "opensm")
	file := filepath.Join(f.Dir, "partitions.conf")
	content := "Default=0x7fff : ALL=limited, SELF=full ;\n" + partitions
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(f.Dir, "opensm.log")
	cmd := exec.Command(opensm, "-g", SMGUID.String(), "-P", file, "-f", logFile, "-d", "2")
	cmd.Dir = f.Dir
	cmd.Env = append(os.Environ(), f.Env()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the fabric stops (clean-ups run last first)
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if log, _ := os.ReadFile(logFile); strings.Contains(string(log), "-> SUBNET UP\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("OpenSM did not bring the subnet of %s up", f.Dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoFabricsAtOnce: two fabrics in one test (what the tests of a manager
// of several fabrics need) are independent: each has its own socket and env
// file, the same GUIDs, and its own OpenSM, whose partitions only its own
// hosts' tables hold.
func TestTwoFabricsAtOnce(t *testing.T) {
	f1, f2 := StartT(t, Options{Hosts: 2}), StartT(t, Options{Hosts: 2})
	sock := func(f *Fabric) string {
		for _, l := range f.Env() {
			if v, ok := strings.CutPrefix(l, "IBSIM_SOCKNAME="); ok {
				return v
			}
		}
		return ""
	}
	if f1.EnvFile() == f2.EnvFile() || sock(f1) == "" || sock(f1) == sock(f2) {
		t.Fatalf("env files %s and %s, sockets %q and %q: want each fabric its own", f1.EnvFile(), f2.EnvFile(), sock(f1), sock(f2))
	}
	if f1.Host("H1").PortGUID != f2.Host("H1").PortGUID || f1.SMGUID != f2.SMGUID {
		t.Errorf("H1 is %s and %s, the SM %s and %s: the fabrics should repeat their GUIDs",
			f1.Host("H1").PortGUID, f2.Host("H1").PortGUID, f1.SMGUID, f2.SMGUID)
	}
	// One pkey on both fabrics, with another member on each.
	startOpenSM(t, f1, "a=0x0064 : "+HostGUID(1).String()+"=full ;\n")
	startOpenSM(t, f2, "b=0x0064 : "+HostGUID(2).String()+"=full ;\n")
	for _, c := range []struct {
		f      *Fabric
		fabric string
		host   int
		want   []uint16
	}{
		{f1, "fabric 1", 1, []uint16{0x7fff, 0x8064}}, {f1, "fabric 1", 2, []uint16{0x7fff}},
		{f2, "fabric 2", 1, []uint16{0x7fff}}, {f2, "fabric 2", 2, []uint16{0x7fff, 0x8064}},
	} {
		got, err := c.f.PKeys(t.Context(), HostGUID(c.host))
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s H%d: %#04x, %v; want %#04x", c.fabric, c.host, got, err, c.want)
		}
	}
}

func TestParsePKeyTable(t *testing.T) {
	out := "   0: 0x7fff 0x0000 0x8066 0x0000 0x0000 0x0000 0x0000 0x0000\n" +
		"   8: 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0065\n" +
		"64 pkeys capacity for this port\n"
	got, err := parsePKeyTable([]byte(out))
	if err != nil || !slices.Equal(got, []uint16{0x7fff, 0x8066, 0x0065}) {
		t.Errorf("got %#04x, %v", got, err)
	}
	if _, err := parsePKeyTable([]byte("smpquery: iberror: failed\n")); err == nil {
		t.Error("no error for output without a table")
	}
}

func TestStartNamesMissingPackage(t *testing.T) {
	// Debian installs ibsim in /usr/bin, which LookPath searches only through
	// PATH (unlike /usr/sbin, where the diagnostics live).
	t.Setenv("PATH", t.TempDir())
	_, err := Start(t.Context(), t.TempDir(), Options{})
	if err == nil || !strings.Contains(err.Error(), "ibsim-utils") {
		t.Errorf("Start without ibsim in PATH: %v, want an error naming ibsim-utils", err)
	}
}

// A failed test's cleanup says whether the fabric's ibsim ran to the test's
// end, and how it ended if not: a simulator gone mid-test otherwise shows
// only as its clients' refused attaches.
func TestIbsimAtEnd(t *testing.T) {
	f := StartT(t, Options{Hosts: 1})
	if got := f.ibsimAtEnd(); !strings.HasPrefix(got, "ibsim ran to the test's end; the last lines of ") {
		t.Errorf("a running ibsim: %q", got)
	}
	if err := f.ibsim.Kill(); err != nil {
		t.Fatal(err)
	}
	<-f.exited
	got := f.ibsimAtEnd()
	if !strings.HasPrefix(got, "ibsim had ended before the test did: signal: killed; the last lines of "+
		filepath.Join(f.Dir, ibsimLogFileName)) {
		t.Errorf("an ibsim killed mid-test: %q", got)
	}
}
