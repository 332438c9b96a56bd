package main

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// fabricsDB is a database, a configuration of the default fabric (physnet
// ib) and the storage fabric (physnet storage) on it, each fabric's
// config_dir, and each fabric's view of the store.
type fabricsDB struct {
	conf                   string
	defaultDir, storageDir string
	def, storage           *store.Store
}

// newTwoFabrics writes testdata/fabrics/two-fabrics.conf for a new database
// on engine and opens the store of both fabrics.
func newTwoFabrics(t *testing.T, engine string) fabricsDB {
	t.Helper()
	db := storetest.NewDatabase(t, engine)
	f := fabricsDB{defaultDir: t.TempDir(), storageDir: t.TempDir()}
	text, err := os.ReadFile(filepath.Join("testdata", "fabrics", "two-fabrics.conf"))
	if err != nil {
		t.Fatal(err)
	}
	text = []byte(strings.NewReplacer("CONNECTION", db.URL, "DEFAULT_DIR", f.defaultDir,
		"STORAGE_DIR", f.storageDir).Replace(string(text)))
	f.conf = filepath.Join(t.TempDir(), "afm.conf")
	if err := os.WriteFile(f.conf, text, 0o600); err != nil {
		t.Fatal(err)
	}
	f.def = openFabrics(t, db, []store.FabricRules{
		{Name: config.DefaultFabric, Rules: store.Rules{PhysicalNetworks: []string{"ib"}}},
		{Name: "storage", Rules: store.Rules{PhysicalNetworks: []string{"storage"}}},
	})
	f.storage = f.def.DB().Fabric("storage")
	return f
}

// openFabrics opens (and migrates) db as the store of fabrics, the default
// first, each fabric's state rows written as a manager's first start writes
// them, and returns the default fabric's view.
func openFabrics(t *testing.T, db storetest.Database, fabrics []store.FabricRules) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := storeopen.OpenFabrics(ctx, db.Engine, db.DSN, true, fabrics, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.Fabric(fabrics[0].Name)
}

// --fabric takes the name of a configured fabric, and goes only with the
// commands that act on one: anything else is a wrong command line (exit 2),
// said before the database is opened.
func TestFabricFlagIsAConfiguredFabric(t *testing.T) {
	f := newTwoFabrics(t, config.EngineSQLite)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown fabric", []string{"--show-keys", "--fabric", "compute"},
			"--fabric compute: the configuration has no such fabric; it has default, storage"},
		{"unknown fabric of --status", []string{"--status", "--fabric", "Storage"}, "it has default, storage"},
		{"unknown fabric of --render", []string{"--render", "--fabric", "nope"}, "it has default, storage"},
		{"unknown fabric of --confirm-switches", []string{"--confirm-switches", "--fabric", "nope"}, "it has default, storage"},
		{"unknown fabric of --rotate-keys", []string{"--rotate-keys", "m_key", "--fabric", "nope"}, "it has default, storage"},
		{"unknown fabric of --adopt-partitions", []string{"--adopt-partitions", "x.conf", "--fabric", "nope"}, "it has default, storage"},
		{"unknown fabric of --release-adopted", []string{"--release-adopted", "0x10", "--fabric", "nope"}, "it has default, storage"},
		{"unknown fabric of --audit", []string{"--audit", "--fabric", "nope"}, "it has default, storage"},
		{"empty name", []string{"--status", "--fabric", ""}, "a fabric's name, not nothing"},
		{"with --migrate", []string{"--migrate", "--fabric", "storage"}, "--fabric goes with the operator's commands"},
		{"with --healthcheck", []string{"--healthcheck", "--fabric", "storage"}, "--fabric goes with the operator's commands"},
		{"with --import-neutron", []string{"--import-neutron", "--fabric", "storage"}, "--fabric goes with the operator's commands"},
		{"with the manager", []string{"--fabric", "storage"}, "--fabric goes with the operator's commands"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCommand(t, append([]string{"--config-file", f.conf}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("%s: exit %d, want %d saying %q:\n%s%s", strings.Join(tc.args, " "), code, exitUsage, tc.want, out, errOut)
			}
		})
	}
	// Refused before anything was read or written: no keys were chosen.
	for _, st := range []*store.Store{f.def, f.storage} {
		if k, err := st.Secrets(t.Context()); err != nil || len(k) != 0 {
			t.Errorf("fabric %s's secrets after refused commands = %d, %v; want none", st.FabricName(), len(k), err)
		}
	}
}

