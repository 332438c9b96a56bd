package opensm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// smUser is the user the package creates for OpenSM.
const smUser = "afm-opensm"

// requireSMUser returns the user OpenSM runs as in these tests, creating the
// system user afm-opensm where it is missing, as the package does (and says
// so). The tests need root: they start OpenSM as another user.
func requireSMUser(t *testing.T) *RunAs {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root: OpenSM is started as another user")
	}
	if u, err := LookupUser(smUser); err == nil {
		return u
	}
	out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
		"--shell", "/usr/sbin/nologin", smUser).CombinedOutput()
	if err != nil {
		if _, lerr := LookupUser(smUser); lerr != nil { // another test may have made it meanwhile
			testenv.Missing(t, "cannot create the user %s: %v: %s", smUser, err, out)
		}
	}
	t.Logf("created the system user %s (useradd --system), as the package does", smUser)
	u, err := LookupUser(smUser)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// The secrets the manager holds: in its configuration file, in its database
// and in its environment. The probe must see none of them.
const (
	probeToken  = "probe-api-token-never-for-opensm"
	probeDBText = "probe-database-row-never-for-opensm"
	probeEnvVar = "AFM_PROBE_MANAGER_SECRET"
)

// probeReport is what runProbe, started by the driver as OpenSM, found.
type probeReport struct {
	PID, UID, GID int
	Groups        []int
	Env           []string
	CapEff        string
	AFMConf       string   // the error reading the manager's configuration ("" read)
	AFMConfDir    []string // what it listed of its directory
	Database      string   // the error opening the database for writing
	DatabaseRead  string   // the error opening it for reading
	OpenSMConf    string   // the error reading its own opensm.conf
}

