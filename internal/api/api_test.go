package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

const (
	token     = "s3cret-token"
	networkID = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	portID    = "8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94"
)

type fixture struct {
	t    *testing.T
	srv  *httptest.Server
	st   *store.Store
	opts Options
}

func newFixture(t *testing.T, engine string) *fixture {
	return newRulesFixture(t, engine, store.Rules{})
}

// newRulesFixture is a fixture whose store records by rules.
func newRulesFixture(t *testing.T, engine string, rules store.Rules) *fixture {
	st := storetest.Open(t, engine).WithRules(rules)
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return &fixture{t: t, srv: srv, st: st, opts: opts}
}

func testdata(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// do sends a request the way networking-mlnx does (token as is, JSON content type).
func (f *fixture) do(method, path, body string, header ...string) (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (f *fixture) revision() int64 {
	r, err := f.st.Revision(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func TestAcceptedChangeAnswersJobPath(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			f := newFixture(t, engine)
			resp, body := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json"))
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			path, id := jobPath(t, body)
			if loc := resp.Header.Get("Location"); loc != "/ufmRestV3/"+path {
				t.Errorf("Location = %q; want /ufmRestV3/%s", loc, path)
			}
			resp, body = f.do("GET", "/ufmRestV3/"+path, "")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("job GET status %d: %s", resp.StatusCode, body)
			}
			var job map[string]any
			if err := json.Unmarshal([]byte(body), &job); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"ID", "Status", "Progress", "Description", "Summary", "Created",
				"LastUpdated", "Operation", "RelatedObjects", "CreatedBy", "Foreground", "SiteName"} {
				if _, ok := job[key]; !ok {
					t.Errorf("job has no %q: %s", key, body)
				}
			}
			if job["ID"] != id || job["Status"] != "Pending" || job["Operation"] != "Create network" ||
				job["Progress"] != 0.0 || !strings.Contains(job["Description"].(string), "0x0065") {
				t.Errorf("job = %s", body)
			}
			// UFM's native path serves the same job.
			if resp, _ := f.do("GET", "/ufmRestV3/jobs/"+id, ""); resp.StatusCode != http.StatusOK {
				t.Errorf("GET /jobs/%s status %d", id, resp.StatusCode)
			}
		})
	}
}

// jobPath reads a 202's body: the JSON string app/jobs/<n>, which
// networking-mlnx stores in at most 36 characters; it returns it and <n>.
func jobPath(t *testing.T, body string) (path, id string) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), &path); err != nil || len(path) > 36 {
		t.Fatalf("body %q is not a JSON string of at most 36 characters", body)
	}
	id, ok := strings.CutPrefix(path, "app/jobs/")
	if n, err := strconv.ParseInt(id, 10, 64); !ok || err != nil || n < 1 || strconv.FormatInt(n, 10) != id {
		t.Fatalf("job path %q is not app/jobs/<n>", path)
	}
	return path, id
}

