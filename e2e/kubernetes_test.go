package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

const (
	ufmUser     = "ib-kubernetes"
	ufmPassword = "e2e-ufm-password-0123456789"
)

// TestKubernetesPKeys: UFM's pkeys API as ib-kubernetes' ufm plugin sends it
// (Basic auth, its JSON shapes), beside networking-mlnx's API on one
// manager, all the way to the real pkey tables of the simulated hosts, on
// every database engine. A change is answered only once its pkeys are in the
// tables.
func TestKubernetesPKeys(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			m := launchManager(t, storetest.NewDatabase(t, engine), fabricsim.Options{Hosts: 5}, settings{UFMPKeys: []string{
				"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff", "apply_timeout = 60",
			}})
			m.confirmSwitches()
			k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
			h1, h2, h3, h4, h5 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID,
				m.fabric.Host("H3").PortGUID, m.fabric.Host("H4").PortGUID, m.fabric.Host("H5").PortGUID
			before := k.validate()

			// H3 is an OpenStack port, in VLAN 101's partition.
			m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
			m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94",
				"3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", vendorClientID(h3))), nil)

			k.addTwoGUIDs(h1, h2, h3, before)
			want := k.checkList(h1, h2)
			k.checkRefusals(want, h1, h2, h3, h4)
			k.sendBesideAPort(h4, h5)
			k.removeAndDelete(h1, h2, h4)
		})
	}
}

// validate is ib-kubernetes' Validate; it returns the Date the manager
// answered with, which ib-kubernetes takes before a change.
func (k *ufmClient) validate() time.Time {
	t := k.m.t
	t.Helper()
	k.must("GET", "/ufmRest/app/ufm_version", "", http.StatusOK)
	head, _ := k.do("HEAD", "/ufmRest/app/ufm_version", "")
	before, err := http.ParseTime(head.Header.Get("Date"))
	if head.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("HEAD ufm_version: %d, Date %q: %v", head.StatusCode, head.Header.Get("Date"), err)
	}
	return before
}

// addTwoGUIDs adds two GUIDs, one full and one limited, as the newer
// plugin's two calls do in one: answered once both tables hold 0x1005; h3,
// no member, does not get it.
func (k *ufmClient) addTwoGUIDs(h1, h2, h3 fabric.GUID, before time.Time) {
	t, m := k.m.t, k.m
	t.Helper()
	k.applied(k.must("POST", "/ufmRest/resources/pkeys", fmt.Sprintf(
		`{"pkey": "0x1005", "guids": [%q, %q], "memberships": ["full", "limited"], "index0": true, "ip_over_ib": true}`,
		ufm(h1), ufm(h2)), http.StatusOK))
	if got := m.pkeys(h1); !slices.Contains(got, 0x9005) {
		t.Fatalf("add answered while H1's table is %s, without 0x9005 (full)", hex(got))
	}
	if got := m.pkeys(h2); !slices.Contains(got, 0x1005) || slices.Contains(got, 0x9005) {
		t.Fatalf("add answered while H2's table is %s, want 0x1005 (limited) and no 0x9005", hex(got))
	}
	if got := m.pkeys(h3); slices.Contains(got, 0x1005) || slices.Contains(got, 0x9005) {
		t.Errorf("H3, no member, holds 0x1005: %s", hex(got))
	}
	var last struct {
		LastUpdated *string `json:"last_updated"`
	}
	json.Unmarshal([]byte(k.must("GET", "/ufmRest/resources/pkeys/last_updated", "", http.StatusOK)), &last)
	if last.LastUpdated == nil {
		t.Fatal("last_updated is null after an applied change")
	}
	if at, err := time.Parse(time.UnixDate, *last.LastUpdated); err != nil || at.Before(before) {
		t.Errorf("last_updated %q is before the Date %v the change was sent after (%v)", *last.LastUpdated, before, err)
	}
}

// checkList checks the list ib-kubernetes rebuilds its GUID pool from, and
// one pkey, after addTwoGUIDs; it returns the list.
func (k *ufmClient) checkList(h1, h2 fabric.GUID) map[string][]guidEntry {
	t := k.m.t
	t.Helper()
	list := k.pkeys("/ufmRest/resources/pkeys/?guids_data=true")
	// The default partition is listed too, without members, as UFM lists it.
	want := map[string][]guidEntry{"0x1005": {{ufm(h1), "full", true}, {ufm(h2), "limited", true}}, "0x7fff": {}}
	slices.SortFunc(want["0x1005"], func(a, b guidEntry) int { return strings.Compare(a.GUID, b.GUID) })
	if !equalPKeys(list, want) {
		t.Errorf("list = %+v, want %+v", list, want)
	}
	one := k.must("GET", "/ufmRest/resources/pkeys/0x1005?guids_data=true", "", http.StatusOK)
	if !strings.Contains(one, `"partition":"k8s-1005"`) || !strings.Contains(one, ufm(h1)) || !strings.Contains(one, ufm(h2)) {
		t.Errorf("GET 0x1005 = %s", one)
	}
	if got := k.must("GET", "/ufmRest/resources/pkeys/0x1006", "", http.StatusOK); strings.TrimSpace(got) != "{}" {
		t.Errorf("GET of an absent pkey = %s, want {}", got)
	}
	return want
}

