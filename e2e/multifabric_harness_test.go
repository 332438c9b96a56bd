package e2e

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// One manager on two simulated fabrics: the default fabric serves the physnet
// ibnet ([api] physical_networks), the fabric "storage" ([fabric:storage])
// the physnet storage. Each fabric is a simulator of its own (its own ibsim
// socket, named in its own env file) with the same GUIDs: every simulated
// fabric's SM port and hosts repeat them, as two real subnets may not, but
// the manager must keep them apart anyway.

const (
	storageFabric  = "storage"
	storagePhysnet = "storage"
)

// fabricSide is how one manager reaches one fabric: the env file its OpenSM
// runs with (the fabric's own, or one attaching it to another SM HCA), the
// GUID of that SM port and further [opensm_conf] lines.
type fabricSide struct {
	fabric     *fabricsim.Fabric
	envFile    string // "": the fabric's own env file
	guid       fabric.GUID
	openSMConf []string
}

// ownSide is the fabric's own SM HCA, as a single manager uses it.
func ownSide(f *fabricsim.Fabric) fabricSide { return fabricSide{fabric: f, guid: f.SMGUID} }

// smSide attaches manager k's OpenSM to the fabric's SM HCA k (HA: each
// manager's OpenSM on an HCA of its own), with its env file in dir.
func smSide(t *testing.T, f *fabricsim.Fabric, k int, dir, name string, conf ...string) fabricSide {
	env, guid := f.SMEnv(k)
	file := filepath.Join(dir, name+".env")
	if err := os.WriteFile(file, []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fabricSide{fabric: f, envFile: file, guid: guid, openSMConf: conf}
}

// twoFabrics is one manager on the default fabric (m.fabric) and storage.
type twoFabrics struct {
	*manager
	storage *fabricsim.Fabric
}

// storageDir is the storage fabric's config_dir: its partitions file,
// opensm.conf and subnet dump.
func (m *twoFabrics) storageDir() string { return filepath.Join(m.dir, "opensm-storage") }

// launchTwoFabrics writes the configuration of a manager of both fabrics on
// db and starts it; extra is appended (an [ha] section).
func launchTwoFabrics(t *testing.T, db storetest.Database, def, storage fabricSide, extra ...string) *twoFabrics {
	t.Helper()
	m := &twoFabrics{manager: newManager(t, def.fabric, ""), storage: storage.fabric}
	dir := m.dir
	conf := testenv.AFMConf{
		Listen: strings.TrimPrefix(m.url, "http://"), Token: token, API: []string{"physical_networks = " + ibPhysnet},
		Connection: db.URL, Database: []string{"poll_interval = 0.2"},
		ConfigDir: filepath.Join(dir, "opensm"), EnvFile: cmp.Or(def.envFile, def.fabric.EnvFile()),
		OpenSM: []string{"check_interval = 2", "sweep_timeout = 20"},
		GUID:   def.guid.String(), OpenSMConf: def.openSMConf,
		Sections: []testenv.Section{
			{Name: "fabric:" + storageFabric, Lines: []string{"physical_networks = " + storagePhysnet,
				"config_dir = " + m.storageDir(), "log_file = " + filepath.Join(dir, "opensm-storage.log"),
				"env_file = " + cmp.Or(storage.envFile, storage.fabric.EnvFile()), "check_interval = 2", "sweep_timeout = 20"}},
			{Name: "fabric:" + storageFabric + ":opensm_conf", Lines: append([]string{"guid = " + storage.guid.String()}, storage.openSMConf...)},
		},
	}
	text := conf.String()
	if len(extra) > 0 {
		text += "\n" + strings.Join(extra, "\n") + "\n"
	}
	m.writeConf(text)
	m.startUntilCleanup()
	return m
}

// confirmBoth confirms each fabric's switches once its OpenSM has swept.
func (m *twoFabrics) confirmBoth() {
	m.t.Helper()
	m.confirmSwitches()
	m.confirmFabricSwitches(storageFabric, m.storageDir())
}

// confirmFabricSwitches is confirmSwitches for a named fabric.
func (m *manager) confirmFabricSwitches(name, configDir string) {
	m.t.Helper()
	dump := filepath.Join(configDir, "opensm-subnet.lst")
	waitFor(m.t, "OpenSM's first subnet dump of fabric "+name, func() bool {
		_, err := os.Stat(dump)
		return !errors.Is(err, fs.ErrNotExist)
	})
	var out string
	waitFor(m.t, "--confirm-switches --fabric "+name+" to succeed", func() bool {
		var err error
		out, err = m.tryOperator("--confirm-switches", "--fabric", name)
		return err == nil
	})
	if !strings.Contains(out, "confirmed") {
		m.t.Fatalf("--confirm-switches --fabric %s printed %q", name, out)
	}
}

// storagePKeys reads a port's P_Key table on the storage fabric.
func (m *twoFabrics) storagePKeys(port fabric.GUID) []uint16 {
	m.t.Helper()
	got, err := m.storage.PKeys(m.t.Context(), port)
	if err != nil {
		m.t.Fatalf("read pkeys of %s on the storage fabric: %v", port, err)
	}
	return got
}

// partitionsFiles are the default and the storage fabric's partitions files.
func (m *twoFabrics) partitionsFiles() (def, storage string) {
	m.t.Helper()
	d, err := os.ReadFile(filepath.Join(m.dir, "opensm", "partitions.conf"))
	if err != nil {
		m.t.Fatal(err)
	}
	s, err := os.ReadFile(filepath.Join(m.storageDir(), "partitions.conf"))
	if err != nil {
		m.t.Fatal(err)
	}
	return string(d), string(s)
}

// openSMIn is the PID of the manager's OpenSM child whose working directory
// is configDir (each fabric's OpenSM runs in its config_dir), 0 when none.
func (m *manager) openSMIn(configDir string) int {
	pid := m.proc.Pid()
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			comm, _ := os.ReadFile(filepath.Join("/proc", c, "comm"))
			cwd, _ := os.Readlink(filepath.Join("/proc", c, "cwd"))
			if strings.TrimSpace(string(comm)) == "opensm" && cwd == configDir {
				n, _ := strconv.Atoi(c)
				return n
			}
		}
	}
	return 0
}

// fabricStatus is one fabric's entry of --status --json's fabrics array.
type fabricStatus struct {
	Name          string   `json:"name"`
	NotCompleting []string `json:"not_completing"`
}

// fabricStatuses runs --status --json (whatever its exit status: 3 while
// jobs do not complete) and returns its fabrics by name.
func (m *manager) fabricStatuses() map[string]fabricStatus {
	m.t.Helper()
	out, _ := m.tryOperator("--status", "--json")
	var s struct {
		Fabrics []fabricStatus `json:"fabrics"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		m.t.Fatalf("--status --json: %v:\n%s", err, out)
	}
	byName := make(map[string]fabricStatus, len(s.Fabrics))
	for _, f := range s.Fabrics {
		byName[f.Name] = f
	}
	return byName
}

// networkOn is a VLAN network on physnet, as networking-mlnx sends it.
func networkOn(id, physnet string, vlan int) string {
	return fmt.Sprintf(`{"id": %q, "name": "net-%s", "provider:network_type": "vlan",
  "provider:physical_network": %q, "provider:segmentation_id": %d, "status": "ACTIVE", "admin_state_up": true}`,
		id, physnet, physnet, vlan)
}
