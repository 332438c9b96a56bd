package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// The audit tests run the manager with an audit every 0.2 s on three hosts:
// VLAN 101's network (pkey 0x0065) with H1 a member. Each produces a drift
// for real on the simulated fabric and waits for what the audit does about
// it. SQLite is enough: the audit does not depend on the engine.
const auditNet = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"

// auditedManager starts the manager, records the network and H1's port, and
// waits for a clean audit.
func auditedManager(t *testing.T) (m *manager, h1, h2, h3 fabric.GUID) {
	m = launchManager(t, storetest.NewDatabase(t, "sqlite"), fabricsim.Options{Hosts: 3},
		settings{OpenSM: []string{"audit_interval = 0.2"}})
	m.confirmSwitches()
	h1, h2, h3 = m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID, m.fabric.Host("H3").PortGUID
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h1", auditNet, vendorClientID(h1))), nil)
	m.waitCleanAudit(0)
	return m, h1, h2, h3
}

// auditLines are the manager's log lines of audits: "audit finished" and
// each finding's, in order.
func (m *manager) auditLines() []string {
	var out []string
	for _, l := range strings.Split(m.log(), "\n") {
		if strings.Contains(l, `"msg":"audit`) {
			out = append(out, l)
		}
	}
	return out
}

// cleanAudits counts the audits that found nothing.
func (m *manager) cleanAudits() int {
	n := 0
	for _, l := range m.auditLines() {
		if strings.Contains(l, `"msg":"audit finished"`) && strings.Contains(l, `"findings":0,`) {
			n++
		}
	}
	return n
}

// waitCleanAudit waits for more than after audits to have found nothing.
func (m *manager) waitCleanAudit(after int) {
	m.t.Helper()
	waitUntil(m.t, "a clean audit", func() (bool, error) {
		n := m.cleanAudits()
		return n > after, fmt.Errorf("%d clean audits, %d before", n, after)
	})
}

// waitAuditLine waits for an audit log line at level holding every part.
func (m *manager) waitAuditLine(level string, parts ...string) {
	m.t.Helper()
	waitFor(m.t, "audit line "+strings.Join(parts, " ... "), func() bool {
		for _, l := range m.auditLines() {
			all := strings.Contains(l, `"level":"`+level+`"`)
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				return true
			}
		}
		return false
	})
}

// setPKeys writes keys into block 0 of port's table behind OpenSM's back.
func (m *manager) setPKeys(port fabric.GUID, keys []uint16) {
	m.t.Helper()
	if _, err := m.fabric.SetPKeys(m.t.Context(), port, keys); err != nil {
		m.t.Fatal(err)
	}
}

// breachAt gives H2, which is in no tenant's partition, the network's pkey
// on its own table and on the switch port facing it (SMP Sets, as a second
// subnet manager would send), and returns what restores both.
func (m *manager) breachAt(h2 fabric.GUID) (restore func()) {
	m.t.Helper()
	orig, origSwitch := m.pkeys(h2), m.switchPKeys(h2)
	m.setPKeys(h2, append(slices.Clone(orig), 0x8065))
	if _, err := m.fabric.SetSwitchPKeys(m.t.Context(), h2, append(slices.Clone(origSwitch), 0x8065)); err != nil {
		m.t.Fatal(err)
	}
	return func() {
		if _, err := m.fabric.SetSwitchPKeys(m.t.Context(), h2, origSwitch); err != nil {
			m.t.Fatal(err)
		}
		m.setPKeys(h2, orig)
	}
}

// switchPKeys reads the table of the switch port facing host.
func (m *manager) switchPKeys(host fabric.GUID) []uint16 {
	m.t.Helper()
	keys, err := m.fabric.SwitchPKeys(m.t.Context(), host)
	if err != nil {
		m.t.Fatal(err)
	}
	return keys
}

// TestAuditBreachHoldsJobs: SMP Sets that give H2, which is in no tenant's
// partition, the network's pkey on its table and on its switch port are an
// isolation breach: the audit finds it, a job sent meanwhile does not
// complete and says why, --status says so and exits 3; once both tables are
// as they were, an audit finds the fabric clean and the job completes.
func TestAuditBreachHoldsJobs(t *testing.T) {
	m, _, h2, h3 := auditedManager(t)
	restore := m.breachAt(h2)
	m.waitAuditLine("ERROR", "audit: port "+h2.String()+" holds pkey 0x0065", "isolation breach")

	job := m.accept("POST", "/cloudx/Port", portBody("port-h3", auditNet, vendorClientID(h3)))
	m.waitDescription(job, "the fabric audit found port "+h2.String()+" holds pkey 0x0065")
	m.waitStatusAgrees(job)
	out, err := m.tryOperator("--status")
	if err == nil || !strings.Contains(out, "isolation breaches") {
		t.Errorf("--status during the breach: %v\n%s\nwant exit status 3 naming the audit's breaches", err, out)
	}
	out, err = m.tryOperator("--audit")
	t.Logf("--audit during the breach:\n%s", out)
	if err == nil || !strings.Contains(err.Error(), "exit status 6") || !strings.Contains(out, "! foreign_pkey: port "+h2.String()) {
		t.Errorf("--audit during the breach: %v\n%s\nwant exit status 6 and the foreign pkey", err, out)
	}

	var fixed atomic.Bool
	restore()
	fixed.Store(true)
	m.waitCompleted(job, func() {
		if !fixed.Load() {
			t.Fatal("job completed while H2 held the network's pkey")
		}
	})
	if got := m.pkeys(h3); !slices.Contains(got, 0x8065) {
		t.Errorf("H3's table %s after its job completed, want 0x8065", hex(got))
	}
	var s struct{ Audit struct{ Breaches int64 } }
	if err := json.Unmarshal([]byte(m.operator("--status", "--json")), &s); err != nil || s.Audit.Breaches != 0 {
		t.Errorf("--status --json after a clean audit: %+v, %v; want no breach", s, err)
	}
}

