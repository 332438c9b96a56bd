package e2e

import (
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestMultiFabric runs one manager on two simulated fabrics from one
// database, on every engine, through the steps of docs/multi-fabric.md's
// test plan: the same VLAN on both physnets, the same GUID on both fabrics,
// and one fabric's OpenSM down while the other's changes complete.
func TestMultiFabric(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			f1 := fabricsim.StartT(t, fabricsim.Options{Hosts: 4})
			f2 := fabricsim.StartT(t, fabricsim.Options{Hosts: 4})
			m := launchTwoFabrics(t, storetest.NewDatabase(t, engine), ownSide(f1), ownSide(f2))
			m.confirmBoth()
			steps := []struct {
				name string
				run  func(m *twoFabrics)
			}{
				{"same_vlan_on_two_physnets", sameVLANOnTwoPhysnets},
				{"same_guid_on_two_fabrics", sameGUIDOnTwoFabrics},
				{"one_fabrics_opensm_down", oneFabricsOpenSMDown},
				{"concurrent_changes_on_two_fabrics", concurrentChangesOnTwoFabrics},
			}
			for _, s := range steps {
				t.Run(s.name, func(t *testing.T) {
					parent := m.t
					m.t = t
					defer func() { m.t = parent }()
					start := time.Now()
					s.run(m)
					t.Logf("%s on %s: %v", s.name, engine, time.Since(start).Round(time.Millisecond))
				})
			}
		})
	}
}

// The networks of the steps: one on each physnet per step. Their IDs differ
// in their first characters, which name their partitions in the files.
const (
	vlanNetIB      = "1b0c6a1e-0a41-4d7e-9b7e-11a0c0ffee01"
	vlanNetStorage = "2b0c6a1e-0a41-4d7e-9b7e-11a0c0ffee02"
	vlanNetIB2     = "3b0c6a1e-0a41-4d7e-9b7e-11a0c0ffee03"
	guidNetStorage = "4b0c6a1e-0a41-4d7e-9b7e-11a0c0ffee04"
	downNetIB      = "5b0c6a1e-0a41-4d7e-9b7e-11a0c0ffee05"
	downNetStorage = "6b0c6a1e-0a41-4d7e-9b7e-11a0c0ffee06"
)

// sameVLANOnTwoPhysnets: VLAN 100 on ibnet and on storage, which Neutron
// allows: both are accepted, each fabric's partition 0x0064 holds its own
// port only (H1 on the default fabric, H2 on storage), read back from the
// ports' own tables, and neither partition is in the other fabric's file. A
// second network with VLAN 100 on ibnet is still refused: pkeys are unique
// per fabric.
func sameVLANOnTwoPhysnets(m *twoFabrics) {
	t := m.t
	h1, h2 := fabricsim.HostGUID(1), fabricsim.HostGUID(2)
	m.waitCompleted(m.accept("POST", "/cloudx/Network", networkOn(vlanNetIB, ibPhysnet, 100)), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Network", networkOn(vlanNetStorage, storagePhysnet, 100)), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("vlan-port-ib-h1", vlanNetIB, vendorClientID(h1))), func() {
		if got := m.pkeys(h1); !slices.Contains(got, 0x8064) {
			t.Fatalf("the ibnet port read Completed while H1's table on the default fabric is %s", hex(got))
		}
	})
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("vlan-port-st-h2", vlanNetStorage, vendorClientID(h2))), func() {
		if got := m.storagePKeys(h2); !slices.Contains(got, 0x8064) {
			t.Fatalf("the storage port read Completed while H2's table on the storage fabric is %s", hex(got))
		}
	})
	for _, c := range []struct {
		fabric string
		read   func(fabric.GUID) []uint16
		host   fabric.GUID
		member bool
	}{
		{"default", m.pkeys, h1, true}, {"default", m.pkeys, h2, false},
		{storageFabric, m.storagePKeys, h2, true}, {storageFabric, m.storagePKeys, h1, false},
	} {
		got := c.read(c.host)
		if slices.Contains(got, 0x8064) != c.member || slices.Contains(got, 0x0064) {
			t.Errorf("fabric %s: %s's table is %s; full member of 0x0064: want %v", c.fabric, c.host, hex(got), c.member)
		}
	}
	def, storage := m.partitionsFiles()
	ibName, stName := partitions.PartitionName(vlanNetIB, 0x64), partitions.PartitionName(vlanNetStorage, 0x64)
	if !strings.Contains(def, ibName) || strings.Contains(def, stName) {
		t.Errorf("the default fabric's partitions file: want %s and not %s:\n%s", ibName, stName, def)
	}
	if !strings.Contains(storage, stName) || strings.Contains(storage, ibName) {
		t.Errorf("the storage fabric's partitions file: want %s and not %s:\n%s", stName, ibName, storage)
	}
	if status, body := m.send("POST", "/cloudx/Network", networkOn(vlanNetIB2, ibPhysnet, 100)); status != http.StatusBadRequest {
		t.Errorf("a second network with VLAN 100 on ibnet: status %d, want 400: %s", status, body)
	}
}