// checkRefusals: requests refused, saying why, change nothing (want is the
// list before them).
func (k *ufmClient) checkRefusals(want map[string][]guidEntry, h1, h2, h3, h4 fabric.GUID) {
	t, m := k.m.t, k.m
	t.Helper()
	tablesBefore := [][]uint16{m.pkeys(h1), m.pkeys(h2), m.pkeys(h3)}
	refusal := k.must("POST", "/ufmRest/resources/pkeys",
		fmt.Sprintf(`{"pkey": "0x1005", "index0": true, "ip_over_ib": true, "membership": "full", "guids": [%q]}`, ufm(h3)),
		http.StatusBadRequest)
	// Held by another owner, whose network and port the answer does not name.
	if !strings.Contains(refusal, "is held by another owner") || strings.Contains(refusal, "3b9d6a52") {
		t.Errorf("a GUID of an OpenStack network: %s", refusal)
	}
	refusal = k.must("POST", "/ufmRest/resources/pkeys",
		fmt.Sprintf(`{"pkey": "0x0005", "index0": true, "ip_over_ib": true, "membership": "full", "guids": [%q]}`, ufm(h4)),
		http.StatusBadRequest)
	if !strings.Contains(refusal, "outside [ufm_pkeys] pkey_range 0x1000-0x1fff") {
		t.Errorf("a pkey outside the range: %s", refusal)
	}
	// And the reverse: an OpenStack port on a Kubernetes GUID.
	status, refusal := m.send("POST", "/cloudx/Port", portBody("11111111-1d3b-4e5f-9a7c-6b2d0e1f3a94",
		"3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", vendorClientID(h1)))
	if status != http.StatusBadRequest || !strings.Contains(refusal, "is held by another owner") ||
		strings.Contains(refusal, "0x1005") {
		t.Errorf("an OpenStack port on a Kubernetes GUID: %d %s", status, refusal)
	}
	wrong := &ufmClient{m: m, user: ufmUser, password: ufmPassword + "x"}
	wrong.must("POST", "/ufmRest/actions/remove_guids_from_pkey", fmt.Sprintf(`{"pkey": "0x1005", "guids": [%q]}`, ufm(h1)),
		http.StatusUnauthorized)
	if !equalPKeys(k.pkeys("/ufmRest/resources/pkeys/?guids_data=true"), want) {
		t.Errorf("a refused request changed the pkeys")
	}
	if got := [][]uint16{m.pkeys(h1), m.pkeys(h2), m.pkeys(h3)}; !slices.EqualFunc(got, tablesBefore, slices.Equal) {
		t.Errorf("a refused request changed the pkey tables: %v, before %v", got, tablesBefore)
	}
}

// sendBesideAPort sends an OpenStack port (h5) and a Kubernetes pkey (h4)
// together, inside one batch window: both apply.
func (k *ufmClient) sendBesideAPort(h4, h5 fabric.GUID) {
	t, m := k.m.t, k.m
	t.Helper()
	m.waitCompleted(m.accept("POST", "/cloudx/Network", vlanNetworkBody("5c7e9a1b-2d3f-4b5a-8c6d-7e8f9a0b1c2d", 102)), nil)
	var wg sync.WaitGroup
	var portJob string
	wg.Add(1)
	go func() {
		defer wg.Done()
		portJob = m.accept("POST", "/cloudx/Port", portBody("22222222-1d3b-4e5f-9a7c-6b2d0e1f3a94",
			"5c7e9a1b-2d3f-4b5a-8c6d-7e8f9a0b1c2d", vendorClientID(h5)))
	}()
	answer := k.must("POST", "/ufmRest/resources/pkeys",
		fmt.Sprintf(`{"pkey": "0x1006", "index0": false, "ip_over_ib": false, "membership": "full", "guids": [%q]}`, ufm(h4)),
		http.StatusOK)
	wg.Wait()
	k.applied(answer)
	m.waitCompleted(portJob, nil)
	if got := m.pkeys(h4); !slices.Contains(got, 0x9006) {
		t.Errorf("H4's table is %s, without 0x9006", hex(got))
	}
	if got := m.pkeys(h5); !slices.Contains(got, 0x8066) {
		t.Errorf("H5's table is %s, without its network's 0x8066", hex(got))
	}
}

