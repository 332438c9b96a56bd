package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// tenantReadsSMKey is what a bare-metal tenant with root on host reads of
// the manager's OpenSM: a SubnGet(SMInfo) from its own HCA port, its
// payload claiming MASTER, answered with OpenSM's SM_Key (the simulator
// reports no M_Key protection on OpenSM's port, which would withhold it).
func tenantReadsSMKey(t *testing.T, f *fabricsim.Fabric, host string) uint64 {
	t.Helper()
	d, ok := pkeyread.SimDialerFromEnv(f.Env())
	if !ok {
		t.Fatal("no simulator")
	}
	d.Node = host
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := d.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lid, err := f.LID(f.SMGUID)
	if err != nil {
		t.Fatal(err)
	}
	var tid atomic.Uint32
	_, key, err := pkeyread.SendSMInfo(ctx, conn, &tid, uint16(lid), pkeyread.SMInfoRequest{
		Sender: pkeyread.SMInfo{GUID: f.Host(host).PortGUID, Priority: 15, State: pkeyread.SMMaster}})
	if err != nil {
		t.Fatalf("the tenant's SubnGet(SMInfo) from %s: %v", host, err)
	}
	return key
}

// TestTenantSMWithTheDisclosedSMKey: a tenant on H1 reads the manager's
// OpenSM's SM_Key from its own port and starts an OpenSM of that key and a
// higher priority. The manager's OpenSM, which takes it for a peer, goes
// STANDBY; on the simulator the tenant's OpenSM, which found it master,
// goes STANDBY as well, and no SM masters the subnet: a fabric-wide denial
// (a tenant's SM that stays MASTER, or one that answers polls as MASTER and
// sweeps nothing, deposes it the same way). The manager must
// fail closed (the job waits, named; --status names it) and recover once
// the tenant's SM stops (its OpenSM master again, the job completed).
func TestTenantSMWithTheDisclosedSMKey(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 2, SMs: 2},
		settings{OpenSMConf: []string{"sminfo_polling_timeout = 1000", "polling_retry_number = 2"}})
	m.confirmSwitches()
	h1, h2 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("5d2e8f1a-3c4b-4a6d-8e9f-0a1b2c3d4e5f", netID, vendorClientID(h2))), nil)

	key := tenantReadsSMKey(t, m.fabric, "H1")
	m.wantOpenSMConfKeys(map[string]string{"sm_key": fmt.Sprintf("0x%016x", key)})
	ownLog := filepath.Join(m.dir, "opensm", "opensm.log")
	from := fileSize(t, ownLog)
	foreign := deposeWithKey(t, m.fabric, ownLog, from, key)
	if strings.Contains(fileFrom(t, ownLog, from), "ERR 2F18") {
		t.Error("the manager's OpenSM took the tenant's SM for one of another SM_Key")
	}

	job := m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1)))
	// The job names the tenant's SM and this OpenSM deposed, whether the
	// tenant's SM is MASTER or, by timing, STANDBY too.
	j := m.waitDescription(job, foreign.guid.String())
	if deposed := fmt.Sprintf("this manager's OpenSM (port %s, STANDBY)", m.fabric.SMGUID); !strings.Contains(j.Description, deposed) {
		t.Errorf("the held job says %q; want it to say %q", j.Description, deposed)
	}
	m.waitStatusAgrees(job)
	if j.Status != "Running" {
		t.Errorf("job %s is %s while the tenant's SM is master; want Running", job, j.Status)
	}
	t.Logf("the held job says: %s", j.Description)
	if out, _ := m.tryOperator("--status"); !strings.Contains(out, foreign.guid.String()) {
		t.Errorf("--status does not name the tenant's SM %s:\n%s", foreign.guid, out)
	} else {
		t.Logf("--status:\n%s", out)
	}

	foreign.stop()
	m.waitCompleted(job, nil)
	waitFor(t, "the manager's OpenSM master again", func() bool {
		return strings.Contains(fileFrom(t, ownLog, from), "Entering MASTER state")
	})
	for _, port := range []fabric.GUID{h1, h2} {
		if got := m.pkeys(port); !slices.Contains(got, 0x8065) {
			t.Errorf("port %s's table is %s after the job completed; want the tenant's pkey 0x8065", port, hex(got))
		}
	}
	if out, _ := m.tryOperator("--status"); strings.Contains(out, foreign.guid.String()) {
		t.Errorf("--status still names the stopped SM %s:\n%s", foreign.guid, out)
	}
}

// deposeWithKey starts the tenant's OpenSM with key and priority 15 until
// the manager's OpenSM, at ownLog from offset from on, leaves MASTER, as a
// tenant would: OpenSM 3.3 on the simulated fabric now and then leaves a
// newcomer of a higher priority STANDBY instead of handing it the subnet,
// and a tenant then restarts its SM.
func deposeWithKey(t *testing.T, f *fabricsim.Fabric, ownLog string, from int64, key uint64) *foreignSM {
	t.Helper()
	for range 5 {
		sm := startForeignSM(t, f, 2, 15, fmt.Sprintf("sm_key 0x%016x", key))
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if strings.Contains(fileFrom(t, ownLog, from), "Entering STANDBY state") {
				return sm
			}
		}
		sm.stop()
		t.Log("the manager's OpenSM kept MASTER: the tenant restarts its SM")
	}
	t.Fatal("the manager's OpenSM never handed the subnet over to the tenant's SM of its SM_Key")
	return nil
}

// fileFrom is the file at path from offset from on; all of it if it was
// rewritten shorter (a restarted OpenSM starts its log anew).
func fileFrom(t *testing.T, path string, from int64) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	if int64(len(b)) < from {
		return string(b)
	}
	return string(b[from:])
}