// --fabric default is the default fabric's, as no --fabric is: a
// configuration of one fabric takes it too.
func TestFabricFlagDefault(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	st := storetest.OpenDatabase(t, db)
	k, err := opensm.DatabaseKeys{Store: st}.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	conf := writeConf(t, db.URL, t.TempDir())
	for _, args := range [][]string{{"--show-keys"}, {"--show-keys", "--fabric", "default"}} {
		code, out, errOut := runCommand(t, append([]string{"--config-file", conf}, args...)...)
		if want := "m_key " + opensm.FormatKey(k.MKey) + "\n"; code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("%s: exit %d, want 0 starting %q:\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
	}
	code, _, errOut := runCommand(t, "--config-file", conf, "--show-keys", "--fabric", "storage")
	if want := "it has default"; code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("--fabric storage of one fabric: exit %d, want %d saying %q: %s", code, exitUsage, want, errOut)
	}
}

// Each command acts on the fabric --fabric names, and leaves the other's
// state as it was.
func TestCommandsActOnTheNamedFabricOnly(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		args  []string
		setUp func(t *testing.T, f fabricsDB)
		check func(t *testing.T, f fabricsDB, out string)
		// file is a file argument after args, written into the storage
		// fabric's config_dir; "" for none.
		file, fileText string
	}{
		{"--confirm-switches", []string{"--confirm-switches", "--fabric", "storage"},
			func(t *testing.T, f fabricsDB) {
				confirm(t, f.def, 0x0002c90300f00009)
				copyFile(t, filepath.Join("testdata", "opensm-subnet.lst"), filepath.Join(f.storageDir, "opensm-subnet.lst"))
			},
			func(t *testing.T, f fabricsDB, out string) {
				wantSwitches(t, f.storage, 0x0002c90300f00001, 0x0002c90300f00002)
				wantSwitches(t, f.def, 0x0002c90300f00009)
			}, "", ""},
		{"--clear-enforcement-errors", []string{"--clear-enforcement-errors", "--fabric", "storage"},
			func(t *testing.T, f fabricsDB) {
				for _, st := range []*store.Store{f.def, f.storage} {
					term, err := st.NewTerm(ctx, "host-a pid 42")
					if err != nil {
						t.Fatal(err)
					}
					if err := st.RecordEnforcementErrors(ctx, term, []store.EnforcementSighting{{Switch: "0x0002c90300f00001",
						Port: 2, Line: "ERR 0507 on " + st.FabricName()}}); err != nil {
						t.Fatal(err)
					}
				}
			},
			func(t *testing.T, f fabricsDB, out string) {
				if !strings.Contains(out, "cleared 1 enforcement errors") {
					t.Errorf("output %q; want 1 cleared", out)
				}
				if errs, err := f.storage.EnforcementErrors(ctx); err != nil || len(errs) != 0 {
					t.Errorf("storage's enforcement errors = %v, %v; want none", errs, err)
				}
				if errs, err := f.def.EnforcementErrors(ctx); err != nil || len(errs) != 1 || errs[0].Line != "ERR 0507 on default" {
					t.Errorf("default's enforcement errors = %+v, %v; want its own one", errs, err)
				}
			}, "", ""},
		{"--show-keys", []string{"--show-keys", "--fabric", "storage"},
			func(t *testing.T, f fabricsDB) { createKeys(t, f) },
			func(t *testing.T, f fabricsDB, out string) {
				if want := "m_key " + storageKeys[opensm.SecretMKey] + "\nsm_key " + storageKeys[opensm.SecretSMKey] + "\n"; !strings.HasPrefix(out, want) {
					t.Errorf("--show-keys --fabric storage printed\n%s\nwant it to start with storage's keys\n%s", out, want)
				}
				if strings.Contains(out, defaultKeys[opensm.SecretMKey]) {
					t.Errorf("--show-keys --fabric storage shows the default fabric's M_Key:\n%s", out)
				}
			}, "", ""},
		{"--rotate-keys", []string{"--rotate-keys", "m_key", "--fabric", "storage"},
			func(t *testing.T, f fabricsDB) { createKeys(t, f) },
			func(t *testing.T, f fabricsDB, out string) {
				if got := secretsOf(t, f.def); !maps.Equal(got, defaultKeys) {
					t.Errorf("default's keys after --rotate-keys --fabric storage = %v; want them unchanged", got)
				}
				got := secretsOf(t, f.storage)
				if got[opensm.SecretMKey] == storageKeys[opensm.SecretMKey] || got[opensm.SecretSMKey] != storageKeys[opensm.SecretSMKey] {
					t.Errorf("storage's keys after --rotate-keys m_key = %v; want a new m_key only", got)
				}
			}, "", ""},
		{"--show-enforcement-errors", []string{"--show-enforcement-errors", "--fabric", "storage"},
			func(t *testing.T, f fabricsDB) {
				term, err := f.def.NewTerm(ctx, "host-a pid 42")
				if err != nil {
					t.Fatal(err)
				}
				if err := f.def.RecordEnforcementErrors(ctx, term, []store.EnforcementSighting{{Switch: "0x0002c90300f00001",
					Port: 2, Line: "ERR 0507 on default"}}); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, f fabricsDB, out string) {
				if out != "no enforcement errors recorded\n" {
					t.Errorf("--show-enforcement-errors --fabric storage printed %q; want none, the default fabric's error is not its", out)
				}
			}, "", ""},
		{"--adopt-partitions", []string{"--fabric", "storage", "--adopt-partitions"},
			func(t *testing.T, f fabricsDB) {},
			func(t *testing.T, f fabricsDB, out string) {
				if got := adoptedPKeys(t, f.storage); !slices.Equal(got, []string{"0x0010"}) {
					t.Errorf("storage's adopted partitions = %v; want 0x0010", got)
				}
				if got := adoptedPKeys(t, f.def); len(got) != 0 {
					t.Errorf("default's adopted partitions = %v; want none", got)
				}
			}, "running.conf", "tenant_a=0x0010, ipoib : 0x0002c90300000a01=full ;\n"},
		{"--import-keys", []string{"--fabric", "storage", "--replace-keys", "--import-keys"},
			func(t *testing.T, f fabricsDB) { createKeys(t, f) },
			func(t *testing.T, f fabricsDB, out string) {
				if got := secretsOf(t, f.storage); !maps.Equal(got, ufmKeys) {
					t.Errorf("storage's keys after --import-keys = %v; want UFM's %v", got, ufmKeys)
				}
				if got := secretsOf(t, f.def); !maps.Equal(got, defaultKeys) {
					t.Errorf("default's keys after --import-keys --fabric storage = %v; want them unchanged", got)
				}
			}, "opensm.conf", ufmConf},
		{"--render", []string{"--render", "--fabric", "storage"},
			func(t *testing.T, f fabricsDB) {
				recordNetwork(t, f.def, "net-ib", "ib", 101)
				recordNetwork(t, f.def, "net-storage", "storage", 102)
			},
			func(t *testing.T, f fabricsDB, out string) {
				if !strings.Contains(out, "=0x0066") || strings.Contains(out, "=0x0065") {
					t.Errorf("--render --fabric storage printed\n%s\nwant the storage network's pkey 0x0066 and not ib's 0x0065", out)
				}
			}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTwoFabrics(t, config.EngineSQLite)
			tc.setUp(t, f)
			args := append([]string{"--config-file", f.conf}, tc.args...)
			if tc.file != "" {
				path := filepath.Join(f.storageDir, tc.file)
				if err := os.WriteFile(path, []byte(tc.fileText), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, path)
			}
			code, out, errOut := runCommand(t, args...)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s%s", strings.Join(tc.args, " "), code, out, errOut)
			}
			tc.check(t, f, out)
		})
	}
}

