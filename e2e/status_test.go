package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// --status beside a real manager says every gate is open, and exits 0, once
// jobs complete; once that manager is killed (its OpenSM gone with it, the
// driver's status file still saying "running") it says no manager applies,
// and exits 3, as soon as the heartbeat is stale.
func TestStatusOnceTheManagerIsGone(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 1}, settings{})
	m.confirmSwitches()
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	if code, out := m.statusExit(); code != 0 || !strings.Contains(out, "jobs complete: every gate is open") {
		t.Fatalf("--status beside a manager whose jobs complete: exit %d:\n%s", code, out)
	}

	// For up to the heartbeat's 10 s a killed manager still looks alive
	// (docs/status.md); after that --status must say it is gone.
	m.kill()
	var out string
	waitFor(t, "--status to say that no manager applies", func() bool {
		var code int
		code, out = m.statusExit()
		return code == 3 && strings.Contains(out, "no manager applies")
	})
	if strings.Contains(out, "every gate is open") {
		t.Errorf("--status with the manager gone says every gate is open:\n%s", out)
	}
}

// statusExit runs --status and returns its exit status and standard output.
func (m *manager) statusExit() (int, string) {
	m.t.Helper()
	cmd := exec.Command(managerBinary, "--config-file", m.conf, "--status")
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		m.t.Fatalf("--status: %v", err)
	}
	return 0, string(out)
}
