package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// UFM's other clients, each in its own order, on a real OpenSM with the
// simulated hosts' pkey tables read back after every change:
// TestUFMPKeysTool sends the UFM SDK pkeys tool's calls, TestUFMNICoReads
// NICo's reads around a bind and an unbind.

// launchUFMManager is a manager with the pkeys API on, its switches
// confirmed, and a client of that API.
func launchUFMManager(t *testing.T) (*manager, *ufmClient) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 5}, settings{UFMPKeys: []string{
		"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff", "apply_timeout = 60",
	}})
	m.confirmSwitches()
	return m, &ufmClient{m: m, user: ufmUser, password: ufmPassword}
}

// holds fails the test unless port's pkey table holds pkey as membership
// says ("full": with the membership bit, "limited": without it, "": not at
// all).
func (m *manager) holds(name string, port fabric.GUID, pkey uint16, membership string) {
	m.t.Helper()
	got := m.pkeys(port)
	full, limited := slices.Contains(got, pkey|0x8000), slices.Contains(got, pkey)
	if ok := map[string]bool{"full": full && !limited, "limited": limited && !full, "": !full && !limited}[membership]; !ok {
		m.t.Errorf("%s's pkey table is %s; want 0x%04x %q", name, hex(got), pkey, membership)
	}
}

// TestUFMPKeysTool: the UFM SDK's pkeys tool sets a pkey's members with PUT
// (one membership per GUID), reads them back with guids_data, sets them again
// (a member not listed leaves), deletes GUIDs by path and then the pkey.
func TestUFMPKeysTool(t *testing.T) {
	m, k := launchUFMManager(t)
	h1, h2, h3 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID, m.fabric.Host("H3").PortGUID

	k.applied(k.must("PUT", "/ufmRest/resources/pkeys", fmt.Sprintf(`{"guids": [%q, %q], "pkey": "0x16a1", "index0": false, `+
		`"ip_over_ib": true, "memberships": ["full", "limited"]}`, ufm(h1), ufm(h2)), http.StatusOK))
	m.holds("H1", h1, 0x16a1, "full")
	m.holds("H2", h2, 0x16a1, "limited")
	m.holds("H3", h3, 0x16a1, "")
	want := map[string][]guidEntry{"0x16a1": sortedEntries(guidEntry{ufm(h1), "full", false}, guidEntry{ufm(h2), "limited", false}),
		"0x7fff": {}}
	if got := k.pkeys("/ufmRest/resources/pkeys?guids_data=true"); !equalPKeys(got, want) {
		t.Errorf("list after the PUT = %+v, want %+v", got, want)
	}

	// PUT again replaces the members: H1 leaves, H3 joins, H2 becomes full.
	k.applied(k.must("PUT", "/ufmRest/resources/pkeys", fmt.Sprintf(`{"guids": [%q, %q], "pkey": "0x16a1", "index0": false, `+
		`"ip_over_ib": true, "membership": "full"}`, ufm(h2), ufm(h3)), http.StatusOK))
	m.holds("H1", h1, 0x16a1, "")
	m.holds("H2", h2, 0x16a1, "full")
	m.holds("H3", h3, 0x16a1, "full")
	one := k.must("GET", "/ufmRest/resources/pkeys/0x16a1?guids_data=true", "", http.StatusOK)
	if strings.Contains(one, ufm(h1)) || !strings.Contains(one, ufm(h2)) || !strings.Contains(one, ufm(h3)) {
		t.Errorf("0x16a1 after the second PUT = %s, want H2 and H3 alone", one)
	}

	k.applied(k.must("DELETE", "/ufmRest/resources/pkeys/0x16a1/guids/"+ufm(h2), "", http.StatusOK))
	m.holds("H2", h2, 0x16a1, "")
	m.holds("H3", h3, 0x16a1, "full")

	k.applied(k.must("DELETE", "/ufmRest/resources/pkeys/0x16a1", "", http.StatusOK))
	m.holds("H3", h3, 0x16a1, "")
	k.must("DELETE", "/ufmRest/resources/pkeys/0x16a1", "", http.StatusNotFound)
	if got := strings.TrimSpace(k.must("GET", "/ufmRest/resources/pkeys/0x16a1?guids_data=true", "", http.StatusOK)); got != "{}" {
		t.Errorf("the deleted pkey reads %s, want {}", got)
	}
	// The default partition is never the API's to change.
	refusal := k.must("DELETE", "/ufmRest/resources/pkeys/0x7fff", "", http.StatusBadRequest)
	if !strings.Contains(refusal, "default partition") {
		t.Errorf("DELETE of 0x7fff: %s", refusal)
	}
	m.holds("H1", h1, 0x7fff, "limited") // as the default partition reads: ALL=limited
}

