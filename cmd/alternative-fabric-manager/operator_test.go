package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// TestMain lets a test run the command itself: with AFM_TEST_RUN_MAIN=1 the
// test binary is the manager, so exit codes and output are the real ones.
func TestMain(m *testing.M) {
	if os.Getenv("AFM_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"alternative-fabric-manager"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runCommand runs the manager with args and returns its exit code and output.
func runCommand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "AFM_TEST_RUN_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run the command: %v", err)
	}
	return code, stdout.String(), stderr.String()
}

func writeConf(t *testing.T, connection, configDir string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "afm.conf")
	conf := testenv.AFMConf{Token: "test-token", Connection: connection, ConfigDir: configDir}
	if err := conf.Write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Keys are created once: every start, and every manager of the database, gets
// the same ones.
func TestKeysAreTheSameAtEveryStart(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			db := storetest.NewDatabase(t, engine)
			first, err := opensm.DatabaseKeys{Store: storetest.OpenDatabase(t, db)}.Keys(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Check(); err != nil {
				t.Errorf("created keys fail the check: %v", err)
			}
			again, err := opensm.DatabaseKeys{Store: storetest.OpenDatabase(t, db)}.Keys(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if again != first {
				t.Error("a second start got other keys than the first")
			}
		})
	}
}

func TestShowKeys(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	st := storetest.OpenDatabase(t, db)
	k, err := opensm.DatabaseKeys{Store: st}.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCommand(t, "--config-file", writeConf(t, db.URL, t.TempDir()), "--show-keys")
	if code != 0 {
		t.Fatalf("--show-keys: exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	want := []string{"m_key " + opensm.FormatKey(k.MKey), "sm_key " + opensm.FormatKey(k.SMKey),
		"sa_key " + opensm.FormatKey(k.SAKey)}
	if len(lines) < 3 || !slices.Equal(lines[:3], want) {
		t.Errorf("--show-keys printed\n%s\nwant it to start with\n%s", out, strings.Join(want, "\n"))
	}
	for _, use := range []string{"smpquery -y " + opensm.FormatKey(k.MKey), "saquery --smkey " + opensm.FormatKey(k.SAKey)} {
		if !strings.Contains(out, use) {
			t.Errorf("--show-keys does not say how to use the keys (%q):\n%s", use, out)
		}
	}
}

// Before any manager started there are no keys, and --show-keys, which only
// reads, must not choose them: it says so, and the database still holds none.
func TestShowKeysCreatesNoKeys(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	st := storetest.OpenDatabase(t, db)
	code, out, errOut := runCommand(t, "--config-file", writeConf(t, db.URL, t.TempDir()), "--show-keys")
	if want := "no OpenSM keys recorded yet"; code != exitFailed || !strings.Contains(errOut, want) {
		t.Errorf("--show-keys on a new database: exit %d, want %d saying %q: %s%s", code, exitFailed, want, out, errOut)
	}
	recorded, err := st.Secrets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != 0 {
		t.Errorf("--show-keys recorded %d secret(s) on a database no manager started on", len(recorded))
	}
}

func TestBadKeysInTheDatabaseAreRefusedWithoutShowingThem(t *testing.T) {
	st := storetest.Open(t, config.EngineSQLite)
	bad := map[string]string{opensm.SecretMKey: "0x0000000000000001", opensm.SecretSMKey: "not-a-key-at-all", opensm.SecretSAKey: "0x1234567890abcdef"}
	if _, err := st.GetOrCreateSecrets(t.Context(), func() (map[string]string, error) { return bad, nil }); err != nil {
		t.Fatal(err)
	}
	_, err := opensm.DatabaseKeys{Store: st}.Keys(t.Context())
	if err == nil || !strings.Contains(err.Error(), opensm.SecretSMKey) {
		t.Fatalf("error = %v; want one naming %s", err, opensm.SecretSMKey)
	}
	if strings.Contains(err.Error(), "not-a-key-at-all") {
		t.Errorf("the error shows the secret: %v", err)
	}
}

// An operator command against a database that is down fails at once, naming
// the database without its password.
func TestUnreachableDatabase(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	const password = "pa55-w0rd-never-shown"
	for _, url := range []string{
		fmt.Sprintf("postgresql://afm:%s@127.0.0.1:%d/afm", password, port),
		fmt.Sprintf("mysql://afm:%s@127.0.0.1:%d/afm", password, port),
	} {
		for _, command := range []string{"--status", "--confirm-switches", "--show-enforcement-errors",
			"--clear-enforcement-errors", "--show-keys"} {
			dir := t.TempDir()
			writeDriverStatus(t, dir, opensm.StateRunning)
			code, out, errOut := runCommand(t, "--config-file", writeConf(t, url, dir), command)
			if code != 1 {
				t.Errorf("%s on %s: exit %d, want 1", command, url, code)
			}
			want := fmt.Sprintf("127.0.0.1:%d/afm is unreachable", port)
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: stderr %q does not say %q", command, errOut, want)
			}
			if strings.Contains(out+errOut, password) {
				t.Errorf("%s: the output shows the password: %s%s", command, out, errOut)
			}
			// Nothing about OpenSM before the database's error: --status
			// says this host's driver after it, the other commands not at all.
			if out != "" {
				t.Errorf("%s printed before its error: %q", command, out)
			}
			driver := strings.Index(errOut, "OpenSM driver: running")
			if command == "--status" && driver < strings.Index(errOut, want) {
				t.Errorf("%s: stderr %q does not say this host's OpenSM driver after the database's error", command, errOut)
			}
			if command != "--status" && driver >= 0 {
				t.Errorf("%s: stderr %q speaks of OpenSM's driver", command, errOut)
			}
		}
	}
}

