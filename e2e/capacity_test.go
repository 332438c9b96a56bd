package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// staticTemplate writes a partitions template: the built-in statements, plus
// count static partitions every host port is a limited member of (pkeys 0x0300
// onwards), plus the extra lines.
func staticTemplate(t *testing.T, count int, extra ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("{{ default_partition }}\n")
	for i := range count {
		fmt.Fprintf(&b, "static-%d=0x%04x : ALL=limited ;\n", i, 0x0300+i)
	}
	for _, line := range extra {
		b.WriteString(line + "\n")
	}
	b.WriteString("{% for n in networks %}\n{{ n.name }}={{ n.pkey }}, ipoib :{{ n.members_text }} ;\n{% endfor %}\n")
	b.WriteString("{{ flat.name }}={{ flat.pkey }}, ipoib :{{ flat.members_text }} ;\n")
	path := filepath.Join(t.TempDir(), "partitions.conf.j2")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A host port whose pkeys would fill its switch port's table is refused with
// 400 before OpenSM is asked, naming the host port and the switch port, and
// nothing is recorded. (Ports below the capacity are what every other test
// sends: the default capacity is 32.)
func TestSwitchPKeyCapacity(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	// Capacity 8: the default partition, 6 static partitions of every host and
	// the network's make 8.
	m := launchManager(t, db, fabricsim.Options{Hosts: 1}, settings{OpenSM: []string{
		"switch_pkey_capacity = 8",
		"partitions_template = " + staticTemplate(t, 6),
	}})
	m.confirmSwitches()
	h1 := m.fabric.Host("H1").PortGUID
	const net = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	revision, jobs := dbCounts(t, db)

	status, body := m.send("POST", "/cloudx/Port", portBody("port-h1", net, vendorClientID(h1)))
	if status != http.StatusBadRequest {
		t.Fatalf("H1's port: %d %s, want 400", status, body)
	}
	for _, want := range []string{"port-h1", "host port " + h1.String() + " would carry 8 pkeys",
		"switch port 0x", "switch_pkey_capacity"} {
		if !strings.Contains(body, want) {
			t.Errorf("400 body %s does not say %q", body, want)
		}
	}
	// The refused port recorded nothing: no revision, no job.
	if r, j := dbCounts(t, db); r != revision || j != jobs {
		t.Errorf("the refused port left revision %d and %d jobs, want %d and %d", r, j, revision, jobs)
	}
	if got := m.pkeys(h1); slices.Contains(got, 0x8065) || slices.Contains(got, 0x0065) {
		t.Errorf("H1 holds the refused partition: %s", hex(got))
	}
}

// A host port's own pkey table overflowing (ERR 0512: ibsim's tables hold 64
// entries, the template gives every host 70 static partitions) fails the job
// of the change that involves that port, saying why, instead of completing it.
// The network's job involves no port and completes (failures stay local).
func TestPKeyTableFullFailsJobs(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	m := launchManager(t, db, fabricsim.Options{Hosts: 1}, settings{OpenSM: []string{
		"switch_pkey_capacity = 1024", // the request-time limit is not what this tests
		"partitions_template = " + staticTemplate(t, 70),
	}})
	m.confirmSwitches()
	if j := m.waitFinal(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))); j.Status != "Completed" {
		t.Fatalf("the network's job: %+v; want Completed", j)
	}
	h1 := m.fabric.Host("H1")
	job := m.accept("POST", "/cloudx/Port", portBody("port-h1", netID, vendorClientID(h1.PortGUID)))
	j := m.waitFinal(job)
	node := fmt.Sprintf("node 0x%016x port 1", uint64(h1.PortGUID)-1)
	if j.Status != "Failed" || !strings.Contains(j.Summary, "ERR 0512") || !strings.Contains(j.Summary, node) {
		t.Fatalf("job %s: %+v; want Failed with OpenSM's ERR 0512 for %s in the summary", job, j, node)
	}
}

// waitFinal polls a job until it is Completed or Failed.
func (m *manager) waitFinal(job string) jobStatus {
	m.t.Helper()
	var j jobStatus
	waitUntil(m.t, "job "+job+" to finish", func() (bool, error) {
		j = m.job(job)
		return j.Status == "Completed" || j.Status == "Failed", fmt.Errorf("%+v", j)
	})
	return j
}