func TestCompletedAndFailedJobsCarrySummary(t *testing.T) {
	f := newFixture(t, "sqlite")
	f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json"))
	_, body := f.do("POST", "/ufmRestV3/cloudx/Port", testdata(t, "port_create_baremetal.json"))
	portJob, _ := jobPath(t, body)
	ctx := context.Background()
	term, err := f.st.NewTerm(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	f.st.CompleteJobs(ctx, term, 2)
	_, body = f.do("GET", "/ufmRestV3/"+portJob, "")
	var job jobView
	json.Unmarshal([]byte(body), &job)
	if job.Status != "Completed" || job.Progress != 100 ||
		job.Summary != "GUID 0x248a070300b1c2d4 is a full member of pkey 0x0065" ||
		len(job.RelatedObjects) != 2 || job.RelatedObjects[1] != portID || job.Operation != "Add port to network" {
		t.Errorf("completed job = %+v", job)
	}
	_, body = f.do("DELETE", "/ufmRestV3/cloudx/Port/"+portID, testdata(t, "port_delete.json"))
	deleteJob, _ := jobPath(t, body)
	f.st.FailJobs(ctx, term, 3, "OpenSM rejected the partitions file")
	_, body = f.do("GET", "/ufmRestV3/"+deleteJob, "")
	json.Unmarshal([]byte(body), &job)
	if job.Status != "Failed" || job.Summary != "OpenSM rejected the partitions file" {
		t.Errorf("failed job = %+v", job)
	}
}

func TestRefusals(t *testing.T) {
	f := newFixture(t, "sqlite")
	if resp, body := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json")); resp.StatusCode != 202 {
		t.Fatalf("network: %d %s", resp.StatusCode, body)
	}
	noClientID := strings.Replace(testdata(t, "port_create_baremetal.json"), `"opt_name": "client-id"`, `"opt_name": "tftp-server"`, 1)
	shortClientID := strings.Replace(testdata(t, "port_create_baremetal.json"),
		"ff:00:00:00:00:00:02:00:00:02:c9:00:24:8a:07:03:00:b1:c2:d4", "24:8a:07", 1)
	unknownNet := strings.Replace(testdata(t, "port_create_baremetal.json"), networkID, "00000000-0000-0000-0000-000000000000", 1)
	big := `{"id": "x", "pad": "` + strings.Repeat("a", MaxBodyBytes) + `"}`
	tests := []struct {
		name, method, path, body string
		header                   []string
		status                   int
		errorHas                 string
	}{
		{"no token", "GET", "/ufmRestV3/app/jobs/1", "", []string{"Authorization", ""}, 401, "token"},
		{"wrong token", "GET", "/ufmRestV3/app/jobs/1", "", []string{"Authorization", "Basic nope"}, 401, "token"},
		{"token not as Basic", "GET", "/ufmRestV3/app/jobs/1", "", []string{"Authorization", token}, 401, "token"},
		{"port without client-id", "POST", "/ufmRestV3/cloudx/Port", noClientID, nil, 400, "mechanism_drivers"},
		{"port with short client-id", "POST", "/ufmRestV3/cloudx/Port", shortClientID, nil, 400, "octets"},
		{"port on unknown network", "POST", "/ufmRestV3/cloudx/Port", unknownNet, nil, 400, "unknown"},
		{"not JSON", "POST", "/ufmRestV3/cloudx/Port", "{", nil, 400, "JSON"},
		{"JSON array", "POST", "/ufmRestV3/cloudx/Network", "[]", nil, 400, "JSON object"},
		{"body too large", "POST", "/ufmRestV3/cloudx/Network", big, nil, 413, "over"},
		{"path and body ids differ", "PUT", "/ufmRestV3/cloudx/Network/other", testdata(t, "network_update.json"), nil, 400, "differs"},
		{"VLAN out of range", "POST", "/ufmRestV3/cloudx/Network",
			strings.Replace(testdata(t, "network_create_vlan.json"), `"provider:segmentation_id": 101`, `"provider:segmentation_id": 32767`, 1), nil, 400, "VLAN ID 32767"},
		{"unknown domain", "DELETE", "/ufmRestV3/other/Port/" + portID, "", nil, 400, "no such resource"},
		{"unknown route", "GET", "/ufmRestV3/cloudx/Nope", "", nil, 400, "no such resource"},
		{"unknown port", "DELETE", "/ufmRestV3/cloudx/Port/" + portID, testdata(t, "port_delete.json"), nil, 404, "not known"},
		{"unknown network", "DELETE", "/ufmRestV3/cloudx/Network/a1d2c3b4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "", nil, 404, "not known"},
		{"unknown job", "GET", "/ufmRestV3/app/jobs/99", "", nil, 404, "not known"},
		{"job id not a number", "GET", "/ufmRestV3/app/jobs/x", "", nil, 404, "not known"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.revision()
			resp, body := f.do(tc.method, tc.path, tc.body, tc.header...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || !strings.Contains(e.Error, tc.errorHas) {
				t.Errorf("body %s: want a JSON error containing %q", body, tc.errorHas)
			}
			if resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
			if after := f.revision(); after != before {
				t.Errorf("a refused request changed the revision: %d -> %d", before, after)
			}
		})
	}
}

// networking-mlnx keeps a configured trailing slash: every path then holds "//".
func TestDoubledSlashesAreRoutedNotRedirected(t *testing.T) {
	f := newFixture(t, "sqlite")
	resp, body := f.do("POST", "/ufmRestV3//cloudx/Network", testdata(t, "network_create_vlan.json"))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST with // = %d %s", resp.StatusCode, body)
	}
	path, _ := jobPath(t, body)
	resp, body = f.do("GET", "//ufmRestV3//"+path, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with // = %d %s", resp.StatusCode, body)
	}
	resp, _ = f.do("POST", "/ufmRestV3/cloudx/Network/", testdata(t, "network_create_vlan.json"))
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		t.Errorf("trailing slash answered with redirect %d", resp.StatusCode)
	}
}