// sameGUIDOnTwoFabrics: H3 (the same GUID on both simulated fabrics) gets a
// port on ibnet and one on storage: both are accepted and complete, and each
// fabric's H3 holds its fabric's partition. A second port of H3's GUID on
// another network of the storage fabric is refused: GUIDs are unique per
// fabric.
func sameGUIDOnTwoFabrics(m *twoFabrics) {
	t := m.t
	h3 := fabricsim.HostGUID(3)
	m.waitCompleted(m.accept("POST", "/cloudx/Network", networkOn(guidNetStorage, storagePhysnet, 200)), nil)
	ib := m.accept("POST", "/cloudx/Port", portBody("guid-port-ib-h3", vlanNetIB, vendorClientID(h3)))
	st := m.accept("POST", "/cloudx/Port", portBody("guid-port-st-h3", guidNetStorage, vendorClientID(h3)))
	m.waitCompleted(ib, func() {
		if got := m.pkeys(h3); !slices.Contains(got, 0x8064) {
			t.Fatalf("H3's ibnet port read Completed while its table on the default fabric is %s", hex(got))
		}
	})
	m.waitCompleted(st, func() {
		if got := m.storagePKeys(h3); !slices.Contains(got, 0x80c8) {
			t.Fatalf("H3's storage port read Completed while its table on the storage fabric is %s", hex(got))
		}
	})
	if got := m.pkeys(h3); slices.Contains(got, 0x80c8) {
		t.Errorf("H3 on the default fabric holds the storage partition 0x80c8: %s", hex(got))
	}
	if got := m.storagePKeys(h3); slices.Contains(got, 0x8064) {
		t.Errorf("H3 on the storage fabric holds 0x8064, of the ibnet network only: %s", hex(got))
	}
	status, body := m.send("POST", "/cloudx/Port", portBody("guid-port-st2-h3", vlanNetStorage, vendorClientID(h3)))
	if status != http.StatusBadRequest || !strings.Contains(body, h3.String()) {
		t.Errorf("a second port of %s on the storage fabric: status %d, want 400 naming the GUID: %s", h3, status, body)
	}
	// A port never moves between fabrics (Neutron never moves one between
	// networks): H1's ibnet port sent on a storage network is refused, and H1
	// keeps its place on the default fabric and none on storage.
	h1 := fabricsim.HostGUID(1)
	status, body = m.send("PUT", "/cloudx/Port/vlan-port-ib-h1", portBody("vlan-port-ib-h1", guidNetStorage, vendorClientID(h1)))
	if status != http.StatusBadRequest || !strings.Contains(body, "cannot move between fabrics") {
		t.Errorf("H1's ibnet port sent on a storage network: status %d, want 400 saying it cannot move: %s", status, body)
	}
	if got := m.pkeys(h1); !slices.Contains(got, 0x8064) {
		t.Errorf("after the refused move, H1 on the default fabric lost 0x8064: %s", hex(got))
	}
	if got := m.storagePKeys(h1); slices.Contains(got, 0x80c8) {
		t.Errorf("after the refused move, H1 on the storage fabric holds 0x80c8: %s", hex(got))
	}
}