// TestAuditCutOffAndLinkBounce: a port whose table lost its network's pkey
// behind OpenSM's back (as an HCA reset does) is found cut off, and the
// state is applied again; upstream OpenSM does not rewrite a table it
// believes right, so the manager then restarts it, and the new OpenSM
// programs the port: the audit finds the fabric clean. A link cut makes the
// port unreachable; once the link is back OpenSM programs the port again and
// an audit finds the fabric clean.
func TestAuditCutOffAndLinkBounce(t *testing.T) {
	m, h1, _, _ := auditedManager(t)
	before := m.cleanAudits()
	m.setPKeys(h1, []uint16{0x7fff})
	m.waitAuditLine("WARN", "audit: port "+h1.String()+" lacks pkey 0x0065", "cut off")
	m.waitAuditLine("WARN", "ports are cut off from their partitions; applying the recorded state again")
	m.waitAuditLine("WARN", "still cut off from their partitions after the state was applied again; restarting OpenSM")
	waitFor(t, "H1 programmed again by the restarted OpenSM", func() bool {
		got, err := m.fabric.PKeys(t.Context(), h1)
		return err == nil && slices.Contains(got, 0x8065)
	})
	m.waitCleanAudit(before)

	if err := m.fabric.Unlink(t.Context(), "H1"); err != nil {
		t.Fatal(err)
	}
	m.waitAuditLine("WARN", "audit: port "+h1.String()+": not in OpenSM's subnet dump")
	before = m.cleanAudits()
	if err := m.fabric.Relink(t.Context(), "H1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "H1 programmed again", func() bool {
		got, err := m.fabric.PKeys(t.Context(), h1)
		return err == nil && slices.Contains(got, 0x8065)
	})
	m.waitCleanAudit(before)
}

// TestAuditErrorInjection: the simulator drops every P_KeyTable MAD to H1, a
// member: the audit reports H1 as unreadable within an interval, never as
// holding or lacking anything, and --audit exits 7. Then the drops hit H2
// while a job adds it to the network: OpenSM's Set fails and the apply is
// retried; no audit judges the half-applied fabric meanwhile (it would find
// the ports of the change wrong). The job waits for H2's table (verify =
// tables: OpenSM's log names the MAD, not the port, and each job is judged
// by its own ports' read); once the drops end, the retried apply gives H2
// the pkey, the job completes, and an audit finds the fabric clean.
func TestAuditErrorInjection(t *testing.T) {
	m, h1, h2, _ := auditedManager(t)
	if _, err := m.fabric.Sim(t.Context(), `Error "H1"[1] 100 22`); err != nil {
		t.Fatal(err)
	}
	m.waitAuditLine("WARN", "audit: port "+h1.String()+": could not be read")
	if out, err := m.tryOperator("--audit"); err == nil || !strings.Contains(err.Error(), "exit status 7") ||
		!strings.Contains(out, "unreachable: port "+h1.String()) {
		t.Errorf("--audit while H1 cannot be read: %v\n%s\nwant exit status 7 and H1 unreachable", err, out)
	}
	before := m.cleanAudits()
	if _, err := m.fabric.Sim(t.Context(), `Error "H1"[1] 0`); err != nil {
		t.Fatal(err)
	}
	m.waitCleanAudit(before)

	if _, err := m.fabric.Sim(t.Context(), `Error "H2"[1] 100 22`); err != nil {
		t.Fatal(err)
	}
	job := m.accept("POST", "/cloudx/Port", portBody("port-h2", auditNet, vendorClientID(h2)))
	waitFor(t, "OpenSM's Set to H2 to fail", func() bool {
		return strings.Contains(m.log(), "the sweep ended with errors; judging each job by its ports' P_Key tables")
	})
	if st := m.job(job); st.Status != "Running" {
		t.Errorf("the job while every P_KeyTable MAD to H2 is dropped: %+v; want Running", st)
	}
	judged := len(m.auditLines())
	before = m.cleanAudits()
	if _, err := m.fabric.Sim(t.Context(), `Error "H2"[1] 0`); err != nil {
		t.Fatal(err)
	}
	// The state is applied again meanwhile; the job completes once H2's
	// table, read back, shows the pkey.
	m.waitCompleted(job, func() {
		if got, err := m.fabric.PKeys(t.Context(), h2); err != nil || !slices.Contains(got, 0x8065) {
			t.Fatalf("the job read Completed while H2's table is %s (%v), without 0x8065", hex(got), err)
		}
	})
	m.waitCleanAudit(before)
	for _, l := range m.auditLines()[:judged] {
		if strings.Contains(l, h2.String()) {
			t.Errorf("an audit judged H2 while the apply that adds it was failing: %s", l)
		}
	}
}

