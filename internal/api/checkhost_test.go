package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestCheckHost: with [api] check_host, networking-mlnx's bare-metal port
// naming a confirmed host's GUID is answered 400 while the host is confirmed
// under another name than the port's binding:host_id (Ironic binds a
// bare-metal port to its node's UUID), naming the GUID and the port's host
// but not the confirmed host, and records nothing; confirmed under the node's
// UUID, in another case, the same port is accepted.
func TestCheckHost(t *testing.T) {
	const bound = "e2c47a1b-5f6d-4c8e-a9b0-3d1f2e4c6a78" // port_create_baremetal.json's binding:host_id
	f := newRulesFixture(t, "sqlite", store.Rules{CheckHost: true})
	if resp, body := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json")); resp.StatusCode != 202 {
		t.Fatalf("network: %d %s", resp.StatusCode, body)
	}
	port := testdata(t, "port_create_baremetal.json") // GUID 248a070300b1c2d4
	for _, c := range []struct {
		confirmed  string
		wantStatus int
		want       []string
		hidden     []string
	}{
		{"node-c", http.StatusBadRequest, []string{"GUID 0x248a070300b1c2d4 is the port of a confirmed host other than " +
			"the port's binding:host_id \\\"" + bound + "\\\"", "[api] check_host"}, []string{"node-c"}},
		{strings.ToUpper(bound), http.StatusAccepted, nil, nil},
	} {
		if err := f.st.ConfirmHosts(t.Context(), []store.ConfirmedHost{
			{GUID: 0x248a070300b1c2d4, Name: c.confirmed, Description: c.confirmed + " mlx5_0"}}); err != nil {
			t.Fatal(err)
		}
		before := f.revision()
		resp, body := f.do("POST", "/ufmRestV3/cloudx/Port", port)
		if resp.StatusCode != c.wantStatus {
			t.Errorf("confirmed as %s: answer %d %s, want %d", c.confirmed, resp.StatusCode, body, c.wantStatus)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("confirmed as %s: answer %s does not say %s", c.confirmed, body, w)
			}
		}
		for _, h := range c.hidden {
			if strings.Contains(body, h) {
				t.Errorf("confirmed as %s: answer %s names the confirmed host %q", c.confirmed, body, h)
			}
		}
		if after := f.revision(); c.wantStatus != http.StatusAccepted && after != before {
			t.Errorf("confirmed as %s: the refused port took revision %d (was %d)", c.confirmed, after, before)
		}
	}
}