// runProbe stands in for OpenSM, started by the process driver exactly as
// OpenSM is (its -F, its directory, its environment and user): it tries the
// manager's files, writes what it found into its directory, writes the
// version line the supervisor waits for, and waits to be stopped.
func runProbe() {
	conf := os.Args[slices.Index(os.Args, "-F")+1]
	r := probeReport{PID: os.Getpid(), UID: os.Getuid(), GID: os.Getgid(), Env: os.Environ()}
	r.Groups, _ = os.Getgroups()
	r.CapEff = procStatus("CapEff")
	_, err := os.ReadFile(os.Getenv("PROBE_AFM_CONF"))
	r.AFMConf = errText(err)
	entries, _ := os.ReadDir(filepath.Dir(os.Getenv("PROBE_AFM_CONF")))
	for _, e := range entries {
		r.AFMConfDir = append(r.AFMConfDir, e.Name())
	}
	f, err := os.OpenFile(os.Getenv("PROBE_DB"), os.O_RDWR, 0)
	r.Database = errText(err)
	if err == nil {
		f.Close()
	}
	_, err = os.ReadFile(os.Getenv("PROBE_DB"))
	r.DatabaseRead = errText(err)
	_, err = os.ReadFile(conf)
	r.OpenSMConf = errText(err)
	b, _ := json.Marshal(r)
	report := fmt.Sprintf("probe-%d.json", r.PID)
	if err := os.WriteFile(report+".tmp", b, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "probe: write the report:", err)
		os.Exit(1)
	}
	if err := os.Rename(report+".tmp", report); err != nil {
		fmt.Fprintln(os.Stderr, "probe: write the report:", err)
		os.Exit(1)
	}
	logf, err := os.OpenFile(os.Getenv("PROBE_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe: open the log:", err)
		os.Exit(1)
	}
	fmt.Fprintln(logf, "Dec 01 06:00:00 000001 [00000001] 0x03 -> OpenSM 3.3.23")
	logf.Close()
	for {
		time.Sleep(time.Hour)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// procStatus is a field of /proc/self/status.
func procStatus(field string) string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// probeLayout is a manager's files as the package lays them out: the
// configuration in its directory, the state directory (0711, as the package
// makes it) with the SQLite database and config_dir, which an older manager
// left root's.
type probeLayout struct {
	afmConf, db, configDir, logFile string
	probe                           string // the test binary, where OpenSM's user may run it
}

// newProbeLayout makes the layout with the secrets readable by anyone by
// their modes (confMode): only the driver may keep them from OpenSM.
func newProbeLayout(t *testing.T, confMode os.FileMode) probeLayout {
	t.Helper()
	base, err := os.MkdirTemp("", "afm-smuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	l := probeLayout{afmConf: filepath.Join(base, "etc", "afm.conf"), db: filepath.Join(base, "state", "afm.db"),
		configDir: filepath.Join(base, "state", "opensm")}
	l.logFile = filepath.Join(l.configDir, "opensm.log")
	l.probe = filepath.Join(base, "bin", "opensm")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{base, 0o711}, {filepath.Dir(l.afmConf), 0o755}, {filepath.Dir(l.db), 0o711}, {l.configDir, 0o700},
		{filepath.Dir(l.probe), 0o755}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
	}
	for path, text := range map[string]string{
		l.afmConf: "[api]\ntoken = " + probeToken + "\n",
		l.db:      probeDBText,
		filepath.Join(l.configDir, "opensm.conf"):  "sm_key 0x1234\n",
		filepath.Join(l.configDir, "opensm.env"):   "",
		filepath.Join(l.configDir, "old-dump.lst"): "left by an older manager\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{l.afmConf, l.db} {
		if err := os.Chmod(p, confMode); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.probe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("%s=probe\nPROBE_AFM_CONF=%s\nPROBE_DB=%s\nPROBE_LOG=%s\n", helperEnv, l.afmConf, l.db, l.logFile)
	if err := os.WriteFile(filepath.Join(l.configDir, "opensm.env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l probeLayout) config(u *RunAs) ProcessConfig {
	return ProcessConfig{Command: []string{l.probe}, ConfFile: filepath.Join(l.configDir, "opensm.conf"),
		EnvFile: filepath.Join(l.configDir, "opensm.env"), Dir: l.configDir, LogFile: l.logFile, User: u,
		Hide: []string{l.afmConf, l.db}}
}

// reports reads the probes' reports in config_dir, one per run.
func (l probeLayout) reports(t *testing.T) []probeReport {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(l.configDir, "probe-*.json"))
	var out []probeReport
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var r probeReport
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, r)
	}
	return out
}

// checkConfined says what a run of the probe could do that OpenSM must not.
func checkConfined(t *testing.T, u *RunAs, r probeReport) {
	t.Helper()
	if r.UID != int(u.UID) || r.GID != int(u.GID) {
		t.Errorf("pid %d ran as uid %d gid %d, want %s (%d, %d)", r.PID, r.UID, r.GID, u.Name, u.UID, u.GID)
	}
	if r.CapEff != "0000000000000000" {
		t.Errorf("pid %d has capabilities %s, want none", r.PID, r.CapEff)
	}
	for what, err := range map[string]string{"read afm.conf": r.AFMConf, "open the database for writing": r.Database,
		"read the database": r.DatabaseRead} {
		if err == "" {
			t.Errorf("pid %d could %s", r.PID, what)
		}
	}
	if r.OpenSMConf != "" {
		t.Errorf("pid %d could not read its own opensm.conf: %s", r.PID, r.OpenSMConf)
	}
	for _, kv := range r.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(keptEnv, k) && !slices.Contains([]string{helperEnv, "PROBE_AFM_CONF", "PROBE_DB",
			"PROBE_LOG"}, k) {
			t.Errorf("pid %d's environment holds %s, neither kept nor from the env_file", r.PID, k)
		}
		if strings.Contains(kv, probeToken) || strings.Contains(kv, probeEnvVar) {
			t.Errorf("pid %d's environment holds the manager's secret: %s", r.PID, k)
		}
	}
}