// oneFabricsOpenSMDown: the storage fabric's OpenSM is killed (-9) and kept
// from starting again (its env file gone). A change on each fabric: the
// default fabric's completes, its OpenSM never restarted, while the storage
// fabric's stays open and --status names the storage fabric's reason; once
// the env file is back, the storage fabric's change completes too.
func oneFabricsOpenSMDown(m *twoFabrics) {
	t := m.t
	h4 := fabricsim.HostGUID(4)
	defPID := m.openSMIn(filepath.Join(m.dir, "opensm"))
	if defPID == 0 {
		t.Fatal("no OpenSM of the default fabric runs")
	}
	var stPID int
	waitFor(t, "the storage fabric's OpenSM running", func() bool { stPID = m.openSMIn(m.storageDir()); return stPID != 0 })
	m.waitBothReady()
	away := m.storage.EnvFile() + ".away"
	if err := os.Rename(m.storage.EnvFile(), away); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := os.Rename(away, m.storage.EnvFile()); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	if err := syscall.Kill(stPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the storage fabric's OpenSM gone", func() bool { return m.openSMIn(m.storageDir()) == 0 })
	fault := time.Now()

	stNet := m.accept("POST", "/cloudx/Network", networkOn(downNetStorage, storagePhysnet, 300))
	stPort := m.accept("POST", "/cloudx/Port", portBody("down-port-st-h4", downNetStorage, vendorClientID(h4)))
	m.waitCompleted(m.accept("POST", "/cloudx/Network", networkOn(downNetIB, ibPhysnet, 300)), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("down-port-ib-h4", downNetIB, vendorClientID(h4))), func() {
		if got := m.pkeys(h4); !slices.Contains(got, 0x812c) {
			t.Fatalf("H4's ibnet port read Completed while its table on the default fabric is %s", hex(got))
		}
	})
	t.Logf("the default fabric's change completed %v after the storage fabric's OpenSM was killed",
		time.Since(fault).Round(time.Millisecond))
	for _, job := range []string{stNet, stPort} {
		if j := m.job(job); j.Status != "Pending" && j.Status != "Running" {
			t.Errorf("storage job %s is %s while the storage fabric's OpenSM cannot run: %+v", job, j.Status, j)
		}
	}
	if pid := m.openSMIn(filepath.Join(m.dir, "opensm")); pid != defPID {
		t.Errorf("the default fabric's OpenSM changed (pid %d, now %d) while the storage fabric's was down", defPID, pid)
	}
	var st fabricStatus
	waitFor(t, "--status naming the storage fabric's reason", func() bool {
		s := m.fabricStatuses()
		st = s[storageFabric]
		return len(st.NotCompleting) > 0 && len(s["default"].NotCompleting) == 0
	})
	if !strings.Contains(strings.Join(st.NotCompleting, "\n"), "OpenSM") {
		t.Errorf("--status --json: the storage fabric's reasons do not name its OpenSM: %q", st.NotCompleting)
	}
	if code, out := m.statusExit(); code != 3 || !strings.Contains(out, storageFabric) {
		t.Errorf("--status while the storage fabric's OpenSM is down: exit %d, want 3 naming %s:\n%s", code, storageFabric, out)
	}
	m.checkReadyWithoutStorage()

	restore()
	back := time.Now()
	m.waitCompleted(stNet, nil)
	m.waitCompleted(stPort, func() {
		if got := m.storagePKeys(h4); !slices.Contains(got, 0x812c) {
			t.Fatalf("H4's storage port read Completed while its table on the storage fabric is %s", hex(got))
		}
	})
	t.Logf("the storage fabric's changes completed %v after its env file was back", time.Since(back).Round(time.Millisecond))
	if code, out := m.statusExit(); code != 0 {
		t.Errorf("--status once both fabrics run: exit %d, want 0:\n%s", code, out)
	}
	m.waitBothReady()
}