// Keys of each fabric, set up by createKeys.
var (
	defaultKeys = map[string]string{opensm.SecretMKey: "0x00000000000d0001", opensm.SecretSMKey: "0x00000000000d0002", opensm.SecretSAKey: "0x00000000000d0003"}
	storageKeys = map[string]string{opensm.SecretMKey: "0x00000000005a0001", opensm.SecretSMKey: "0x00000000005a0002", opensm.SecretSAKey: "0x00000000005a0003"}
)

// createKeys records defaultKeys and storageKeys as each fabric's.
func createKeys(t *testing.T, f fabricsDB) {
	t.Helper()
	for st, keys := range map[*store.Store]map[string]string{f.def: defaultKeys, f.storage: storageKeys} {
		if _, err := st.GetOrCreateSecrets(t.Context(), func() (map[string]string, error) { return keys, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got := secretsOf(t, f.storage); !maps.Equal(got, storageKeys) {
		t.Fatalf("storage's keys = %v; want %v", got, storageKeys)
	}
}

// confirm records guids as st's expected switches.
func confirm(t *testing.T, st *store.Store, guids ...fabric.GUID) {
	t.Helper()
	var switches []store.ExpectedSwitch
	for _, g := range guids {
		switches = append(switches, store.ExpectedSwitch{GUID: g, Description: "switch " + g.String()})
	}
	if err := st.ConfirmSwitches(t.Context(), switches); err != nil {
		t.Fatal(err)
	}
}

// wantSwitches checks st's expected switches.
func wantSwitches(t *testing.T, st *store.Store, want ...fabric.GUID) {
	t.Helper()
	got, err := st.ExpectedSwitches(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var guids []fabric.GUID
	for _, sw := range got {
		guids = append(guids, sw.GUID)
	}
	if !slices.Equal(guids, want) {
		t.Errorf("fabric %s's expected switches = %v; want %v", st.FabricName(), guids, want)
	}
}

// recordNetwork records network id, a VLAN on physnet, through st (which
// routes it to physnet's fabric).
func recordNetwork(t *testing.T, st *store.Store, id, physnet string, vlan int64) {
	t.Helper()
	if _, err := st.RecordNetwork(t.Context(), store.NetworkChange{Network: store.NetworkSpec{ID: id, Name: id,
		Type: store.TypeVLAN, PhysicalNetwork: physnet, SegmentationID: &vlan}, Operation: store.OpCreateNetwork,
		CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
}

// adoptedPKeys are st's adopted partitions' pkeys.
func adoptedPKeys(t *testing.T, st *store.Store) []string {
	t.Helper()
	adopted, err := st.AdoptedPartitions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var pkeys []string
	for _, a := range adopted {
		pkeys = append(pkeys, a.PKey.String())
	}
	return pkeys
}

// --unfreeze --fabric NAME lifts that fabric's freeze only: each fabric has
// its own lease, and another fabric's freeze stays until its own operator
// has made sure of its own OpenSM.
func TestUnfreezeActsOnTheNamedFabricOnly(t *testing.T) {
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		t.Run(engine, func(t *testing.T) {
			f := newTwoFabrics(t, engine)
			b, err := os.ReadFile(f.conf)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f.conf, append(b, "\n[ha]\nha = true\n"...), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			leases := map[string]store.LeaseTables{}
			for _, st := range []*store.Store{f.def, f.storage} {
				l, err := st.Leases()
				if err != nil {
					t.Fatal(err)
				}
				taken, won, err := l.TakeLease(ctx, "host-b pid 2", time.Minute)
				if err != nil || !won {
					t.Fatalf("take %s's lease = %v, %v", st.FabricName(), won, err)
				}
				if _, err := l.SetFreeze(ctx, taken.Term, "Frozen: check host-a pid 1"); err != nil {
					t.Fatal(err)
				}
				leases[st.FabricName()] = l
			}
			code, out, errOut := runCommand(t, "--config-file", f.conf, "--unfreeze", "--fabric", "storage")
			if code != 0 || !strings.Contains(out, "unfreeze requested") {
				t.Fatalf("--unfreeze --fabric storage: exit %d: %s%s", code, out, errOut)
			}
			for name, want := range map[string]bool{"storage": true, "default": false} {
				l, err := leases[name].ReadLease(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if l.UnfreezeRequested != want || l.Freeze == "" {
					t.Errorf("fabric %s's lease after --unfreeze --fabric storage = %+v; want frozen, unfreeze requested %v", name, l, want)
				}
			}
		})
	}
}