// Failures stay local: a host whose pkey table overflows (ERR 0512 at every
// sweep: the template puts H1 in 70 static partitions, ibsim's tables hold
// 64) fails no job of the changes that do not involve it. The network's job
// and H2's port, applied by sweeps that log H1's errors, complete, and H2's
// table holds the network's pkey; afm_port_sets_failed names H1's port alone.
func TestPKeyTableFullStaysLocal(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	h1 := fabricsim.HostGUID(1)
	var statics []string
	for i := range 70 {
		statics = append(statics, fmt.Sprintf("h1-%d=0x%04x : %s=limited ;", i, 0x0300+i, h1))
	}
	m := launchManager(t, db, fabricsim.Options{Hosts: 2}, settings{OpenSM: []string{
		"switch_pkey_capacity = 1024", // the request-time limit is not what this tests
		"partitions_template = " + staticTemplate(t, 0, statics...),
	}, API: []string{"metrics_token = " + metricsToken}})
	m.confirmSwitches()
	if got := m.fabric.Host("H1").PortGUID; got != h1 {
		t.Fatalf("H1 is %s, not %s", got, h1)
	}
	if j := m.waitFinal(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))); j.Status != "Completed" {
		t.Fatalf("the network's job: %+v; want Completed (H1's full table is not its change)", j)
	}
	h2 := m.fabric.Host("H2").PortGUID
	j := m.waitFinal(m.accept("POST", "/cloudx/Port", portBody("port-h2", netID, vendorClientID(h2))))
	if j.Status != "Completed" {
		t.Fatalf("H2's port: %+v; want Completed", j)
	}
	if got := m.pkeys(h2); !slices.Contains(got, 0x8065) {
		t.Errorf("H2's job completed, but its pkey table is %s, without 0x8065", hex(got))
	}
	if log := m.log(); !strings.Contains(log, "ERR 0512") || !strings.Contains(log, "jobs_failed") {
		t.Errorf("the manager did not log H1's ERR 0512 lines and the jobs they failed:\n%s", log)
	}
	// The sweep that completed H2's job named H1's port, and no other.
	if got := m.setFailures(); !slices.Equal(got, []string{h1.String()}) {
		t.Errorf("afm_port_sets_failed names %v; want H1's port %s alone", got, h1)
	}
}

// A GUID whose host's link is down (ib-kubernetes adds a pod's GUID before
// its port is up) is held to its switch port's capacity all the same: with
// switch_pkey_capacity 4 it joins two Kubernetes pkeys (the default partition
// and two make 3) and the third is refused, saying how many pkeys. When the
// link comes back OpenSM gives the port what the file holds: its two pkeys,
// the switch port's table never full, no gate closed, and every job after it
// completes.
func TestKubernetesGUIDOffTheFabricCountsAgainstItsSwitchPort(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	// H1 is off the fabric on purpose: with the read-back proof (the
	// default) a Kubernetes GUID that OpenSM's subnet dump does not list is
	// proven by the log, as an SR-IOV VF's would be.
	m := launchManager(t, db, fabricsim.Options{Hosts: 2}, settings{
		OpenSM: []string{"switch_pkey_capacity = 4"},
		UFMPKeys: []string{"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff",
			"apply_timeout = 60"},
	})
	m.confirmSwitches()
	k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
	h1 := m.fabric.Host("H1").PortGUID
	if err := m.fabric.Unlink(t.Context(), "H1"); err != nil {
		t.Fatal(err)
	}
	add := func(pkey string) (int, string) {
		resp, body := k.do("POST", "/ufmRest/resources/pkeys",
			fmt.Sprintf(`{"pkey": %q, "membership": "full", "guids": [%q]}`, pkey, ufm(h1)))
		return resp.StatusCode, body
	}
	for _, pkey := range []string{"0x1001", "0x1002"} {
		status, body := add(pkey)
		if status != http.StatusOK {
			t.Fatalf("H1 (link down) into %s: %d %s", pkey, status, body)
		}
		k.applied(body) // on the log: H1 is in no subnet dump
	}
	status, body := add("0x1003")
	if status != http.StatusBadRequest || !strings.Contains(body, "would carry 4 pkeys") ||
		!strings.Contains(body, "switch_pkey_capacity") {
		t.Fatalf("H1 (link down) into a third pkey: %d %s, want 400 saying it would carry 4 pkeys", status, body)
	}

	if err := m.fabric.Relink(t.Context(), "H1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "H1's table to hold its two pkeys", func() bool {
		got, err := m.fabric.PKeys(t.Context(), h1)
		return err == nil && slices.Contains(got, 0x9001) && slices.Contains(got, 0x9002)
	})
	if got := m.pkeys(h1); slices.Contains(got, 0x9003) || slices.Contains(got, 0x1003) {
		t.Errorf("H1 holds the refused pkey: %s", hex(got))
	}
	// Nothing closed the gates: a change after the link came back completes.
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	k.applied(k.must("POST", "/ufmRest/resources/pkeys",
		fmt.Sprintf(`{"pkey": "0x1004", "membership": "full", "guids": [%q]}`, ufm(m.fabric.Host("H2").PortGUID)), http.StatusOK))
}