// waitBothReady waits until /readyz answers 200: this manager leads both
// fabrics, each judged ready, no reason given.
func (m *twoFabrics) waitBothReady() {
	m.t.Helper()
	var r readyReport
	waitFor(m.t, "/readyz ready on both fabrics", func() bool {
		var code int
		code, r = m.readyz()
		return code == http.StatusOK
	})
	if r.Status != "ok" || r.Role != "leader" || len(r.Reasons) != 0 ||
		!maps.Equal(r.Fabrics, map[string]string{"default": "ready", storageFabric: "ready"}) {
		m.t.Errorf("/readyz = %+v; want ok, leader, no reasons, both fabrics ready", r)
	}
}

// checkReadyWithoutStorage: while the storage fabric's OpenSM cannot run,
// /readyz answers 503 on the storage fabric's reasons alone, each after its
// name; the default fabric stays ready and its role is the report's.
func (m *twoFabrics) checkReadyWithoutStorage() {
	m.t.Helper()
	const down = "fabric " + storageFabric + ": OpenSM is not running"
	var r readyReport
	waitFor(m.t, "/readyz naming the storage fabric's OpenSM", func() bool {
		var code int
		code, r = m.readyz()
		return code == http.StatusServiceUnavailable && slices.Contains(r.Reasons, down)
	})
	if r.Status != "fail" || r.Role != "leader" || r.Fabrics["default"] != "ready" || len(r.Fabrics) != 2 ||
		!strings.Contains(r.Fabrics[storageFabric], "OpenSM is not running") {
		m.t.Errorf("/readyz = %+v; want fail, leader, the default fabric ready, the storage fabric's OpenSM named", r)
	}
	for _, why := range r.Reasons {
		if !strings.HasPrefix(why, "fabric "+storageFabric+": ") {
			m.t.Errorf("/readyz reason %q is not the storage fabric's", why)
		}
	}
}

// concurrentChangesOnTwoFabrics: networks created at once on both fabrics,
// as two clouds' users do, from several clients: every one is accepted and
// completes. Each fabric records its changes under its own revision's lock,
// so the two fabrics' transactions run side by side: nothing they share (a
// job's id) may be handed out twice.
func concurrentChangesOnTwoFabrics(m *twoFabrics) {
	t := m.t
	const perFabric, clients = 60, 8
	type change struct {
		id, physnet string
		vlan        int
	}
	var changes []change
	for i := range perFabric {
		for k, physnet := range []string{ibPhysnet, storagePhysnet} {
			changes = append(changes, change{fmt.Sprintf("c%07d-0a41-4d7e-9b7e-%012d", 2*i+k, 2*i+k), physnet, 1000 + i})
		}
	}
	jobs := make([]string, len(changes))
	failures := make([]string, len(changes))
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < len(changes); i += clients {
				ch := changes[i]
				status, body := m.send("POST", "/cloudx/Network", networkOn(ch.id, ch.physnet, ch.vlan))
				if status != http.StatusAccepted {
					failures[i] = fmt.Sprintf("network %s on %s: status %d: %s", ch.id, ch.physnet, status, body)
					continue
				}
				jobs[i] = strings.Trim(body, "\"\n ")
			}
		})
	}
	wg.Wait()
	for _, f := range failures {
		if f != "" {
			t.Error(f)
		}
	}
	for _, job := range jobs {
		if job != "" {
			m.waitCompleted(job, nil)
		}
	}
}

// multiHALease is short, so that a failover costs seconds; long enough that
// the leader of the default fabric, paused while the storage fabric's lease
// moves, renews in time (the pause lasts one follower's retry, lease/5).
const multiHALease = 6 * time.Second

// TestMultiFabricHA: two managers with [ha] ha = true on PostgreSQL and
// MariaDB, each leading one fabric (a lease per fabric), each OpenSM on an SM
// HCA of its own on each fabric. kill -9 of the default fabric's leader: the
// default fabric fails over to the other manager, whose storage term never
// changes and whose storage OpenSM never restarts; the storage fabric's
// changes complete throughout.
func TestMultiFabricHA(t *testing.T) {
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		t.Run(engine, func(t *testing.T) {
			start := time.Now()
			multiFabricFailover(t, storetest.NewDatabase(t, engine))
			t.Logf("HA on two fabrics, %s: %v", engine, time.Since(start).Round(time.Millisecond))
		})
	}
}