func TestFixtureSequenceStatuses(t *testing.T) {
	f := newFixture(t, "sqlite")
	steps := []struct {
		method, path, file string
		status             int
	}{
		{"POST", "/ufmRestV3/cloudx/Network", "network_create_vlan.json", 202},
		{"PUT", "/ufmRestV3/cloudx/Network/" + networkID, "network_update.json", 202},
		{"PUT", "/ufmRestV3/cloudx/Network/a1d2c3b4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "network_update_flat.json", 202},
		{"POST", "/ufmRestV3/cloudx/Port", "port_create_baremetal.json", 202},
		{"PUT", "/ufmRestV3/cloudx/Port/51c3e8f2-9a7d-4b6e-8c1f-2d4a6b8e0c13", "port_update_host_change.json", 202},
		{"DELETE", "/ufmRestV3/cloudx/Port/51c3e8f2-9a7d-4b6e-8c1f-2d4a6b8e0c13", "port_migrate_delete.json", 202},
		{"DELETE", "/ufmRestV3/cloudx/Port/" + portID, "port_unbind_delete.json", 202},
		{"DELETE", "/ufmRestV3/cloudx/Port/" + portID, "port_delete.json", 404},
		{"DELETE", "/ufmRestV3/cloudx/Network/" + networkID, "network_delete.json", 202},
		{"DELETE", "/ufmRestV3/cloudx/Network/" + networkID, "network_delete.json", 404},
	}
	for i, s := range steps {
		resp, body := f.do(s.method, s.path, testdata(t, s.file))
		if resp.StatusCode != s.status {
			t.Fatalf("step %d %s %s: status %d, want %d: %s", i+1, s.method, s.file, resp.StatusCode, s.status, body)
		}
	}
	snap, err := f.st.Snapshot(context.Background())
	if err != nil || len(snap.Networks) != 1 || snap.Networks[0].Type != "flat" || len(snap.Members) != 0 {
		t.Errorf("state after the sequence: %+v, %v", snap, err)
	}
}

// Networks outside [api] physical_networks, and their ports, are accepted and
// their jobs are Completed at once; the driver's DELETE of them is answered alike.
func TestNetworksNotOursCompleteAtOnce(t *testing.T) {
	f := newRulesFixture(t, "sqlite", store.Rules{PhysicalNetworks: []string{"ibnet-2"}})
	steps := []struct{ method, path, file string }{
		{"POST", "/ufmRestV3/cloudx/Network", "network_create_vlan.json"},
		{"POST", "/ufmRestV3/cloudx/Port", "port_create_baremetal.json"},
		{"DELETE", "/ufmRestV3/cloudx/Port/" + portID, "port_delete.json"},
		{"DELETE", "/ufmRestV3/cloudx/Network/" + networkID, "network_delete.json"},
	}
	for _, s := range steps {
		resp, body := f.do(s.method, s.path, testdata(t, s.file))
		var path string
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(body), &path) != nil {
			t.Fatalf("%s %s: %d %s", s.method, s.file, resp.StatusCode, body)
		}
		_, body = f.do("GET", "/ufmRestV3/"+path, "")
		var job jobView
		if err := json.Unmarshal([]byte(body), &job); err != nil || job.Status != "Completed" || job.Progress != 100 {
			t.Errorf("%s %s: job %s, want Completed at once", s.method, s.file, body)
		}
	}
	if r := f.revision(); r != 0 {
		t.Errorf("revision %d: changes that touch no partition must not make OpenSM sweep", r)
	}
}
