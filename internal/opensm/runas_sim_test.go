package opensm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
)

// TestRealOpenSMRunsAsItsOwnUser runs the real OpenSM on a simulated fabric
// as afm-opensm, in the layout of TestOpenSMRunsAsItsOwnUser (the manager's
// configuration and database readable by anyone by their modes, config_dir
// left root's): OpenSM sweeps, applies a partition at SIGHUP from files the
// manager rewrote, and its process runs as the user, without capabilities,
// with none of the manager's variables, in a view (/proc/PID/root) where the
// configuration's directory is empty and the database absent, while its own
// opensm.conf is there.
func TestRealOpenSMRunsAsItsOwnUser(t *testing.T) {
	u := requireSMUser(t)
	fab := fabricsim.StartT(t, fabricsim.Options{})
	l := newProbeLayout(t, 0o644)
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	partitions := filepath.Join(l.configDir, "partitions.conf")
	conf, err := RenderConf(ConfOptions{PartitionsFile: partitions, LogFile: l.logFile,
		PerModuleLoggingFile: filepath.Join(l.configDir, "per-module-logging.conf"),
		Passthrough:          []KeyValue{{"guid", fab.SMGUID.String()}, {"sa_key", saKey}}})
	if err != nil {
		t.Fatal(err)
	}
	// The fabric's variables, with OpenSM's cache and temporary files in
	// its own directory rather than the fabric's (a test's, closed to others).
	var env []string
	for _, kv := range fab.Env() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "OSM_CACHE_DIR" || k == "OSM_TMP_DIR" {
			kv = k + "=" + filepath.Join(l.configDir, "cache")
		}
		env = append(env, kv)
	}
	for path, text := range map[string][]byte{
		filepath.Join(l.configDir, "opensm.conf"):             conf,
		filepath.Join(l.configDir, "per-module-logging.conf"): PerModuleLoggingConf(),
		partitions:                               []byte(defaultPartition),
		filepath.Join(l.configDir, "opensm.env"): []byte(strings.Join(env, "\n") + "\n"),
	} {
		if err := WriteFileAtomic(path, text, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(l.configDir, "cache"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(probeEnvVar, probeToken)
	cfg := l.config(u)
	cfg.Command = []string{opensm}
	p := NewProcess(cfg)
	startProcess(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("not ready: %v (driver: %+v)", err, p.Status())
	}
	pid := p.Current().PID()
	checkRealOpenSMConfined(t, u, l, pid)

	// The manager's rewrite, OpenSM's read at SIGHUP.
	if err := WriteFileAtomic(partitions, []byte(h1Full65()), 0o644); err != nil {
		t.Fatal(err)
	}
	from, err := LogPosition(l.logFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := waitSweep(ctx, l.logFile, from, 30*time.Second)
	if err != nil || res.Outcome != Applied {
		t.Fatalf("sweep after SIGHUP: %+v, %v; want applied", res, err)
	}
	// The fabric's queries find LIDs in the fabric's directory, where
	// OpenSM's cache would have been.
	lids, err := os.ReadFile(filepath.Join(l.configDir, "cache", "guid2lid"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fab.Dir, "guid2lid"), lids, 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := fab.SwitchPKeys(ctx, fab.Host("H1").PortGUID); err != nil || !slices.Contains(keys, 0x8065) {
		t.Errorf("switch port facing H1: %#04x, %v; want 0x8065 among them", keys, err)
	}
}

// checkRealOpenSMConfined checks OpenSM's process pid from outside: its
// user, capabilities, environment and view of the files.
func checkRealOpenSMConfined(t *testing.T, u *RunAs, l probeLayout, pid int) {
	t.Helper()
	proc := fmt.Sprintf("/proc/%d", pid)
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		fields := strings.Fields(v)
		switch {
		case k == "Uid" && !slices.Equal(fields, slices.Repeat([]string{fmt.Sprint(u.UID)}, 4)):
			t.Errorf("OpenSM's uids %q, want %s's %d", fields, u.Name, u.UID)
		case k == "Gid" && !slices.Equal(fields, slices.Repeat([]string{fmt.Sprint(u.GID)}, 4)):
			t.Errorf("OpenSM's gids %q, want %d", fields, u.GID)
		case (k == "CapEff" || k == "CapPrm" || k == "CapAmb") && fields[0] != "0000000000000000":
			t.Errorf("OpenSM's %s is %s, want none", k, fields[0])
		}
	}
	environ, err := os.ReadFile(proc + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(environ), probeEnvVar) || strings.Contains(string(environ), probeToken) {
		t.Errorf("OpenSM's environment holds the manager's variable %s", probeEnvVar)
	}
	root := proc + "/root"
	if entries, err := os.ReadDir(root + filepath.Dir(l.afmConf)); err != nil || len(entries) != 0 {
		t.Errorf("the configuration's directory in OpenSM's view: %d entries, %v; want it empty", len(entries), err)
	}
	if _, err := os.Stat(root + l.db); !os.IsNotExist(err) {
		t.Errorf("the database in OpenSM's view: %v, want it absent", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(root+filepath.Join(l.configDir, "opensm.conf"), &st); err != nil || st.Uid != u.UID {
		t.Errorf("opensm.conf in OpenSM's view: uid %d, %v; want it there, %s's", st.Uid, err, u.Name)
	}
}
