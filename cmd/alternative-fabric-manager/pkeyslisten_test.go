package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// listenConf is fabricsConf with the storage fabric's pkeys API on a
// listener of its own under /ufmRest, the one prefix ib-kubernetes sends,
// as the default fabric's is on [api] listen. Both on free ports.
const listenConf = `[api]
token = s3cret-token-0123456789
physical_networks = ibnet
listen = 127.0.0.1:0
[opensm_conf]
guid = 0x0002c90300a00001
[ufm_pkeys]
username = ib-kubernetes
password = s3cret-compute-password
pkey_range = 0x1000-0x1fff
apply_timeout = 0.2
[fabric:storage]
physical_networks = storage
config_dir = /var/lib/alternative-fabric-manager/opensm-storage
[fabric:storage:opensm_conf]
guid = 0x0002c90300b00001
[fabric:storage:ufm_pkeys]
username = ib-kubernetes-storage
password = s3cret-storage-password
pkey_range = 0x2000-0x2fff
apply_timeout = 0.2
listen = 127.0.0.1:0
`

// TestFabricPKeysOnItsOwnListener: a client doing what ib-kubernetes does
// (UFM's /ufmRest paths, Basic auth) on the storage fabric's listener
// changes and reads the storage fabric's pkeys alone; the default fabric's
// credentials and networking-mlnx's token open nothing there, and the
// default fabric's /ufmRest on [api] listen neither sees the storage pkey
// nor takes the storage credentials.
func TestFabricPKeysOnItsOwnListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afm.conf")
	writeConfText(t, path, listenConf)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	apiURL, storageURL := serveListeners(t, cfg)
	storage := client{"ib-kubernetes-storage", "s3cret-storage-password"}
	compute := client{"ib-kubernetes", "s3cret-compute-password"}

	// ib-kubernetes' first request, then its change and its read.
	if code, body := storage.do(t, "GET", storageURL+"/ufmRest/app/ufm_version", ""); code != http.StatusOK {
		t.Fatalf("ufm_version on the storage listener: %d %s", code, body)
	}
	add := `{"pkey": "0x2005", "guids": ["0002c90300b00101"], "membership": "full", "index0": true}`
	if code, body := storage.do(t, "POST", storageURL+"/ufmRest/resources/pkeys", add); code != http.StatusOK {
		t.Fatalf("POST /ufmRest/resources/pkeys on the storage listener: %d %s", code, body)
	}
	code, body := storage.do(t, "GET", storageURL+"/ufmRest/resources/pkeys/0x2005?guids_data=true", "")
	if code != http.StatusOK || !strings.Contains(strings.ToLower(body), "0002c90300b00101") {
		t.Errorf("GET the storage pkey on its listener: %d %s, want 200 with its GUID", code, body)
	}

	for _, tt := range []struct {
		what, method, url, body string
		as                      client
		want                    int
	}{
		{"the default fabric's credentials on the storage listener", "GET",
			storageURL + "/ufmRest/resources/pkeys", "", compute, http.StatusUnauthorized},
		{"the default fabric's credentials changing the storage listener", "POST",
			storageURL + "/ufmRest/resources/pkeys", strings.Replace(add, "0x2005", "0x1005", 1), compute, http.StatusUnauthorized},
		{"the storage credentials on [api] listen", "GET",
			apiURL + "/ufmRest/resources/pkeys", "", storage, http.StatusUnauthorized},
		{"networking-mlnx's API on the storage listener", "GET",
			storageURL + "/ufmRestV3/app/jobs/1", "", client{}, http.StatusNotFound},
		{"health on the storage listener", "GET", storageURL + "/readyz", "", client{}, http.StatusNotFound},
	} {
		if code, body := tt.as.do(t, tt.method, tt.url, tt.body); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.what, code, body, tt.want)
		}
	}
	if code, body := compute.do(t, "GET", apiURL+"/ufmRest/resources/pkeys", ""); code != http.StatusOK || strings.Contains(body, "0x2005") {
		t.Errorf("the default fabric's pkeys on [api] listen: %d %s, want 200 without the storage pkey", code, body)
	}
	// UFM answers an unknown pkey {}.
	if code, body := compute.do(t, "GET", apiURL+"/ufmRest/resources/pkeys/0x2005?guids_data=true", ""); code != http.StatusOK ||
		strings.Contains(strings.ToLower(body), "0002c90300b00101") {
		t.Errorf("the storage pkey on [api] listen (the default fabric's): %d %s, want 200 without its GUID", code, body)
	}
}

// serveListeners binds and serves the manager's listeners for cfg on a
// store of its fabrics, as the manager does, until the test ends; it returns
// the API's URL and the storage fabric's pkeys listener's.
func serveListeners(t *testing.T, cfg *config.Config) (apiURL, storageURL string) {
	t.Helper()
	st := openFabricsStore(t, cfg)
	pkeys, writeTimeout, err := pkeysAPIs(cfg, st, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv := api.New(api.Options{Prefix: cfg.API.Prefix, Domain: cfg.API.Domain, Token: cfg.API.Token, PKeys: pkeys}, st, log)
	mgr := &manager{cfg: cfg, log: log, servers: listeners(cfg, srv, http.NotFoundHandler(), nil, writeTimeout, log)}
	if err := mgr.listen(); err != nil {
		t.Fatal(err)
	}
	mgr.serve()
	t.Cleanup(func() {
		for _, s := range mgr.servers {
			s.srv.Close()
		}
	})
	for _, s := range mgr.servers {
		switch s.name {
		case "API":
			apiURL = "http://" + s.ln.Addr().String()
		case "pkeys API of fabric storage":
			storageURL = "http://" + s.ln.Addr().String()
		}
	}
	if apiURL == "" || storageURL == "" {
		t.Fatalf("listeners %v: want the API's and the storage fabric's pkeys API's", mgr.servers)
	}
	return apiURL, storageURL
}

// client sends requests as ib-kubernetes does: Basic auth, JSON bodies.
type client struct{ user, password string }

func (c client) do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(fmt.Errorf("%s %s: %w", method, url, err))
	}
	return resp.StatusCode, string(b)
}
