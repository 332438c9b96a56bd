package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Two managers on two Galera nodes take conflicting changes at the same
// moment: every change writes the revision's row, so one of two concurrent
// transactions loses certification (a deadlock error) and must be sent again
// inside the manager. Each request is answered as the rules say whatever the
// order the cluster chose, never 500: a network created through both is
// accepted by both (an upsert), a GUID claimed for two networks is accepted
// once and refused once, a DELETE of a network through both removes it once
// and finds it gone once, and an unknown port is not found by either.
func TestGaleraConcurrentChangesThroughTwoManagers(t *testing.T) {
	stores := storetest.OpenGaleraManagers(t)
	// What the API logs, a 500's cause among it, is shown if the test fails.
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	servers := make([]*fixture, 2)
	for i := range servers {
		opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token}
		srv := httptest.NewServer(New(opts, stores[i], log.With("manager", i)))
		t.Cleanup(srv.Close)
		servers[i] = &fixture{t: t, srv: srv, st: stores[i], opts: opts}
	}
	a, b := servers[0], servers[1]
	const other = "0c4e2a1d-1111-4a7b-8c9d-0e1f2a3b4c5d"
	if resp, body := a.do("POST", "/ufmRestV3/cloudx/Network", galeraNetwork(other, 4000)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("network %s: %d %s", other, resp.StatusCode, body)
	}
	for round := range 20 {
		net := fmt.Sprintf("3b9d6a52-7c1e-4f0a-9e2d-%012d", round)
		vlan := 100 + round
		guid := fmt.Sprintf("24:8a:07:03:00:b1:%02x:%02x", round, 0xaa)
		// A network created through both managers at once.
		both(t, round, "create network",
			request{a, "POST", "/ufmRestV3/cloudx/Network", galeraNetwork(net, vlan)},
			request{b, "POST", "/ufmRestV3/cloudx/Network", galeraNetwork(net, vlan)},
			http.StatusAccepted, http.StatusAccepted)
		// One GUID claimed for two networks' partitions at once: the first
		// the cluster certifies holds it, the other is refused.
		both(t, round, "claim one GUID",
			request{a, "POST", "/ufmRestV3/cloudx/Port", galeraPort(fmt.Sprintf("pa-%d", round), net, guid)},
			request{b, "POST", "/ufmRestV3/cloudx/Port", galeraPort(fmt.Sprintf("pb-%d", round), other, guid)},
			http.StatusAccepted, http.StatusBadRequest)
		// A port unknown to both.
		both(t, round, "delete an unknown port",
			request{a, "DELETE", "/ufmRestV3/cloudx/Port/unknown-a", `{"id": "unknown-a"}`},
			request{b, "DELETE", "/ufmRestV3/cloudx/Port/unknown-b", `{"id": "unknown-b"}`},
			http.StatusNotFound, http.StatusNotFound)
		// The port of this round on the other network is freed of its GUID
		// for the next round; then the network is deleted through both.
		a.do("DELETE", "/ufmRestV3/cloudx/Port/"+fmt.Sprintf("pb-%d", round), `{}`)
		both(t, round, "delete the network",
			request{a, "DELETE", "/ufmRestV3/cloudx/Network/" + net, `{"id": "` + net + `"}`},
			request{b, "DELETE", "/ufmRestV3/cloudx/Network/" + net, `{"id": "` + net + `"}`},
			http.StatusAccepted, http.StatusNotFound)
	}
}

type request struct {
	f                  *fixture
	method, path, body string
}

// both sends the two requests at the same moment and checks that their
// answers are want1 and want2, in either order.
func both(t *testing.T, round int, what string, r1, r2 request, want1, want2 int) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	got := make([]int, 2)
	bodies := make([]string, 2)
	for i, r := range []request{r1, r2} {
		wg.Go(func() {
			<-start
			resp, body := r.f.do(r.method, r.path, r.body)
			got[i], bodies[i] = resp.StatusCode, body
		})
	}
	close(start)
	wg.Wait()
	if (got[0] != want1 || got[1] != want2) && (got[0] != want2 || got[1] != want1) {
		t.Fatalf("round %d, %s: answered %d (%s) and %d (%s); want %d and %d",
			round, what, got[0], bodies[0], got[1], bodies[1], want1, want2)
	}
	for i, status := range got {
		if status != http.StatusAccepted {
			continue
		}
		var path string
		if err := json.Unmarshal([]byte(bodies[i]), &path); err != nil {
			t.Fatalf("round %d, %s: a 202 whose body %q is not a job path", round, what, bodies[i])
		}
	}
}

func galeraNetwork(id string, vlan int) string {
	return fmt.Sprintf(`{"id": %q, "name": "n", "provider:network_type": "vlan",
		"provider:physical_network": "ibnet", "provider:segmentation_id": %d}`, id, vlan)
}

func galeraPort(id, network, guid string) string {
	return fmt.Sprintf(`{"id": %q, "network_id": %q, "device_owner": "baremetal:none",
		"binding:vnic_type": "baremetal", "binding:host_id": "h-%s",
		"extra_dhcp_opts": [{"opt_name": "client-id", "opt_value": "ff:00:00:00:00:00:02:00:00:02:c9:00:%s"}]}`,
		id, network, id, guid)
}