// haPair is two managers (a and b) of the same two fabrics.
type haPair struct {
	t    *testing.T
	db   storetest.Database
	a, b *twoFabrics
}

// launchHA starts manager k (1 or 2) of the pair. Manager 1's OpenSM has the
// higher priority on the default fabric, manager 2's on storage: a master
// hands over to a higher SM, so the OpenSM of each fabric's intended leader
// never goes STANDBY (a freeze) when it starts beside the other's.
func launchHA(t *testing.T, db storetest.Database, f1, f2 *fabricsim.Fabric, k int) *twoFabrics {
	dir := t.TempDir()
	prio := map[bool]string{true: "sm_priority = 10", false: "sm_priority = 1"}
	poll := []string{"sminfo_polling_timeout = 500", "polling_retry_number = 2"}
	def := smSide(t, f1, k, dir, "default", append(poll, prio[k == 1])...)
	st := smSide(t, f2, k, dir, storageFabric, append(poll, prio[k == 2])...)
	return launchTwoFabrics(t, db, def, st, "[ha]", "ha = true", fmt.Sprintf("lease_timeout = %g", multiHALease.Seconds()))
}

// leaseRow is a fabric's row of the leadership table.
type leaseRow struct {
	holder    string
	term      int64
	heartbeat time.Time
}

func (p *haPair) leaseOf(fabricName string) leaseRow {
	p.t.Helper()
	conn := openSQL(p.t, p.db)
	defer conn.Close()
	var r leaseRow
	var hb sql.NullTime
	err := conn.QueryRowContext(p.t.Context(),
		"SELECT holder, term, heartbeat FROM leadership WHERE fabric = '"+fabricName+"' AND expires_at IS NOT NULL").
		Scan(&r.holder, &r.term, &hb)
	if errors.Is(err, sql.ErrNoRows) {
		return leaseRow{} // released, or never taken
	}
	if err != nil {
		p.t.Fatalf("read the lease of fabric %s: %v", fabricName, err)
	}
	r.heartbeat = hb.Time
	return r
}

// waitHolder waits until m holds fabricName's lease and returns the row.
func (p *haPair) waitHolder(fabricName string, m *twoFabrics) leaseRow {
	p.t.Helper()
	var r leaseRow
	waitUntil(p.t, m.holderName()+" holding the lease of fabric "+fabricName, func() (bool, error) {
		r = p.leaseOf(fabricName)
		return r.holder == m.holderName(), fmt.Errorf("lease %+v", r)
	})
	return r
}

// moveStorageLease makes b the storage fabric's leader while a keeps the
// default fabric's: just after a's renewal of the default lease, a is paused
// (SIGSTOP), its storage OpenSM killed and its storage lease released, so
// that b, the only manager trying, takes it; a is resumed well before its
// default lease runs out, finds its storage lease gone and ends that term.
func (p *haPair) moveStorageLease() {
	t := p.t
	conn := openSQL(t, p.db)
	defer conn.Close()
	last := p.leaseOf("default").heartbeat
	waitFor(t, "a renewal of the default fabric's lease", func() bool { return p.leaseOf("default").heartbeat.After(last) })
	if err := p.a.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	if pid := p.a.openSMIn(p.a.storageDir()); pid != 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if _, err := conn.ExecContext(t.Context(), "UPDATE leadership SET expires_at = NULL WHERE fabric = '"+storageFabric+"'"); err != nil {
		p.a.proc.Signal(syscall.SIGCONT)
		t.Fatal(err)
	}
	p.waitHolder(storageFabric, p.b)
	if err := p.a.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("the storage lease moved to manager 2 in %v (manager 1 paused meanwhile)", time.Since(paused).Round(time.Millisecond))
}

