package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// A pkey error fails the changes to the pkey it names, not those to the
// other pkeys of its host, on the real OpenSM: the template puts every host
// in 62 partitions, which leaves each table (64 entries on ibsim, the default
// partition's included) one entry free. Once Kubernetes pkey 0x1007 takes
// H1's last entry, every sweep logs ERR 0512 for H1 and 0x1005, which does
// not fit: the change to 0x1005 fails, and a later change to 0x1007, which H1
// is in as well, completes in a sweep that logs H1's error again, once H3's
// table, read back, shows it.
func TestPKeyErrorFailsOnlyTheChangesOfItsPKey(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	m := launchManager(t, db, fabricsim.Options{Hosts: 3}, settings{
		OpenSM: []string{
			"switch_pkey_capacity = 1024", // the request-time limit is not what this tests
			"partitions_template = " + staticTemplate(t, 62,
				"{% for partition in kubernetes %}",
				"{{ partition.name }}={{ partition.pkey }}{{ partition.flags }} :{{ partition.members_text }} ;",
				"{% endfor %}"),
		},
		UFMPKeys: []string{"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff",
			"apply_timeout = 60"},
	})
	m.confirmSwitches()
	k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
	h1, h3 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H3").PortGUID
	add := func(pkey string, guid fmt.Stringer, want int) string {
		return k.must("POST", "/ufmRest/resources/pkeys", fmt.Sprintf(
			`{"pkey": %q, "guids": [%q], "membership": "full", "index0": false, "ip_over_ib": false}`,
			pkey, strings.TrimPrefix(guid.String(), "0x")), want)
	}

	// H1's last entry.
	k.applied(add("0x1007", h1, http.StatusOK))
	if got := m.pkeys(h1); !slices.Contains(got, 0x9007) {
		t.Fatalf("0x1007 applied, but H1's table is %s", hex(got))
	}
	// No room for 0x1005 on H1: OpenSM says so at every sweep from now on.
	h1Node := fmt.Sprintf("node 0x%016x port 1", uint64(h1)-1)
	answer := add("0x1005", h1, http.StatusInternalServerError)
	if !strings.Contains(answer, "ERR 0512") || !strings.Contains(answer, h1Node) {
		t.Fatalf("0x1005 on H1's full table: %s; want it failed with ERR 0512 for H1", answer)
	}
	if !strings.Contains(answer, fmt.Sprintf("host port %s, pkey 0x1005", h1)) {
		t.Errorf("0x1005's failure %s does not name H1's port and the pkey", answer)
	}
	// A change to a pkey H1 is in, in a sweep that logs H1's error for 0x1005.
	from := len(m.log())
	k.applied(add("0x1007", h3, http.StatusOK))
	if got := m.pkeys(h3); !slices.Contains(got, 0x9007) {
		t.Errorf("H3's change to 0x1007 completed, but its table is %s", hex(got))
	}
	if log := m.log()[from:]; !strings.Contains(log, "ERR 0512") || !strings.Contains(log, h1Node) {
		t.Errorf("the sweep that applied H3's change did not log H1's ERR 0512 (the test proves nothing):\n%s", log)
	}
	// H3's job, beside H1's error, was judged by its table's read, not
	// completed on the log.
	if log := m.log()[from:]; !strings.Contains(log, "the others proven as after a clean sweep") {
		t.Errorf("the sweep with H1's error completed H3's job without the read-back proof:\n%s", log)
	}
}

// A network's VLAN move completes only once every member has the new pkey:
// the template fills every host's table (64 entries on ibsim) with the
// default partition and 63 others; H2's port in the network fails, and stays
// recorded, and the network's move to another VLAN, which H2 cannot get
// either, fails, saying which port and pkey, instead of completing.
func TestVLANMoveFailsWhenAMemberLacksTheNewPKey(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	m := launchManager(t, db, fabricsim.Options{Hosts: 2}, settings{OpenSM: []string{
		"switch_pkey_capacity = 1024", // the request-time limit is not what this tests
		"partitions_template = " + staticTemplate(t, 63),
	}})
	m.confirmSwitches()
	h2 := m.fabric.Host("H2").PortGUID
	if j := m.waitFinal(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))); j.Status != "Completed" {
		t.Fatalf("the network's job: %+v; want Completed", j)
	}
	if j := m.waitFinal(m.accept("POST", "/cloudx/Port", portBody("port-h2", netID, vendorClientID(h2)))); j.Status != "Failed" {
		t.Fatalf("H2's port on a full table: %+v; want Failed", j)
	}
	j := m.waitFinal(m.accept("PUT", "/cloudx/Network/"+netID, vlanNetworkBody(netID, 102)))
	h2Node := fmt.Sprintf("node 0x%016x port 1", uint64(h2)-1)
	if j.Status != "Failed" || !strings.Contains(j.Summary, "ERR 0512") || !strings.Contains(j.Summary, h2Node) ||
		!strings.Contains(j.Summary, "pkey 0x0066") {
		t.Fatalf("the VLAN move: %+v; want Failed with H2's ERR 0512 for 0x0066", j)
	}
	if got := m.pkeys(h2); slices.Contains(got, 0x8066) {
		t.Errorf("the move failed, but H2's table holds 0x8066: %s", hex(got))
	}
}