// writeDriverStatus writes a driver status file in config_dir dir, as a
// manager's OpenSM driver does.
func writeDriverStatus(t *testing.T, dir string, state opensm.State) {
	t.Helper()
	b, err := json.Marshal(opensm.Status{State: state, PID: 4242, Since: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "driver-status.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConfirmSwitches(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	st := storetest.OpenDatabase(t, db)
	dir := t.TempDir()
	conf := writeConf(t, db.URL, dir)

	code, _, errOut := runCommand(t, "--config-file", conf, "--confirm-switches")
	if code != 1 || !strings.Contains(errOut, "OpenSM has not swept yet") {
		t.Errorf("--confirm-switches without a dump: exit %d, %q; want 1 and \"OpenSM has not swept yet\"", code, errOut)
	}
	if sw, err := st.ExpectedSwitches(t.Context()); err != nil || len(sw) != 0 {
		t.Errorf("expected switches after a failed confirmation = %v, %v; want none", sw, err)
	}

	copyFile(t, filepath.Join("testdata", "opensm-subnet.lst"), filepath.Join(dir, "opensm-subnet.lst"))
	code, out, errOut := runCommand(t, "--config-file", conf, "--confirm-switches")
	if code != 0 {
		t.Fatalf("--confirm-switches: exit %d: %s", code, errOut)
	}
	got, err := st.ExpectedSwitches(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var guids []fabric.GUID
	for _, sw := range got {
		guids = append(guids, sw.GUID)
	}
	if want := []fabric.GUID{0x0002c90300f00001, 0x0002c90300f00002}; !slices.Equal(guids, want) ||
		got[0].Description != "S1" || got[1].Description != "S2" {
		t.Errorf("expected switches = %+v; want S1 and S2 (%v)", got, want)
	}
	for _, want := range []string{"confirmed 2 switches", "0x0002c90300f00001  S1", "0x0002c90300f00002  S2"} {
		if !strings.Contains(out, want) {
			t.Errorf("--confirm-switches printed %q, without %q", out, want)
		}
	}
}

// --status reports the gates as the applier evaluates them, and the rest of
// the state, in both forms.
func TestStatusAndEnforcementErrors(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	st := storetest.OpenDatabase(t, db)
	dir := t.TempDir()
	conf := writeConf(t, db.URL, dir)

	s := statusJSON(t, conf)
	if s.Applier.Term != 0 || s.Revision != 0 || s.LastApply != nil || s.Jobs[store.StatusPending] != 0 {
		t.Errorf("status of a new database = %+v", s)
	}
	if !slices.Contains(s.NotCompleting, applier.NoExpectedSwitches) ||
		!slices.Contains(s.NotCompleting, "no manager has held the applier lock yet") {
		t.Errorf("not_completing = %q; want the missing leader and %q", s.NotCompleting, applier.NoExpectedSwitches)
	}

	term, line := recordHeldJob(t, st, dir)
	s = statusJSON(t, conf)
	if s.Applier.Holder != "host-a pid 42" || s.Applier.Term != term || s.Applier.Heartbeat == nil {
		t.Errorf("applier = %+v; want host-a pid 42, term %d, a heartbeat", s.Applier, term)
	}
	if s.Revision != 1 || s.LastApply == nil || s.LastApply.Revision != 1 || s.LastApply.Outcome != "applied" {
		t.Errorf("revision %d, last apply %+v; want 1 and an applied apply of revision 1", s.Revision, s.LastApply)
	}
	if s.Jobs[store.StatusPending] != 1 || s.Jobs[store.StatusCompleted] != 0 {
		t.Errorf("jobs = %v; want 1 Pending", s.Jobs)
	}
	wantReasons := []string{
		"expected switch 0x0002c90300f00009 (spine 9) is missing from OpenSM's last sweep",
		applier.EnforcementCleared + ": 0x0002c90300f00001:2",
	}
	if len(s.NotCompleting) != 2 {
		t.Errorf("not_completing = %q; want 2 reasons", s.NotCompleting)
	}
	for i, want := range wantReasons {
		if i >= len(s.NotCompleting) || !strings.HasPrefix(s.NotCompleting[i], want) {
			t.Errorf("not_completing = %q; want reason %d to start with %q", s.NotCompleting, i, want)
		}
	}

	code, out, errOut := runCommand(t, "--config-file", conf, "--status")
	if code != status.ExitJobsHeld {
		t.Fatalf("--status: exit %d, want %d: %s", code, status.ExitJobsHeld, errOut)
	}
	for _, want := range append(wantReasons, "host-a pid 42, term", "Pending 1", "revision 1, applied") {
		if !strings.Contains(out, want) {
			t.Errorf("--status does not say %q:\n%s", want, out)
		}
	}

	checkEnforcementErrorCommands(t, st, conf, term, line)
}

// recordHeldJob records, in st, a leader, a job, an apply, confirmed switches
// of which one is gone from the subnet dump it writes into dir, and an
// enforcement error: two reasons jobs are held. It returns the leader's term
// and the enforcement error's line.
func recordHeldJob(t *testing.T, st *store.Store, dir string) (term int64, line string) {
	t.Helper()
	ctx := t.Context()
	vlan101 := int64(101)
	if _, err := st.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: "net-1", Name: "n",
		Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &vlan101}, Operation: store.OpCreateNetwork,
		CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	term, err := st.NewTerm(ctx, "host-a pid 42")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.RecordApply(ctx, store.Apply{Revision: 1, SHA256: strings.Repeat("0", 64), Term: term,
		Outcome: "applied", Detail: "SUBNET UP", StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	// S1 and S2 are the dump's switches (an unconfirmed one would close a
	// gate of its own); spine 9 is missing from it.
	if err := st.ConfirmSwitches(ctx, []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"},
		{GUID: 0x0002c90300f00002, Description: "S2"}, {GUID: 0x0002c90300f00009, Description: "spine 9"}}); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join("testdata", "opensm-subnet.lst"), filepath.Join(dir, "opensm-subnet.lst"))
	line = "Nov 29 18:16:33 486627 [7F1C] 0x01 -> pkey_mgr_update_peer_port: ERR 0507: Not enough pkey entries (60 <= 60) on switch 0x0002c90300f00001 port 2 (S1). Clearing Enforcement bit"
	if err := st.RecordEnforcementErrors(ctx, term, []store.EnforcementSighting{{Switch: "0x0002c90300f00001", Port: 2, Line: line}}); err != nil {
		t.Fatal(err)
	}
	return term, line
}

// checkEnforcementErrorCommands checks that --show-enforcement-errors shows
// the one recorded error, line being OpenSM's, and explains an unattributed
// one once there is one, and that --clear-enforcement-errors clears both,
// leaving the missing switch the only reason jobs are held.
func checkEnforcementErrorCommands(t *testing.T, st *store.Store, conf string, term int64, line string) {
	t.Helper()
	ctx := t.Context()
	code, out, errOut := runCommand(t, "--config-file", conf, "--show-enforcement-errors")
	if code != 0 || !strings.Contains(out, "0x0002c90300f00001:2  first seen") || !strings.Contains(out, line) ||
		!strings.Contains(out, "1 times") {
		t.Errorf("--show-enforcement-errors: exit %d, %s%s", code, out, errOut)
	}
	if strings.Contains(out, store.Unattributed) {
		t.Errorf("--show-enforcement-errors explains unattributed errors, without any:\n%s", out)
	}
	unattributed := "Nov 29 18:16:34 486627 [7F1C] 0x01 -> ERR 0513: some format naming no port"
	if err := st.RecordEnforcementErrors(ctx, term, []store.EnforcementSighting{{Switch: store.Unattributed, Line: unattributed}}); err != nil {
		t.Fatal(err)
	}
	if _, out, _ = runCommand(t, "--config-file", conf, "--show-enforcement-errors"); !strings.Contains(out, "unattributed: OpenSM's line named no switch port") {
		t.Errorf("--show-enforcement-errors does not explain the unattributed error:\n%s", out)
	}
	code, out, errOut = runCommand(t, "--config-file", conf, "--clear-enforcement-errors")
	if code != 0 || !strings.Contains(out, "cleared 2 enforcement errors") {
		t.Errorf("--clear-enforcement-errors: exit %d, %s%s", code, out, errOut)
	}
	if errs, err := st.EnforcementErrors(ctx); err != nil || len(errs) != 0 {
		t.Errorf("enforcement errors after clearing = %v, %v", errs, err)
	}
	if s := statusJSON(t, conf); len(s.NotCompleting) != 1 {
		t.Errorf("not_completing after clearing = %q; want only the missing switch", s.NotCompleting)
	}
}

// statusJSON is --status --json's top-level status: the default fabric's.
func statusJSON(t *testing.T, conf string) status.Status {
	t.Helper()
	return statusReport(t, conf).Status
}

// statusReport is what --status --json and args print, every field known.
func statusReport(t *testing.T, conf string, args ...string) status.Report {
	t.Helper()
	code, out, errOut := runCommand(t, append([]string{"--config-file", conf, "--status", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("--status --json %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	var s status.Report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("--status --json printed %q: %v", out, err)
	}
	return s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
