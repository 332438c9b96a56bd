package api

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// hostsFixture serves the pkeys API on a SQLite store, its live subnet dump
// a copy of testdata/hosts/<dump> that swap replaces (as OpenSM's next sweep
// would), and its confirmed hosts those of testdata/hosts/opensm-subnet.lst
// (node01 to node04; node,5's description names no host), once confirm runs.
type hostsFixture struct {
	*pkeysFixture
	dump string
}

func newHostsFixture(t *testing.T) *hostsFixture {
	dump := filepath.Join(t.TempDir(), topology.FileName)
	h := &hostsFixture{pkeysFixture: newUFMClientsFixture(t, dump), dump: dump}
	h.swap("opensm-subnet.lst")
	return h
}

// swap makes testdata/hosts/name the live dump.
func (h *hostsFixture) swap(name string) {
	h.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "hosts", name))
	if err != nil {
		h.t.Fatal(err)
	}
	tmp := h.dump + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, h.dump); err != nil {
		h.t.Fatal(err)
	}
}

// confirm records the hosts of the live dump, as --confirm-hosts does.
func (h *hostsFixture) confirm() {
	h.t.Helper()
	top, err := topology.Load(h.dump)
	if err != nil {
		h.t.Fatal(err)
	}
	var hosts []store.ConfirmedHost
	for _, p := range top.HostPortNames() {
		if store.CheckHostName(p.Name) == nil {
			hosts = append(hosts, store.ConfirmedHost{GUID: p.GUID, Name: p.Name, Description: p.Description})
		}
	}
	if err := h.st.ConfirmHosts(h.t.Context(), hosts); err != nil {
		h.t.Fatal(err)
	}
}

const (
	node01 = "0002c90300000101"
	node02 = "0002c90300000201"
	node04 = "0002c90300000401"
)

// TestHostsAPI sends Slurm's prolog and epilog for a hostlist, and what
// either may meet: a host not confirmed, a hostlist that does not parse,
// strings for booleans, no host confirmed yet.
func TestHostsAPI(t *testing.T) {
	h := newHostsFixture(t)
	h.run(t, []step{
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400, says: "no host of this fabric is confirmed",
			body: `{"pkey":"0x1005","hosts_names":"node01"}`},
	})
	h.confirm()
	h.run(t, []step{
		// The prolog: Slurm's node list, ip_over_ib and index0 as its
		// configuration writes them.
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 200, says: `"applied":true`,
			body: `{"hosts_names":"node[01-02]","pkey":"0x1005","ip_over_ib":"true","index0":"False"}`},
		{method: "GET", path: "/ufmRest/resources/pkeys/0x1005?guids_data=true", status: 200,
			answer: `{"pkey":"0x1005","partition":"k8s-1005","ip_over_ib":true,"guids":[{"guid":"` + node01 +
				`","membership":"full","index0":false},{"guid":"` + node02 + `","membership":"full","index0":false}]}`},
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 200, says: `"applied":true`,
			body: `{"hosts_names":"node04","pkey":"0x1006","membership":"limited","ip_over_ib":false,"index0":true}`},
		{method: "GET", path: "/ufmRest/resources/pkeys/0x1006?guids_data=true", status: 200,
			answer: `{"pkey":"0x1006","partition":"k8s-1006","ip_over_ib":false,"guids":[{"guid":"` + node04 +
				`","membership":"limited","index0":true}]}`},
		// Refusals name what they refuse, and change nothing.
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400, says: "host node05 is not confirmed",
			body: `{"hosts_names":"node[03,05]","pkey":"0x1005"}`},
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400, says: "a '[' is not closed",
			body: `{"hosts_names":"node[01-","pkey":"0x1005"}`},
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400, says: `"maybe": want true or false`,
			body: `{"hosts_names":"node03","pkey":"0x1005","index0":"maybe"}`},
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400, says: `"hosts_names" is missing`,
			body: `{"pkey":"0x1005"}`},
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400, says: "outside",
			body: `{"hosts_names":"node03","pkey":"0x2005"}`},
		{method: "GET", path: "/ufmRest/resources/pkeys/0x1005?guids_data=true", status: 200, says: `"guid":"` + node02 + `"`},
		// The epilog: the same node list in the path.
		{method: "DELETE", path: "/ufmRest/resources/pkeys/0x1005/hosts/node[01-02]", status: 200, says: `"applied":true`},
		{method: "GET", path: "/ufmRest/resources/pkeys/0x1005?guids_data=true", status: 200,
			answer: `{"pkey":"0x1005","partition":"k8s-1005","ip_over_ib":true,"guids":[]}`},
		{method: "DELETE", path: "/ufmRest/resources/pkeys/0x1006/hosts/node04,node09", status: 400, says: "host node09 is not confirmed"},
		{method: "GET", path: "/ufmRest/resources/pkeys/0x1006?guids_data=true", status: 200, says: `"guid":"` + node04 + `"`},
	})
}

// TestHostsAPIRenamedHost: node04's host renamed itself node02 after the
// confirmation. A request naming node02 (whose name it claims) or node04
// (whose description no longer matches) is refused, naming the port; one
// naming neither is served; taking node02's confirmed port out of a pkey is
// not refused.
func TestHostsAPIRenamedHost(t *testing.T) {
	h := newHostsFixture(t)
	h.confirm()
	h.run(t, []step{{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 200, says: `"applied":true`,
		body: `{"hosts_names":"node02","pkey":"0x1007"}`}})
	h.swap("renamed-subnet.lst")
	h.run(t, []step{
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400,
			says: `host node02: port 0x0002c90300000401, not confirmed as node02's, describes itself as "node02 mlx5_0"`,
			body: `{"hosts_names":"node[01-02]","pkey":"0x1005"}`},
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400,
			says: `host node04: its port 0x0002c90300000401 now describes itself as "node02 mlx5_0" (confirmed as "node04 mlx5_0")`,
			body: `{"hosts_names":"node04","pkey":"0x1005"}`},
		{method: "GET", path: "/ufmRest/resources/pkeys/0x1005?guids_data=true", status: 200, answer: `{}`},
		{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 200, says: `"applied":true`,
			body: `{"hosts_names":"node01,node03","pkey":"0x1005"}`},
		{method: "DELETE", path: "/ufmRest/resources/pkeys/0x1007/hosts/node02", status: 200, says: `"applied":true`},
		{method: "GET", path: "/ufmRest/resources/pkeys/0x1007?guids_data=true", status: 200,
			answer: `{"pkey":"0x1007","partition":"k8s-1007","ip_over_ib":true,"guids":[]}`},
	})
	// Once an operator confirms the sweep as it is, node02 is H2's and H4's
	// ports: the printed list is where the operator sees it.
	h.confirm()
	h.run(t, []step{{method: "POST", path: "/ufmRest/resources/pkeys/hosts", status: 400, says: "host node04 is not confirmed",
		body: `{"hosts_names":"node04","pkey":"0x1005"}`}})
}

// TestHostsAPIWithoutASweep: a request that must check the hosts against
// OpenSM's last sweep is 503 while there is none to read.
func TestHostsAPIWithoutASweep(t *testing.T) {
	h := newHostsFixture(t)
	h.confirm()
	if err := os.Remove(h.dump); err != nil {
		t.Fatal(err)
	}
	resp, body := h.ufm("POST", "/ufmRest/resources/pkeys/hosts", `{"hosts_names":"node01","pkey":"0x1005"}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(errorOf(body), "cannot be checked") {
		t.Errorf("POST hosts without a dump: %d %s; want 503 saying the hosts cannot be checked", resp.StatusCode, body)
	}
}