func multiFabricFailover(t *testing.T, db storetest.Database) {
	f1 := fabricsim.StartT(t, fabricsim.Options{Hosts: 3, SMs: 2})
	f2 := fabricsim.StartT(t, fabricsim.Options{Hosts: 3, SMs: 2})
	p := &haPair{t: t, db: db}
	p.a = launchHA(t, db, f1, f2, 1)
	p.waitHolder("default", p.a)
	p.waitHolder(storageFabric, p.a)
	p.a.confirmBoth()
	p.b = launchHA(t, db, f1, f2, 2)
	p.moveStorageLease()
	def := p.waitHolder("default", p.a)
	st := p.waitHolder(storageFabric, p.b)
	if got := p.leaseOf("default"); got.term != def.term {
		t.Fatalf("manager 1's default term changed from %d to %d while the storage lease moved", def.term, got.term)
	}
	waitFor(t, "manager 1's storage OpenSM stopped", func() bool { return p.a.openSMIn(p.a.storageDir()) == 0 })
	var stPID int
	waitFor(t, "manager 2's storage OpenSM running", func() bool { stPID = p.b.openSMIn(p.b.storageDir()); return stPID != 0 })

	h1, h2 := fabricsim.HostGUID(1), fabricsim.HostGUID(2)
	p.b.waitCompleted(p.b.accept("POST", "/cloudx/Network", networkOn(vlanNetIB, ibPhysnet, 100)), nil)
	p.a.waitCompleted(p.a.accept("POST", "/cloudx/Network", networkOn(vlanNetStorage, storagePhysnet, 100)), nil)
	p.b.waitCompleted(p.b.accept("POST", "/cloudx/Port", portBody("ha-ib-h1", vlanNetIB, vendorClientID(h1))), func() {
		if got := p.a.pkeys(h1); !slices.Contains(got, 0x8064) {
			t.Fatalf("H1's ibnet port read Completed while its table on the default fabric is %s", hex(got))
		}
	})
	p.a.waitCompleted(p.a.accept("POST", "/cloudx/Port", portBody("ha-st-h1", vlanNetStorage, vendorClientID(h1))), func() {
		if got := p.a.storagePKeys(h1); !slices.Contains(got, 0x8064) {
			t.Fatalf("H1's storage port read Completed while its table on the storage fabric is %s", hex(got))
		}
	})

	fault := time.Now()
	p.a.kill()
	stJob := p.b.accept("POST", "/cloudx/Port", portBody("ha-st-h2", vlanNetStorage, vendorClientID(h2)))
	ibJob := p.b.accept("POST", "/cloudx/Port", portBody("ha-ib-h2", vlanNetIB, vendorClientID(h2)))
	p.b.waitCompleted(stJob, func() {
		if got := p.b.storagePKeys(h2); !slices.Contains(got, 0x8064) {
			t.Fatalf("H2's storage port read Completed while its table on the storage fabric is %s", hex(got))
		}
	})
	t.Logf("kill -9 of the default fabric's leader: the storage fabric's change completed %v after it",
		time.Since(fault).Round(time.Millisecond))
	p.b.waitCompleted(ibJob, func() {
		if got := p.b.pkeys(h2); !slices.Contains(got, 0x8064) {
			t.Fatalf("H2's ibnet port read Completed while its table on the default fabric is %s", hex(got))
		}
	})
	t.Logf("kill -9 of the default fabric's leader: its fabric's change completed %v after it (lease_timeout %v)",
		time.Since(fault).Round(time.Millisecond), multiHALease)
	if got := p.waitHolder("default", p.b); got.term <= def.term {
		t.Errorf("the default fabric's term after the failover: %d, want above %d", got.term, def.term)
	}
	if got := p.leaseOf(storageFabric); got.term != st.term || got.holder != p.b.holderName() {
		t.Errorf("the storage fabric's lease after the default fabric's failover: %+v, want term %d of %s unchanged",
			got, st.term, p.b.holderName())
	}
	if pid := p.b.openSMIn(p.b.storageDir()); pid != stPID {
		t.Errorf("manager 2's storage OpenSM changed (pid %d, now %d) during the default fabric's failover", stPID, pid)
	}
}

