package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/manager"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// fakeFabric is one fabric of writeTwoFabrics: its directories and the files its
// fake OpenSM (testdata/fake-opensm) writes.
type fakeFabric struct {
	configDir, logFile, starts string
}

// startLines are the fake OpenSM's recorded starts.
func (f fakeFabric) startLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.starts)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// twoFabricsConf is the default fabric and [fabric:storage], each with its
// own fake OpenSM, directories, HCA port and env file, on one SQLite
// database. verify = log: no fabric to read back.
const twoFabricsConf = `[api]
token = s3cret-token-0123456789
physical_networks = ibnet
[database]
connection = sqlite:///%[1]s/afm.db
[opensm]
command = /bin/sh %[2]s
config_dir = %[3]s
log_file = %[4]s
env_file = %[5]s
verify = log
[opensm_conf]
guid = 0x0002c90300a00001
[fabric:storage]
physical_networks = storage
command = /bin/sh %[2]s
config_dir = %[6]s
log_file = %[7]s
env_file = %[8]s
verify = log
[fabric:storage:opensm_conf]
guid = 0x0002c90300b00001
sm_priority = 14
`

// writeTwoFabrics writes twoFabricsConf; storageEnv are more lines of the storage
// fabric's env file.
func writeTwoFabrics(t *testing.T, storageEnv ...string) (*config.Config, [2]fakeFabric) {
	t.Helper()
	dir := t.TempDir()
	fake, err := filepath.Abs("testdata/fake-opensm")
	if err != nil {
		t.Fatal(err)
	}
	var fabs [2]fakeFabric
	var envs [2]string
	for i, name := range []string{"default", "storage"} {
		f := fakeFabric{configDir: filepath.Join(dir, name, "opensm"), logFile: filepath.Join(dir, name, "opensm.log"),
			starts: filepath.Join(dir, name, "starts")}
		if err := os.MkdirAll(filepath.Dir(f.configDir), 0o700); err != nil {
			t.Fatal(err)
		}
		envs[i] = filepath.Join(dir, name, "env")
		lines := []string{"FAKE_OPENSM_STARTS=" + f.starts, "FAKE_OPENSM_LOG=" + f.logFile}
		if name == "storage" {
			lines = append(lines, storageEnv...)
		}
		if err := os.WriteFile(envs[i], []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fabs[i] = f
	}
	text := fmt.Sprintf(twoFabricsConf, dir, fake, fabs[0].configDir, fabs[0].logFile, envs[0],
		fabs[1].configDir, fabs[1].logFile, envs[1])
	path := filepath.Join(dir, "afm.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, fabs
}

// Each fabric gets its own OpenSM supervisor, opensm.conf (with its own
// options), partitions file, log and subnet dump, and its own store view.
func TestWireGivesEachFabricItsOwnOpenSM(t *testing.T) {
	t.Setenv("OSM_CACHE_DIR", "")
	os.Unsetenv("OSM_CACHE_DIR")
	cfg, fabs := writeTwoFabrics(t)
	var logged testenv.SyncBuffer
	mgr, err := manager.New(t.Context(), cfg, slog.New(slog.NewJSONHandler(&logged, nil)), versionString())
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	fabrics := mgr.Fabrics()
	// Each fabric's lines say which fabric they are about.
	for _, name := range []string{"default", "storage"} {
		if want := `"msg":"OpenSM hardening","fabric":"` + name + `"`; !strings.Contains(logged.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logged.String())
		}
	}
	if len(fabrics) != 2 {
		t.Fatalf("%d fabrics wired, want 2", len(fabrics))
	}
	if fabrics[0].Supervisor() == fabrics[1].Supervisor() {
		t.Error("the fabrics share one OpenSM supervisor")
	}
	for i, name := range []string{"default", "storage"} {
		fr, f := fabrics[i], fabs[i]
		if fr.Name() != name || fr.Store().FabricName() != name {
			t.Errorf("fabric %d is %q with the store view of %q, want %q", i, fr.Name(), fr.Store().FabricName(), name)
		}
		c := fr.ApplierConfig()
		if c.PartitionsFile != filepath.Join(f.configDir, "partitions.conf") || c.LogFile != f.logFile ||
			c.SubnetDump != filepath.Join(f.configDir, "opensm-subnet.lst") {
			t.Errorf("fabric %s applies with partitions %s, log %s, dump %s; want its own in %s",
				name, c.PartitionsFile, c.LogFile, c.SubnetDump, f.configDir)
		}
		conf, err := os.ReadFile(filepath.Join(f.configDir, "opensm.conf"))
		if err != nil {
			t.Fatalf("fabric %s: %v", name, err)
		}
		if !strings.Contains(string(conf), "partition_config_file "+c.PartitionsFile) {
			t.Errorf("fabric %s's opensm.conf does not name its partitions file:\n%s", name, conf)
		}
		if got := strings.Contains(string(conf), "sm_priority 14"); got != (name == "storage") {
			t.Errorf("fabric %s's opensm.conf has [fabric:storage:opensm_conf]'s sm_priority: %t", name, got)
		}
	}
}