// TestAuditAndDriftRepairAgree: a partitions file edited by hand to put H2
// in the network, and swept by OpenSM, is a breach the audit finds (H2
// holds the pkey, the state says it must not), and the drift repair writes
// the recorded file back; the audit then finds the fabric clean, as the
// repair's own check does.
func TestAuditAndDriftRepairAgree(t *testing.T) {
	m, h1, h2, _ := auditedManager(t)
	file := filepath.Join(m.dir, "opensm", "partitions.conf")
	edited := fmt.Sprintf("Default=0x7fff, ipoib : ALL=limited, SELF=full ;\nnet=0x0065, ipoib : %s=full, %s=full ;\n", h1, h2)
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(m.openSMPID(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m.waitAuditLine("ERROR", "audit: port "+h2.String()+" holds pkey 0x0065", "isolation breach")
	m.wantLogLine(`partitions file drifted`, `the file is not what was last applied`)
	before := m.cleanAudits()
	m.waitCleanAudit(before)
	if got := m.pkeys(h2); slices.Contains(got, 0x8065) || slices.Contains(got, 0x0065) {
		t.Errorf("H2's table after the repair and a clean audit: %s, with 0x0065", hex(got))
	}
}

// TestAuditBreachSurvivesRestart: a manager restarted during a breach starts
// its term from the last recorded audit, so the new term's first apply, which
// runs before its first audit, does not complete the job the breach holds.
func TestAuditBreachSurvivesRestart(t *testing.T) {
	m, _, h2, h3 := auditedManager(t)
	restore := m.breachAt(h2)
	m.waitAuditLine("ERROR", "audit: port "+h2.String()+" holds pkey 0x0065", "isolation breach")
	job := m.accept("POST", "/cloudx/Port", portBody("port-h3", auditNet, vendorClientID(h3)))
	m.waitDescription(job, "the fabric audit found")

	m.stop()
	m.start()
	waitFor(t, "the new term's first apply", func() bool {
		for _, l := range strings.Split(m.log(), "\n") {
			if strings.Contains(l, `"msg":"partitions applied"`) && strings.Contains(l, `"term":2,`) {
				return true
			}
		}
		return false
	})
	if st := m.job(job); st.Status == "Completed" {
		t.Fatalf("the restarted manager's first apply completed the job the breach holds: %+v", st)
	}
	m.wantLogLine("the last fabric audit found breaches; jobs wait for an audit that finds none")
	var fixed atomic.Bool
	restore()
	fixed.Store(true)
	m.waitCompleted(job, func() {
		if !fixed.Load() {
			t.Fatal("job completed while H2 held the network's pkey")
		}
	})
}

// TestLyingHostHoldsOnlyItsJobs: an SMP Set gives H2's own table a pkey no
// partition has, in the block OpenSM does not write while H2 holds few
// pkeys, while the switch port facing H2 keeps only H2's recorded pkeys: the
// switch drops what H2's table claims, so no fabric gate closes. A job of H3
// completes; a job of a port on H2 waits, naming H2's port as held, and
// --status names it and exits non-zero; once H2's table is right again, an
// audit releases the hold and H2's job completes.
func TestLyingHostHoldsOnlyItsJobs(t *testing.T) {
	m, _, h2, h3 := auditedManager(t)
	if _, err := m.fabric.SetPKeyBlock(t.Context(), h2, 1, []uint16{0x8123}); err != nil {
		t.Fatal(err)
	}
	m.waitAuditLine("ERROR", "a host's own P_Key table lies", h2.String())

	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h3", auditNet, vendorClientID(h3))), nil)
	job := m.accept("POST", "/cloudx/Port", portBody("port-h2", auditNet, vendorClientID(h2)))
	m.waitDescription(job, "port "+h2.String()+" is held: ")
	code, out := m.statusExit()
	if code == 0 || !strings.Contains(out, "host port "+h2.String()+" is held (its jobs only)") {
		t.Errorf("--status with H2's table lying: exit %d, want non-zero naming H2's port:\n%s", code, out)
	}
	if strings.Contains(out, "isolation breaches") {
		t.Errorf("--status counts H2's own table as a fabric breach:\n%s", out)
	}

	var fixed atomic.Bool
	if _, err := m.fabric.SetPKeyBlock(t.Context(), h2, 1, nil); err != nil {
		t.Fatal(err)
	}
	fixed.Store(true)
	m.waitCompleted(job, func() {
		if !fixed.Load() {
			t.Fatal("H2's job completed while its table held a pkey no partition has")
		}
	})
}