// sortedEntries are entries in GUID order, as the list gives them.
func sortedEntries(e ...guidEntry) []guidEntry {
	slices.SortFunc(e, func(a, b guidEntry) int { return strings.Compare(a.GUID, b.GUID) })
	return e
}

// ufmPort is the part of a port of UFM's ports resource NICo reads.
type ufmPort struct {
	GUID         string `json:"guid"`
	Name         string `json:"name"`
	LID          int    `json:"lid"`
	SystemName   string `json:"system_name"`
	LogicalState string `json:"logical_state"`
}

// TestUFMNICoReads: NICo's reads around a bind: the fabric's host ports (each
// host's GUID, with the LID the fabric gave it, Active), the list with
// guids_data and qos_conf, the default partition, an unknown pkey, and the
// bound GUID's table after its bind and unbind.
func TestUFMNICoReads(t *testing.T) {
	m, k := launchUFMManager(t)
	var ports []ufmPort
	if err := json.Unmarshal([]byte(k.must("GET", "/ufmRest/resources/ports?sys_type=Computer", "", http.StatusOK)), &ports); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"H1", "H2", "H3", "H4", "H5"} {
		guid := m.fabric.Host(name).PortGUID
		lid, err := m.fabric.LID(guid)
		if err != nil {
			t.Fatal(err)
		}
		want := ufmPort{GUID: ufm(guid), Name: ufm(guid) + "_1", LID: lid, SystemName: name, LogicalState: "Active"}
		if i := slices.IndexFunc(ports, func(p ufmPort) bool { return p.GUID == want.GUID }); i < 0 || ports[i] != want {
			t.Errorf("ports?sys_type=Computer = %+v, want %+v among them", ports, want)
		}
		if got := jsonAnswer[ufmPort](t, k.must("GET", "/ufmRest/resources/ports/"+ufm(guid), "", http.StatusOK)); got != want {
			t.Errorf("ports/%s = %+v, want %+v", ufm(guid), got, want)
		}
	}
	for _, p := range ports {
		if strings.HasPrefix(p.SystemName, "S") && p.SystemName != "SM" {
			t.Errorf("sys_type=Computer lists switch port %+v", p)
		}
	}
	k.must("GET", "/ufmRest/resources/ports/0002c9030000beef", "", http.StatusNotFound)

	h1 := m.fabric.Host("H1").PortGUID
	k.applied(k.must("POST", "/ufmRest/resources/pkeys", fmt.Sprintf(`{"pkey": "0x12fb", "ip_over_ib": true, "membership": "full", `+
		`"index0": true, "guids": [%q]}`, ufm(h1)), http.StatusOK))
	m.holds("H1", h1, 0x12fb, "full")
	want := map[string][]guidEntry{"0x12fb": {{ufm(h1), "full", true}}, "0x7fff": {}}
	if got := k.pkeys("/ufmRest/resources/pkeys?guids_data=true&qos_conf=true"); !equalPKeys(got, want) {
		t.Errorf("list = %+v, want %+v", got, want)
	}
	def := jsonAnswer[map[string]any](t, k.must("GET", "/ufmRest/resources/pkeys/0x7fff?guids_data=true&qos_conf=true", "", http.StatusOK))
	if def["membership"] != "limited" || def["partition"] != "management" || fmt.Sprint(def["guids"]) != "[]" {
		t.Errorf("the default partition reads %v", def)
	}
	if got := strings.TrimSpace(k.must("GET", "/ufmRest/resources/pkeys/0x1abc?guids_data=true&qos_conf=true", "", http.StatusOK)); got != "{}" {
		t.Errorf("an unknown pkey reads %s, want {}", got)
	}
	k.applied(k.must("POST", "/ufmRest/actions/remove_guids_from_pkey", fmt.Sprintf(`{"pkey": "0x12fb", "guids": [%q]}`, ufm(h1)),
		http.StatusOK))
	m.holds("H1", h1, 0x12fb, "")
}

// jsonAnswer decodes an answer.
func jsonAnswer[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return v
}