// TestOpenSMRunsAsItsOwnUser starts the probe as OpenSM, as afm-opensm, in
// the layout an upgrade finds (config_dir and its files root's), with the
// manager's configuration and database readable by anyone by their modes and
// a secret in the manager's environment: the probe reads its opensm.conf but
// neither the configuration (nor lists its directory) nor the database,
// holds no capability and none of the manager's variables. Killed, it is
// restarted confined the same way.
func TestOpenSMRunsAsItsOwnUser(t *testing.T) {
	u := requireSMUser(t)
	l := newProbeLayout(t, 0o644)
	t.Setenv(probeEnvVar, probeToken)
	p := NewProcess(l.config(u))
	startProcess(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("not ready: %v (driver: %+v)", err, p.Status())
	}
	var fi syscall.Stat_t
	if err := syscall.Stat(l.configDir, &fi); err != nil || fi.Uid != u.UID {
		t.Errorf("config_dir's owner uid %d (%v), want %s's %d", fi.Uid, err, u.Name, u.UID)
	}
	if err := syscall.Stat(filepath.Join(l.configDir, "old-dump.lst"), &fi); err != nil || fi.Uid != u.UID {
		t.Errorf("a file an older manager left in config_dir: owner uid %d (%v), want %d", fi.Uid, err, u.UID)
	}
	// The manager rewrites opensm.conf while OpenSM runs: the new file is
	// OpenSM's to read at its SIGHUP.
	conf := filepath.Join(l.configDir, "opensm.conf")
	if err := WriteFileAtomic(conf, []byte("sm_key 0x5678\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(conf, &fi); err != nil || fi.Uid != u.UID {
		t.Errorf("opensm.conf rewritten by the manager: owner uid %d (%v), want %d", fi.Uid, err, u.UID)
	}
	first := p.Current().PID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a restarted probe's report", func() bool { return len(l.reports(t)) == 2 })
	reports := l.reports(t)
	for _, r := range reports {
		checkConfined(t, u, r)
	}
	for _, r := range reports {
		if len(r.AFMConfDir) > 0 {
			t.Errorf("pid %d listed the configuration's directory: %q", r.PID, r.AFMConfDir)
		}
	}
}

// TestOpenSMUserWithoutNamespace: where the manager cannot make a mount
// namespace, OpenSM as its user is started only if the modes keep it from
// the manager's files: a configuration readable by others is refused,
// naming the file, and once it is 0600 the probe starts and cannot read it.
func TestOpenSMUserWithoutNamespace(t *testing.T) {
	u := requireSMUser(t)
	l := newProbeLayout(t, 0o644)
	savedPath, savedNS := syslogPath, newMountNamespace
	syslogPath = filepath.Join(l.configDir, "no-syslog-here")
	newMountNamespace = func() error { return unix.EPERM }
	p := NewProcess(l.config(u))
	t.Cleanup(func() {
		_ = p.Stop(context.Background())
		syslogPath, newMountNamespace = savedPath, savedNS
	})
	if err := p.Start(1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused start in the driver's status", func() bool { return p.Status().State == StateFailed })
	if st := p.Status(); !strings.Contains(st.LastError, "OpenSM's user could read "+l.afmConf) {
		t.Errorf("driver's error %q does not name %s", st.LastError, l.afmConf)
	}
	for _, f := range []string{l.afmConf, l.db} {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the probe started once the files are 0600", func() bool { return len(l.reports(t)) == 1 })
	reports := l.reports(t)
	if len(reports) != 1 {
		t.Fatalf("%d reports, want 1", len(reports))
	}
	checkConfined(t, u, reports[0])
}

// TestOpenSMUserNeedsCapabilities: a manager that cannot switch users is
// refused when the driver is made, naming what it lacks, not at OpenSM's
// first restart.
func TestOpenSMUserNeedsCapabilities(t *testing.T) {
	if os.Geteuid() == 0 {
		saved := effectiveCaps
		effectiveCaps = func() (uint64, error) { return 1 << unix.CAP_SYS_ADMIN, nil }
		t.Cleanup(func() { effectiveCaps = saved })
	}
	u := &RunAs{Name: smUser, UID: uint32(os.Geteuid()) + 4242, GID: 4242}
	cfg := ProcessConfig{Command: []string{"opensm"}, Dir: t.TempDir(), LogFile: "/nonexistent/opensm.log", User: u}
	err := cfg.Check()
	for _, want := range []string{"[opensm] user = afm-opensm", "CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v, want it to say %q", err, want)
		}
	}
	if err := NewProcess(cfg).Start(1); err == nil || !strings.Contains(err.Error(), "CAP_SETUID") {
		t.Errorf("Start: %v, want the same refusal", err)
	}
}

// TestConfigDirMayNotHoldTheManagersFiles: config_dir is handed to OpenSM's
// user, so one that holds the configuration or the database is refused.
func TestConfigDirMayNotHoldTheManagersFiles(t *testing.T) {
	for _, tc := range []struct {
		dir, hide string
		refused   bool
	}{
		{"/var/lib/afm/opensm", "/var/lib/afm/afm.db", false},
		{"/var/lib/afm", "/var/lib/afm/afm.db", true},
		{"/var/lib", "/var/lib/afm/afm.db", true},
		{"/etc/afm/opensm", "/etc/afm/afm.conf", false},
		{"/var/lib/afm-opensm", "/var/lib/afm/afm.db", false},
	} {
		err := checkHidden(tc.dir, []string{tc.hide})
		if (err != nil) != tc.refused {
			t.Errorf("config_dir %s, %s: %v, want refused %v", tc.dir, tc.hide, err, tc.refused)
		}
	}
	if _, err := hiddenDirs([]string{"/afm.conf"}); err == nil {
		t.Error("hiding a file in / accepted")
	}
	dirs, err := hiddenDirs([]string{"/a/b/c/afm.db", "/a/b/afm.conf", "/x/afm.db"})
	slices.Sort(dirs)
	if err != nil || !slices.Equal(dirs, []string{"/a/b", "/x"}) {
		t.Errorf("hiddenDirs: %v, %v, want /a/b and /x", dirs, err)
	}
}

// TestHandOverNeverFollowsALink: OpenSM's user owns config_dir and may put
// links there, as a file or as its cache directory, to what the manager's
// root must never give it; handOver changes the links' targets never, and
// the entries of config_dir and of its real subdirectories always.
func TestHandOverNeverFollowsALink(t *testing.T) {
	u := requireSMUser(t)
	base := t.TempDir()
	dir, outside := filepath.Join(base, "opensm"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(dir, "cache"), filepath.Join(outside, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(dir, "opensm.conf"), filepath.Join(dir, "cache", "guid2mkey"),
		filepath.Join(outside, "afm.conf"), filepath.Join(outside, "sub", "afm.db")} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"conf-link": filepath.Join(outside, "afm.conf"),
		"dir-link": filepath.Join(outside, "sub"), "opensm.log": filepath.Join(outside, "afm.conf")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := HandOver(u, []string{dir}, []string{filepath.Join(dir, "opensm.log")}); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) uint32 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Uid
	}
	for _, p := range []string{dir, filepath.Join(dir, "opensm.conf"), filepath.Join(dir, "cache"),
		filepath.Join(dir, "cache", "guid2mkey")} {
		if got := owner(p); got != u.UID {
			t.Errorf("%s: owner uid %d, want %s's %d", p, got, u.Name, u.UID)
		}
	}
	for _, p := range []string{outside, filepath.Join(outside, "afm.conf"), filepath.Join(outside, "sub"),
		filepath.Join(outside, "sub", "afm.db")} {
		if got := owner(p); got != 0 {
			t.Errorf("%s, a link's target: owner uid %d, want root's", p, got)
		}
	}
}
