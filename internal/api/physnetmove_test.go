package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// serveFabrics serves networking-mlnx's API on db, whose default fabric
// serves defaultNets and whose storage fabric storageNets.
func serveFabrics(t *testing.T, db storetest.Database, defaultNets, storageNets []string) *fixture {
	t.Helper()
	st := openFabricsOn(t, db, []store.FabricRules{
		{Name: store.DefaultFabric, Rules: store.Rules{PhysicalNetworks: defaultNets}},
		{Name: storageFabric, Rules: store.Rules{PhysicalNetworks: storageNets}},
	})
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return &fixture{t: t, srv: srv, st: st, opts: opts}
}

// TestPhysnetMovedIsAConflict: physnet ibnet, whose network and port were
// recorded on the default fabric, is then given to the storage fabric. The
// network's and its ports' changes are answered 409, naming the physnet,
// both fabrics and --move-physnet, and record nothing (they were answered
// 202 and completed on the default fabric, whose subnet the storage hosts
// are not on); a port's DELETE is still accepted. Once the physnet is
// moved, the same request is accepted, on the storage fabric.
func TestPhysnetMovedIsAConflict(t *testing.T) {
	db := storetest.NewDatabase(t, "sqlite")
	old := serveFabrics(t, db, []string{"ibnet"}, []string{"storage"})
	for _, r := range []struct{ path, file string }{
		{"/ufmRestV3/cloudx/Network", "network_create_vlan.json"},
		{"/ufmRestV3/cloudx/Port", "port_create_baremetal.json"},
	} {
		if resp, body := old.do("POST", r.path, testdata(t, r.file)); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s before the move: %d %s", r.file, resp.StatusCode, body)
		}
	}
	f := serveFabrics(t, db, []string{"other"}, []string{"storage", "ibnet"})
	before := [2]int64{f.revision(), revisionOf(t, f.st.DB().Fabric(storageFabric))}
	for _, r := range []struct{ method, path, file string }{
		{"PUT", "/ufmRestV3/cloudx/Port/51c3e8f2-9a7d-4b6e-8c1f-2d4a6b8e0c13", "port_update_host_change.json"},
		{"POST", "/ufmRestV3/cloudx/Port", "port_create_baremetal.json"},
		{"PUT", "/ufmRestV3/cloudx/Network/" + networkID, "network_update.json"},
	} {
		resp, body := f.do(r.method, r.path, testdata(t, r.file))
		var answer struct{ Error string }
		if err := json.Unmarshal([]byte(body), &answer); err != nil || resp.StatusCode != http.StatusConflict {
			t.Fatalf("%s %s: %d %s, want 409", r.method, r.file, resp.StatusCode, body)
		}
		for _, want := range []string{networkID, `"ibnet"`, "fabric default", "fabric storage", "--move-physnet ibnet"} {
			if !strings.Contains(answer.Error, want) {
				t.Errorf("%s %s: answer %q does not say %q", r.method, r.file, answer.Error, want)
			}
		}
	}
	if after := [2]int64{f.revision(), revisionOf(t, f.st.DB().Fabric(storageFabric))}; after != before {
		t.Errorf("revisions after the refusals = %v, want %v", after, before)
	}
	if _, err := f.st.MovePhysnet(t.Context(), store.PhysnetMove{Physnet: "ibnet", CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	resp, body := f.do("PUT", "/ufmRestV3/cloudx/Port/51c3e8f2-9a7d-4b6e-8c1f-2d4a6b8e0c13", testdata(t, "port_update_host_change.json"))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the port's update after the move: %d %s", resp.StatusCode, body)
	}
	_, id := jobPath(t, body)
	n, _ := strconv.ParseInt(id, 10, 64)
	if j, err := f.st.GetJob(t.Context(), n); err != nil || j.Fabric != storageFabric {
		t.Errorf("the port's job after the move = %+v, %v; want the storage fabric's", j, err)
	}
}

// TestPhysnetMovedDeleteIsAccepted: a port's DELETE on a network whose
// physnet moved is accepted and takes the port off the fabric it is on.
func TestPhysnetMovedDeleteIsAccepted(t *testing.T) {
	db := storetest.NewDatabase(t, "sqlite")
	old := serveFabrics(t, db, []string{"ibnet"}, []string{"storage"})
	old.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json"))
	old.do("POST", "/ufmRestV3/cloudx/Port", testdata(t, "port_create_baremetal.json"))
	f := serveFabrics(t, db, []string{"other"}, []string{"storage", "ibnet"})
	for _, r := range []struct{ path, file string }{
		{"/ufmRestV3/cloudx/Port/" + portID, "port_delete.json"},
		{"/ufmRestV3/cloudx/Network/" + networkID, "network_delete.json"},
	} {
		if resp, body := f.do("DELETE", r.path, testdata(t, r.file)); resp.StatusCode != http.StatusAccepted {
			t.Errorf("DELETE %s: %d %s, want 202", r.file, resp.StatusCode, body)
		}
	}
}

func revisionOf(t *testing.T, st *store.Store) int64 {
	t.Helper()
	r, err := st.Revision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}
