package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// statusHost is what --status reads on one host: the database, this host's
// OpenSM driver status and subnet dump.
type statusHost struct {
	heartbeatAge time.Duration // how long ago the applier's term began
	driver       opensm.State
	noDriver     bool // no manager ever ran on this host
	noDump       bool // OpenSM's subnet dump is not on this host
	ha           bool // [ha] ha = true, the lease held by another host
	foreignSM    bool // the leader recorded a tenant's SM that masters no port
}

// setUp records a healthy fabric (switches confirmed and present, an applied
// revision, a leader) but for what h changes, and returns the configuration.
func (h statusHost) setUp(t *testing.T, engine string) string {
	t.Helper()
	db := storetest.NewDatabase(t, engine)
	st := storetest.OpenDatabase(t, db)
	dir := t.TempDir()
	conf := writeConf(t, db.URL, dir)
	ctx := t.Context()
	if h.ha {
		b, err := os.ReadFile(conf)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(conf, append(b, "\n[ha]\nha = true\n"...), 0o600); err != nil {
			t.Fatal(err)
		}
		leases, err := st.Leases()
		if err != nil {
			t.Fatal(err)
		}
		if _, won, err := leases.TakeLease(ctx, "host-b pid 2", time.Minute); err != nil || !won {
			t.Fatalf("take the lease = %v, %v", won, err)
		}
	} else {
		began := time.Now().Add(-h.heartbeatAge)
		if _, err := st.WithClock(func() time.Time { return began }).NewTerm(ctx, "host-a pid 42"); err != nil {
			t.Fatal(err)
		}
	}
	term, err := st.Leadership(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.RecordApply(ctx, store.Apply{Revision: 0, SHA256: strings.Repeat("0", 64), Term: term.Term,
		Outcome: "applied", Detail: "SUBNET UP", StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.ConfirmSwitches(ctx, []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"},
		{GUID: 0x0002c90300f00002, Description: "S2"}}); err != nil {
		t.Fatal(err)
	}
	if h.foreignSM {
		if err := st.RecordForeignSMs(ctx, term.Term, []store.SecondSM{{PortGUID: 0x0002c90300000301, Priority: 0,
			State: "MASTER", OwnState: "MASTER"}}); err != nil {
			t.Fatal(err)
		}
	}
	if !h.noDump {
		copyFile(t, filepath.Join("testdata", "opensm-subnet.lst"), filepath.Join(dir, "opensm-subnet.lst"))
	}
	if !h.noDriver {
		b, err := json.Marshal(opensm.Status{State: h.driver, PID: 4242, Since: now.Add(-time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "driver-status.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return conf
}

// --status says "every gate is open", and exits 0, only when it could check
// everything that holds jobs: no manager applying, this host's OpenSM
// stopped, and what cannot be seen from this host are said, with their own
// exit status.
func TestStatusNeverSaysAllIsWellWhenItCannotKnow(t *testing.T) {
	const allWell = "jobs complete: every gate is open"
	for _, tc := range []struct {
		name    string
		host    statusHost
		engines []string
		code    int
		want    string
	}{
		{"all well", statusHost{driver: opensm.StateRunning}, storetest.Engines, status.ExitJobsComplete, allWell},
		// A tenant's SM that masters no port is named, and holds no job.
		{"a foreign SM master of nothing", statusHost{driver: opensm.StateRunning, foreignSM: true}, storetest.Engines,
			status.ExitJobsComplete, "port 0x0002c90300000301 (priority 0, MASTER), master of no port"},
		{"the manager is gone", statusHost{heartbeatAge: time.Hour, driver: opensm.StateRunning}, storetest.Engines,
			status.ExitJobsHeld, "no manager applies (is one running?): the leader of term"},
		{"OpenSM stopped", statusHost{driver: opensm.StateStopped}, storetest.Engines,
			status.ExitJobsHeld, "OpenSM on this host is stopped since"},
		{"no subnet dump on this host", statusHost{driver: opensm.StateRunning, noDump: true}, storetest.Engines,
			status.ExitCannotTell, "cannot be checked from this host:\n  - the expected switches cannot be checked from this host"},
		{"no manager ran on this host", statusHost{noDriver: true}, storetest.Engines,
			status.ExitCannotTell, "this host's OpenSM: no manager has run on this host"},
		// An HA follower: its OpenSM is stopped by design, its dump absent.
		{"HA follower", statusHost{ha: true, driver: opensm.StateStopped, noDump: true},
			[]string{config.EnginePostgres, config.EngineMySQL},
			status.ExitCannotTell, "the expected switches cannot be checked from this host"},
	} {
		for _, engine := range tc.engines {
			t.Run(tc.name+"/"+engine, func(t *testing.T) {
				conf := tc.host.setUp(t, engine)
				code, out, errOut := runCommand(t, "--config-file", conf, "--status")
				if code != tc.code || !strings.Contains(out, tc.want) {
					t.Errorf("--status: exit %d, want %d saying %q:\n%s%s", code, tc.code, tc.want, out, errOut)
				}
				if tc.code != status.ExitJobsComplete && strings.Contains(out, allWell) {
					t.Errorf("--status says %q though it exits %d:\n%s", allWell, code, out)
				}
				if errOut != "" {
					t.Errorf("--status wrote to standard error: %s", errOut)
				}
				s := statusJSON(t, conf)
				if held := len(s.NotCompleting) > 0; held != (tc.code == status.ExitJobsHeld) {
					t.Errorf("--status --json not_completing = %q; want some only for exit %d", s.NotCompleting, status.ExitJobsHeld)
				}
				if unchecked := len(s.Unchecked) > 0; unchecked != (tc.code == status.ExitCannotTell) {
					t.Errorf("--status --json unchecked = %q; want some only for exit %d", s.Unchecked, status.ExitCannotTell)
				}
			})
		}
	}
}

// The commands that read or change recorded state never create the database:
// pointed at a SQLite file that does not exist, each fails saying so, and
// leaves neither the file nor its directory behind.
func TestCommandsCreateNoDatabase(t *testing.T) {
	for _, command := range []string{"--status", "--render", "--show-keys", "--show-enforcement-errors",
		"--clear-enforcement-errors", "--confirm-switches"} {
		t.Run(command, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "absent")
			path := filepath.Join(dir, "afm.db")
			code, out, errOut := runCommand(t, "--config-file", writeConf(t, "sqlite:///"+path, t.TempDir()), command)
			if want := "--migrate, creates it"; code != exitFailed || !strings.Contains(errOut, want) {
				t.Errorf("%s: exit %d, want %d saying %q: %s%s", command, code, exitFailed, want, out, errOut)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s left %s behind (stat: %v)", command, dir, err)
			}
		})
	}
}

// Pointed at a database that exists but was never migrated (an empty SQLite
// file, as a wrong path or a DBA's fresh database leaves), the same commands say
// that its schema is missing and how to make it, instead of failing on the
// first table they read.
func TestCommandsNameAMissingSchema(t *testing.T) {
	for _, command := range []string{"--status", "--render", "--show-keys", "--show-enforcement-errors",
		"--clear-enforcement-errors", "--confirm-switches"} {
		t.Run(command, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "afm.db")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCommand(t, "--config-file", writeConf(t, "sqlite:///"+path, t.TempDir()), command)
			if want := "no schema (this binary needs version"; code != exitFailed || !strings.Contains(errOut, want) {
				t.Errorf("%s: exit %d, want %d saying %q: %s%s", command, code, exitFailed, want, out, errOut)
			}
			if strings.Contains(errOut, "no such table") {
				t.Errorf("%s failed on a missing table instead of naming the missing schema: %s", command, errOut)
			}
		})
	}
}

// --status --json lists the foreign SMs (an array, empty when none), with
// what the leader saw of each.
func TestStatusJSONForeignSMs(t *testing.T) {
	for _, foreign := range []bool{false, true} {
		conf := statusHost{driver: opensm.StateRunning, foreignSM: foreign}.setUp(t, config.EngineSQLite)
		code, out, errOut := runCommand(t, "--config-file", conf, "--status", "--json")
		var s struct {
			ForeignSMs []map[string]any `json:"foreign_sms"`
		}
		if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil || s.ForeignSMs == nil {
			t.Fatalf("--status --json: exit %d, %v, foreign_sms %v:\n%s%s", code, err, s.ForeignSMs, out, errOut)
		}
		if !foreign {
			if len(s.ForeignSMs) != 0 {
				t.Errorf("foreign_sms = %v; want []", s.ForeignSMs)
			}
			continue
		}
		if len(s.ForeignSMs) != 1 || s.ForeignSMs[0]["port_guid"] != "0x0002c90300000301" || s.ForeignSMs[0]["state"] != "MASTER" ||
			s.ForeignSMs[0]["priority"] != float64(0) || s.ForeignSMs[0]["seen_at"] == nil {
			t.Errorf("foreign_sms = %v; want the tenant's SM on port 0x0002c90300000301, MASTER, priority 0", s.ForeignSMs)
		}
	}
}
