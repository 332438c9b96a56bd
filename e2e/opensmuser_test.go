package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// TestOpenSMReadsNoneOfTheManagersFiles: a manager with [opensm] user =
// afm-opensm (created with useradd where missing, as the package does) runs
// the real OpenSM as that user, and a port's job completes on the simulated
// fabric; OpenSM's process holds no capability and none of the manager's
// variables, and in its view afm.conf's directory is empty and the SQLite
// database absent, though both are there for the manager.
func TestOpenSMReadsNoneOfTheManagersFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root: the manager starts OpenSM as another user")
	}
	u := e2eSMUser(t)
	const secretVar, secret = "AFM_E2E_MANAGER_SECRET", "e2e-manager-secret-never-for-opensm"
	t.Setenv(secretVar, secret) // the manager inherits it
	db := storetest.NewDatabase(t, config.EngineSQLite)
	m := launchManager(t, db, fabricOptions(1), settings{OpenSM: []string{"user = afm-opensm"},
		BeforeStart: func(m *manager) {
			// The test directories are 0700, as the package's state
			// directory is not: OpenSM's user must pass through to its
			// config_dir and its cache (the fabric's directory).
			for _, d := range []string{m.dir, filepath.Dir(m.dir), m.fabric.Dir, filepath.Dir(m.fabric.Dir)} {
				if err := os.Chmod(d, 0o711); err != nil {
					t.Fatal(err)
				}
			}
		}})
	m.confirmSwitches()
	h1 := m.fabric.Host("H1").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h1", auditNet, vendorClientID(h1))), nil)

	st, err := opensm.ReadStatus(filepath.Join(m.dir, "opensm", "driver-status.json"))
	if err != nil || st.PID == 0 {
		t.Fatalf("OpenSM's status: %+v, %v", st, err)
	}
	proc := fmt.Sprintf("/proc/%d", st.PID)
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		fields := strings.Fields(v)
		switch {
		case k == "Uid" && !slices.Equal(fields, slices.Repeat([]string{u.Uid}, 4)):
			t.Errorf("OpenSM's uids %q, want afm-opensm's %s", fields, u.Uid)
		case k == "CapEff" && fields[0] != "0000000000000000":
			t.Errorf("OpenSM's effective capabilities %s, want none", fields[0])
		}
	}
	if environ, err := os.ReadFile(proc + "/environ"); err != nil || strings.Contains(string(environ), secret) {
		t.Errorf("OpenSM's environment (%v) holds the manager's %s", err, secretVar)
	}
	root := proc + "/root"
	if entries, err := os.ReadDir(root + m.dir); err != nil || slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return e.Name() == "afm.conf"
	}) {
		t.Errorf("afm.conf's directory in OpenSM's view: %v, %v; want no afm.conf", entries, err)
	}
	if _, err := os.Stat(root + db.DSN); !os.IsNotExist(err) {
		t.Errorf("the database in OpenSM's view: %v, want it absent", err)
	}
	for _, p := range []string{m.conf, db.DSN} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s for the manager: %v", p, err)
		}
	}
}

// e2eSMUser is the user afm-opensm, created where it is missing.
func e2eSMUser(t *testing.T) *user.User {
	t.Helper()
	if u, err := user.Lookup("afm-opensm"); err == nil {
		return u
	}
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
		"--shell", "/usr/sbin/nologin", "afm-opensm").CombinedOutput(); err != nil {
		t.Logf("useradd afm-opensm: %v: %s", err, out)
	} else {
		t.Log("created the system user afm-opensm (useradd --system), as the package does")
	}
	u, err := user.Lookup("afm-opensm")
	if err != nil {
		testenv.Missing(t, "no user afm-opensm: %v", err)
	}
	return u
}