// TestMultiFabricUpgrade: a single-fabric database of the previous release
// (before the fabrics migration) keeps serving once this release migrates
// it, on every engine: its network and port stay in the default fabric's
// partition, a new port completes, and --status finds every gate open. Then a
// storage fabric is added to the configuration: the old network is the
// default fabric's, and a network and port on the storage physnet complete on
// the new fabric only.
func TestMultiFabricUpgrade(t *testing.T) {
	previous := buildPreviousRelease(t)
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			start := time.Now()
			upgradeKeepsServing(t, storetest.NewDatabase(t, engine), previous)
			t.Logf("upgrade of a single-fabric database, %s: %v", engine, time.Since(start).Round(time.Millisecond))
		})
	}
}

func upgradeKeepsServing(t *testing.T, db storetest.Database, previous previousRelease) {
	m := launchManager(t, db, fabricsim.Options{Hosts: 3},
		settings{Binary: previous.binary, API: []string{"physical_networks = " + ibPhysnet}})
	m.confirmSwitches()
	h1, h2, h3 := fabricsim.HostGUID(1), fabricsim.HostGUID(2), fabricsim.HostGUID(3)
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("upgrade-h1", netID, vendorClientID(h1))), nil)
	m.waitPKey(h1, 0x8065, true)

	m.stop()
	m.binary = managerBinary // auto_migrate: this release's migrations, the fabrics one included
	m.start()
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("upgrade-h2", netID, vendorClientID(h2))), func() {
		if got := m.pkeys(h2); !slices.Contains(got, 0x8065) {
			t.Fatalf("H2's port read Completed after the upgrade while its table is %s", hex(got))
		}
	})
	if got := m.pkeys(h1); !slices.Contains(got, 0x8065) {
		t.Errorf("after the upgrade H1, recorded before it, lost 0x8065: %s", hex(got))
	}
	if code, out := m.statusExit(); code != 0 || !strings.Contains(out, "jobs complete: every gate is open") {
		t.Errorf("--status after the upgrade: exit %d:\n%s", code, out)
	}

	m.stop()
	f2 := fabricsim.StartT(t, fabricsim.Options{Hosts: 3})
	storageDir := filepath.Join(m.dir, "opensm-storage")
	section := fmt.Sprintf("\n[fabric:%s]\nphysical_networks = %s\nconfig_dir = %s\nenv_file = %s\n"+
		"check_interval = 2\nsweep_timeout = 20\n\n[fabric:%s:opensm_conf]\nguid = %s\n",
		storageFabric, storagePhysnet, storageDir, f2.EnvFile(), storageFabric, f2.SMGUID)
	appendConf(t, m.conf, section)
	m.start()
	m.confirmFabricSwitches(storageFabric, storageDir)
	two := &twoFabrics{manager: m, storage: f2}
	m.waitCompleted(m.accept("POST", "/cloudx/Network", networkOn(vlanNetStorage, storagePhysnet, 101)), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("upgrade-st-h3", vlanNetStorage, vendorClientID(h3))), func() {
		if got := two.storagePKeys(h3); !slices.Contains(got, 0x8065) {
			t.Fatalf("H3's storage port read Completed while its table on the storage fabric is %s", hex(got))
		}
	})
	for _, h := range []fabric.GUID{h1, h2} {
		if got := m.pkeys(h); !slices.Contains(got, 0x8065) {
			t.Errorf("with a storage fabric added, %s on the default fabric lost 0x8065: %s", h, hex(got))
		}
		if got := two.storagePKeys(h); slices.Contains(got, 0x8065) {
			t.Errorf("%s on the storage fabric holds 0x8065, the default fabric's network: %s", h, hex(got))
		}
	}
	if got := m.pkeys(h3); slices.Contains(got, 0x8065) {
		t.Errorf("H3 on the default fabric holds 0x8065, the storage port's: %s", hex(got))
	}
	def, storage := two.partitionsFiles()
	old := partitions.PartitionName(netID, 0x65)
	if !strings.Contains(def, old) || strings.Contains(storage, old) {
		t.Errorf("the network recorded before the upgrade (%s) should be in the default fabric's file only:\n"+
			"default:\n%s\nstorage:\n%s", old, def, storage)
	}
}

// appendConf appends text to the configuration file.
func appendConf(t *testing.T, conf, text string) {
	t.Helper()
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
