package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// healthyAndHeld records, on two fabrics, a default fabric whose jobs
// complete (a leader, an applied revision, confirmed switches present in
// its dump, its OpenSM running) and a storage fabric whose jobs are held:
// its OpenSM runs and swept, but no switch is confirmed and no manager ever
// applied.
func healthyAndHeld(t *testing.T, engine string) fabricsDB {
	t.Helper()
	f := newTwoFabrics(t, engine)
	ctx := t.Context()
	term, err := f.def.NewTerm(ctx, "host-a pid 42")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := f.def.RecordApply(ctx, store.Apply{Revision: 0, SHA256: strings.Repeat("0", 64), Term: term,
		Outcome: "applied", Detail: "SUBNET UP", StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	confirm(t, f.def, 0x0002c90300f00001, 0x0002c90300f00002)
	for _, dir := range []string{f.defaultDir, f.storageDir} {
		copyFile(t, filepath.Join("testdata", "opensm-subnet.lst"), filepath.Join(dir, "opensm-subnet.lst"))
		b, err := json.Marshal(opensm.Status{State: opensm.StateRunning, PID: 4242, Since: now.Add(-time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "driver-status.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// --status shows every fabric, a block each, and exits with the worst
// fabric's verdict; --status --fabric NAME shows and judges that one.
func TestStatusOfTwoFabrics(t *testing.T) {
	const (
		defaultBlock = "fabric default ([opensm]):\n"
		storageBlock = "fabric storage ([fabric:storage]):\n"
		allWell      = "jobs complete: every gate is open"
	)
	f := healthyAndHeld(t, config.EngineSQLite)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		wants  []string // in this order
		absent []string
	}{
		{"every fabric", nil, status.ExitJobsHeld, []string{defaultBlock, "host-a pid 42, term", allWell, storageBlock,
			"never held", applier.NoExpectedSwitches, "fabrics whose jobs do not complete: storage\n"}, nil},
		{"the default fabric", []string{"--fabric", "default"}, status.ExitJobsComplete, []string{defaultBlock, allWell},
			[]string{"storage", applier.NoExpectedSwitches}},
		{"the storage fabric", []string{"--fabric", "storage"}, status.ExitJobsHeld, []string{storageBlock, applier.NoExpectedSwitches},
			[]string{"fabric default", "host-a", allWell}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCommand(t, append([]string{"--config-file", f.conf, "--status"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s%s", code, tc.code, out, errOut)
			}
			rest := out
			for _, want := range tc.wants {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Errorf("--status %s does not say %q after what came before:\n%s", strings.Join(tc.args, " "), want, out)
					break
				}
				rest = rest[i+len(want):]
			}
			for _, absent := range tc.absent {
				if strings.Contains(out, absent) {
					t.Errorf("--status %s says %q:\n%s", strings.Join(tc.args, " "), absent, out)
				}
			}
		})
	}
}

// --status --json keeps its top-level fields, the default fabric's (or
// --fabric's), and lists every fabric shown in fabrics.
func TestStatusJSONOfTwoFabrics(t *testing.T) {
	f := healthyAndHeld(t, config.EngineSQLite)
	for _, tc := range []struct {
		name  string
		args  []string
		names []string
	}{
		{"every fabric", nil, []string{"default", "storage"}},
		{"the storage fabric", []string{"--fabric", "storage"}, []string{"storage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := statusReport(t, f.conf, tc.args...)
			var names []string
			for _, s := range r.Fabrics {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.names) {
				t.Fatalf("fabrics = %v; want %v", names, tc.names)
			}
			if !reflect.DeepEqual(r.Status, r.Fabrics[0].Status) {
				t.Errorf("the top-level fields are not fabric %s's:\n%+v\n%+v", names[0], r.Status, r.Fabrics[0].Status)
			}
			for _, s := range r.Fabrics {
				held := slices.Contains(s.NotCompleting, applier.NoExpectedSwitches)
				if held != (s.Name == "storage") || (s.Name == "default") != (len(s.NotCompleting) == 0) {
					t.Errorf("fabric %s: not_completing = %q; want reasons on storage only", s.Name, s.NotCompleting)
				}
				if leader := s.Applier.Holder == "host-a pid 42"; leader != (s.Name == "default") {
					t.Errorf("fabric %s: applier = %+v; want the leader on default only", s.Name, s.Applier)
				}
			}
		})
	}
}

// A fabric's open job shows as its oldest open job, and on no other fabric.
func TestStatusOldestOpenJobPerFabric(t *testing.T) {
	f := newTwoFabrics(t, config.EngineSQLite)
	before := time.Now().Add(-time.Second)
	recordNetwork(t, f.def, "net-storage", "storage", 102)
	r := statusReport(t, f.conf)
	for _, s := range r.Fabrics {
		open := s.OldestOpenJob != nil && s.OldestOpenJob.After(before)
		if open != (s.Name == "storage") {
			t.Errorf("fabric %s: oldest_open_job = %v; want one on storage only", s.Name, s.OldestOpenJob)
		}
	}
	code, out, _ := runCommand(t, "--config-file", f.conf, "--status", "--fabric", "default")
	if want := regexp.MustCompile(`\noldest open job: +none\n`); code != status.ExitJobsHeld || !want.MatchString(out) {
		t.Errorf("--status --fabric default: exit %d, want %d matching %s:\n%s", code, status.ExitJobsHeld, want, out)
	}
}

// A configuration of one fabric prints its status as it always did: no
// fabric's block around it.
func TestStatusOfOneFabricHasNoFabricBlock(t *testing.T) {
	conf := statusHost{driver: opensm.StateRunning}.setUp(t, config.EngineSQLite)
	code, out, errOut := runCommand(t, "--config-file", conf, "--status")
	if code != status.ExitJobsComplete || !strings.HasPrefix(out, "applier lock:") || strings.Contains(out, "fabric") {
		t.Errorf("--status of one fabric: exit %d, want 0 starting \"applier lock:\" without any fabric:\n%s%s", code, out, errOut)
	}
	if r := statusReport(t, conf); len(r.Fabrics) != 1 || r.Fabrics[0].Name != config.DefaultFabric ||
		!reflect.DeepEqual(r.Status, r.Fabrics[0].Status) {
		t.Errorf("--status --json of one fabric: fabrics = %+v; want the default fabric's, equal to the top level", r.Fabrics)
	}
}

// With the database down, --status exits 1 and its error, after naming the
// database, still says each fabric's OpenSM driver on this host, named by
// its fabric; nothing about OpenSM comes before the database's error.
func TestStatusOfTwoFabricsWithoutTheDatabase(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgresql://afm:pw@127.0.0.1:%d/afm", ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens there now
	f := fabricsDB{defaultDir: t.TempDir(), storageDir: t.TempDir()}
	text, err := os.ReadFile(filepath.Join("testdata", "fabrics", "two-fabrics.conf"))
	if err != nil {
		t.Fatal(err)
	}
	text = []byte(strings.NewReplacer("CONNECTION", url, "DEFAULT_DIR", f.defaultDir, "STORAGE_DIR", f.storageDir).Replace(string(text)))
	conf := filepath.Join(t.TempDir(), "afm.conf")
	if err := os.WriteFile(conf, text, 0o600); err != nil {
		t.Fatal(err)
	}
	for dir, state := range map[string]opensm.State{f.defaultDir: opensm.StateRunning, f.storageDir: opensm.StateFailed} {
		b, err := json.Marshal(opensm.Status{State: state, PID: 4242, Since: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "driver-status.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args        []string
		wants, nots []string
	}{
		{nil, []string{"fabric default: OpenSM driver: running", "fabric storage: OpenSM driver: failed"}, nil},
		{[]string{"--fabric", "storage"}, []string{"fabric storage: OpenSM driver: failed"}, []string{"running"}},
		// Named as --status names it with the database up: the file has another.
		{[]string{"--fabric", "default"}, []string{"fabric default: OpenSM driver: running"}, []string{"failed"}},
	} {
		code, out, errOut := runCommand(t, append([]string{"--config-file", conf, "--status"}, tc.args...)...)
		if code != exitFailed || !strings.Contains(errOut, "is unreachable") {
			t.Errorf("--status %v without the database: exit %d, want %d saying it is unreachable: %s", tc.args, code, exitFailed, errOut)
		}
		if out != "" {
			t.Errorf("--status %v without the database printed before its error:\n%s", tc.args, out)
		}
		dbErr := strings.Index(errOut, "is unreachable")
		for _, want := range tc.wants {
			if i := strings.Index(errOut, want); i < dbErr {
				t.Errorf("--status %v without the database does not say %q after the database's error:\n%s", tc.args, want, errOut)
			}
		}
		_, drivers, _ := strings.Cut(errOut, "could not be read):") // the database's own error may say "failed"
		for _, not := range tc.nots {
			if strings.Contains(drivers, not) {
				t.Errorf("--status %v without the database says %q:\n%s", tc.args, not, errOut)
			}
		}
	}
}

// A fabric added to the configuration that no manager has started yet has
// no state in the database: --status says so as the reason its jobs do not
// complete, and shows the other fabrics as usual; a command that would
// change it says what is missing.
func TestStatusOfAFabricNeverStarted(t *testing.T) {
	f := healthyAndHeld(t, config.EngineSQLite)
	db := storetest.NewDatabase(t, config.EngineSQLite)
	storetest.OpenDatabase(t, db) // the default fabric's rows only, as before the storage fabric was added
	conf := strings.Replace(readFile(t, f.conf), "connection = "+connectionOf(t, f.conf), "connection = "+db.URL, 1)
	path := filepath.Join(t.TempDir(), "afm.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCommand(t, "--config-file", path, "--status")
	if want := "no manager has started this fabric yet"; code != status.ExitJobsHeld || !strings.Contains(out, want) {
		t.Errorf("--status: exit %d, want %d saying %q:\n%s%s", code, status.ExitJobsHeld, want, out, errOut)
	}
	r := statusReport(t, path, "--fabric", "storage")
	if len(r.NotCompleting) == 0 || r.Jobs[store.StatusPending] != 0 || r.Adopted == nil {
		t.Errorf("--status --json --fabric storage = %+v; want a reason, every job count and no adopted partition", r.Status)
	}
	code, out, errOut = runCommand(t, "--config-file", path, "--render", "--fabric", "storage")
	if want := "[fabric:storage]: "; code != exitFailed || !strings.Contains(errOut, want) || !strings.Contains(errOut, "first starts") {
		t.Errorf("--render --fabric storage: exit %d, want %d naming the fabric and its first start:\n%s%s", code, exitFailed, out, errOut)
	}
}

// Every command that changes a fabric refuses one no manager has started,
// saying so as --status does, naming the fabric, and records nothing there:
// its state rows stay unwritten (--status still says it never started) and
// it has no keys.
func TestChangesRefuseAFabricNeverStarted(t *testing.T) {
	f := healthyAndHeld(t, config.EngineSQLite)
	db := storetest.NewDatabase(t, config.EngineSQLite)
	storetest.OpenDatabase(t, db) // the default fabric's rows only, as before the storage fabric was added
	conf := strings.Replace(readFile(t, f.conf), "connection = "+connectionOf(t, f.conf), "connection = "+db.URL, 1)
	path := filepath.Join(t.TempDir(), "afm.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	running := writeRunning(t, runningPartitions)
	for _, args := range [][]string{
		{"--move-physnet", "storage"},
		{"--move-physnet", "storage", "--dry-run"},
		{"--move-physnet", "ib"}, // the default fabric's: the move's one transaction spans every fabric
		{"--import-neutron"},     // every fabric: --fabric is refused with it
		{"--import-neutron", "--dry-run"},
		{"--import-keys", writeFile(t, ufmConf)},
		{"--rotate-keys", "m_key"},
		{"--adopt-partitions", running},
		{"--release-adopted", "0x10"},
		{"--confirm-switches"},
		{"--confirm-hosts"},
		{"--clear-enforcement-errors"},
		{"--accept-moved-guid", "0x0002c90300000a01"},
		{"--unfreeze"},
	} {
		fabric := []string{"--fabric", "storage"}
		if args[0] == "--import-neutron" || slices.Equal(args, []string{"--move-physnet", "ib"}) {
			fabric = nil
		}
		code, out, errOut := runCommand(t, slices.Concat([]string{"--config-file", path}, fabric, args)...)
		if code != exitFailed || !strings.Contains(errOut, "[fabric:storage]: "+status.NeverStarted) {
			t.Errorf("%s %s: exit %d, want %d saying %q:\n%s%s", strings.Join(args, " "), strings.Join(fabric, " "), code, exitFailed,
				"[fabric:storage]: "+status.NeverStarted, out, errOut)
		}
	}
	r := statusReport(t, path, "--fabric", "storage")
	if !slices.Contains(r.NotCompleting, status.NeverStarted) || len(r.Adopted) != 0 {
		t.Errorf("--status --json --fabric storage after the refused commands = %+v; want it never started, nothing adopted", r.Status)
	}
	cfg := loadConfig(t, path)
	st, err := openExisting(t.Context(), cfg, fabricRules(cfg), time.Minute, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if keys, err := st.Fabric("storage").Secrets(t.Context()); err != nil || len(keys) != 0 {
		t.Errorf("the storage fabric's keys after the refused commands: %d, %v; want none", len(keys), err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// connectionOf is the [database] connection a configuration file sets.
func connectionOf(t *testing.T, path string) string {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database.Connection
}

// Two fabrics naming one HCA port, each with an env file as the sample's
// example has it (OSM_CACHE_DIR only: no simulated fabric), pass the
// configuration's own checks, which cannot read the files; every command
// refuses them as the manager's start does, naming both sections and the
// port, before it reads or writes the database.
func TestCommandsRefuseOneHCAPortBehindEnvFiles(t *testing.T) {
	for _, v := range []string{"IBSIM_SOCKNAME", "OSM_CACHE_DIR"} {
		t.Setenv(v, "")
		os.Unsetenv(v) // the manager's own environment names neither
	}
	db := storetest.NewDatabase(t, config.EngineSQLite)
	storetest.OpenDatabase(t, db)
	dir := t.TempDir()
	text := readFile(t, filepath.Join("testdata", "fabrics", "two-fabrics.conf"))
	text = strings.NewReplacer("CONNECTION", db.URL, "DEFAULT_DIR", filepath.Join(dir, "opensm"),
		"STORAGE_DIR", filepath.Join(dir, "opensm-storage"), "0x0002c90300b00001", "0x0002c90300a00001").Replace(text)
	for section, cache := range map[string]string{"[opensm]": "/var/cache/opensm", "[fabric:storage]": "/var/cache/opensm-storage"} {
		env := filepath.Join(dir, strings.Trim(section, "[]")+".env")
		if err := os.WriteFile(env, []byte("OSM_CACHE_DIR="+cache+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		text = strings.Replace(text, section+"\n", section+"\nenv_file = "+env+"\n", 1)
	}
	path := filepath.Join(dir, "afm.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Fatalf("the configuration's own checks refuse it: %v", err)
	}
	const want = "[opensm_conf] and [fabric:storage:opensm_conf] name the same HCA port 0x0002c90300a00001"
	for _, args := range [][]string{{"--render"}, {"--status"}, {"--migrate"}, {"--confirm-switches"},
		{"--adopt-partitions", writeRunning(t, runningPartitions)}, {"--import-keys", writeFile(t, ufmConf)}} {
		code, out, errOut := runCommand(t, append([]string{"--config-file", path}, args...)...)
		if code != exitFailed || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s%s", args[0], code, exitFailed, want, out, errOut)
		}
	}
}