// removeAndDelete removes one GUID of 0x1005 (gone from its table, the
// other stays), then deletes the pkey (gone from h1's table; 0x1006 stays on
// h4).
func (k *ufmClient) removeAndDelete(h1, h2, h4 fabric.GUID) {
	t, m := k.m.t, k.m
	t.Helper()
	k.applied(k.must("POST", "/ufmRest/actions/remove_guids_from_pkey",
		fmt.Sprintf(`{"pkey": "0x1005", "guids": [%q]}`, ufm(h2)), http.StatusOK))
	if got := m.pkeys(h2); slices.Contains(got, 0x1005) || slices.Contains(got, 0x9005) {
		t.Errorf("remove answered while H2's table is %s", hex(got))
	}
	if got := m.pkeys(h1); !slices.Contains(got, 0x9005) {
		t.Errorf("H1 lost 0x9005 with H2's removal: %s", hex(got))
	}

	// Delete the pkey: gone from H1's table; 0x1006 stays on H4.
	k.applied(k.must("DELETE", "/ufmRest/resources/pkeys/0x1005", "", http.StatusOK))
	if got := m.pkeys(h1); slices.Contains(got, 0x9005) || slices.Contains(got, 0x1005) {
		t.Errorf("DELETE answered while H1's table is %s", hex(got))
	}
	if got := m.pkeys(h4); !slices.Contains(got, 0x9006) {
		t.Errorf("H4 lost 0x9006 with 0x1005's deletion: %s", hex(got))
	}
	k.must("DELETE", "/ufmRest/resources/pkeys/0x1005", "", http.StatusNotFound)
	if got := k.pkeys("/ufmRest/resources/pkeys/?guids_data=true"); !equalPKeys(got, map[string][]guidEntry{"0x1006": {{ufm(h4), "full", false}}, "0x7fff": {}}) {
		t.Errorf("list after the deletion = %+v", got)
	}
}

// ufmClient sends requests as ib-kubernetes' http driver does.
type ufmClient struct {
	m              *manager
	user, password string
}

func (k *ufmClient) do(method, path, body string) (*http.Response, string) {
	k.m.t.Helper()
	req, err := http.NewRequest(method, k.m.url+path, strings.NewReader(body))
	if err != nil {
		k.m.t.Fatal(err)
	}
	req.SetBasicAuth(k.user, k.password)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	client := &http.Client{Timeout: 90 * time.Second, Transport: k.m.client.Transport}
	resp, err := client.Do(req)
	if err != nil {
		k.m.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (k *ufmClient) must(method, path, body string, want int) string {
	k.m.t.Helper()
	resp, answer := k.do(method, path, body)
	if resp.StatusCode != want {
		k.m.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, answer, want)
	}
	return answer
}

// applied fails the test unless a change's answer says OpenSM applied it
// (not that apply_timeout ran out).
func (k *ufmClient) applied(answer string) {
	k.m.t.Helper()
	var a struct {
		Applied bool   `json:"applied"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(answer), &a); err != nil || !a.Applied {
		k.m.t.Fatalf("change answered %s, not applied", answer)
	}
}

type guidEntry struct {
	GUID       string `json:"guid"`
	Membership string `json:"membership"`
	Index0     bool   `json:"index0"`
}

// pkeys reads a listing as ib-kubernetes does.
func (k *ufmClient) pkeys(path string) map[string][]guidEntry {
	k.m.t.Helper()
	var list map[string]struct {
		GUIDs []guidEntry `json:"guids"`
	}
	answer := k.must("GET", path, "", http.StatusOK)
	if err := json.Unmarshal([]byte(answer), &list); err != nil {
		k.m.t.Fatalf("GET %s: %v: %s", path, err, answer)
	}
	out := map[string][]guidEntry{}
	for p, v := range list {
		out[p] = v.GUIDs
	}
	return out
}

func equalPKeys(a, b map[string][]guidEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// ufm is a GUID as ib-kubernetes writes it: 16 hex digits, no colons.
func ufm(g fabric.GUID) string { return fmt.Sprintf("%016x", uint64(g)) }

func vlanNetworkBody(id string, vlan int) string {
	return fmt.Sprintf(`{"id": %q, "name": "k8s-neighbour", "network_type": "vlan", "provider:network_type": "vlan",
  "provider:physical_network": "ibnet", "provider:segmentation_id": %d, "segmentation_id": %d}`, id, vlan, vlan)
}
