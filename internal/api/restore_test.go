package api

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// After the database is restored from a backup (or an asynchronous replica
// is promoted), the jobs given out since the backup are lost: networking-mlnx
// polling one is answered 404, and sends its change again, which gets a job
// of its own; the lost id never answers for another change's job.
func TestLostJobAfterARestoreIsNotFound(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			db := storetest.NewMigratedDatabase(t, engine)
			st := storetest.OpenDatabase(t, db)
			opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token}
			srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
			t.Cleanup(srv.Close)
			f := &fixture{t: t, srv: srv, st: st, opts: opts}
			if resp, body := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json")); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("network: %d %s", resp.StatusCode, body)
			}
			restore := storetest.BackupPoint(t, db)
			resp, body := f.do("POST", "/ufmRestV3/cloudx/Port", testdata(t, "port_create_baremetal.json"))
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("port: %d %s", resp.StatusCode, body)
			}
			lost, _ := jobPath(t, body)
			restore()
			if resp, body := f.do("GET", "/ufmRestV3/"+lost, ""); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("GET %s, lost in the restore: %d %s; want 404", lost, resp.StatusCode, body)
			}
			// networking-mlnx sends the change again; others follow.
			for _, r := range []struct{ method, path, body string }{
				{"POST", "/ufmRestV3/cloudx/Port", testdata(t, "port_create_baremetal.json")},
				{"PUT", "/ufmRestV3/cloudx/Network/" + networkID, testdata(t, "network_update.json")},
			} {
				resp, answer := f.do(r.method, r.path, r.body)
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("%s %s: %d %s", r.method, r.path, resp.StatusCode, answer)
				}
				if again, _ := jobPath(t, answer); again == lost {
					t.Fatalf("%s %s after the restore got %s, the id of a job lost in it", r.method, r.path, lost)
				}
			}
			if resp, body := f.do("GET", "/ufmRestV3/"+lost, ""); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s, lost in the restore, after new changes: %d %s; want 404", lost, resp.StatusCode, body)
			}
		})
	}
}
