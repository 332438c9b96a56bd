package manager

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload/tlstest"
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
	apiURL, storageURL, _ := serveListeners(t, cfg, nil)
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
// store of its fabrics, as the manager does (over certs' TLS unless nil),
// until the test ends; it returns the API's URL, the storage fabric's pkeys
// listener's, and the API server.
func serveListeners(t *testing.T, cfg *config.Config, certs *tlsreload.Reloader) (apiURL, storageURL string, srv *api.Server) {
	t.Helper()
	st := openFabricsStore(t, cfg)
	pkeys, writeTimeout, err := pkeysAPIs(cfg, st, 30*time.Second, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv = api.New(api.Options{Prefix: cfg.API.Prefix, Domain: cfg.API.Domain, Token: cfg.API.Token, PKeys: pkeys}, st, log)
	mgr := &Manager{cfg: cfg, log: log, servers: listeners(cfg, srv, http.NotFoundHandler(), certs, writeTimeout, log)}
	if err := mgr.listen(); err != nil {
		t.Fatal(err)
	}
	mgr.serve()
	t.Cleanup(func() {
		for _, s := range mgr.servers {
			s.srv.Close()
		}
	})
	scheme := "http://"
	if certs != nil {
		scheme = "https://"
	}
	for _, s := range mgr.servers {
		switch s.name {
		case "API":
			apiURL = scheme + s.ln.Addr().String()
		case "pkeys API of fabric storage":
			storageURL = scheme + s.ln.Addr().String()
		}
	}
	if apiURL == "" || storageURL == "" {
		t.Fatalf("listeners %v: want the API's and the storage fabric's pkeys API's", mgr.servers)
	}
	return apiURL, storageURL, srv
}

// TestFabricPKeysListenerIsTheAPIsTwin: the storage fabric's listener
// serves [api]'s TLS certificate (plain HTTP is refused), echoes a client's
// request id, and takes the credentials a SIGHUP applies at once (a changed
// listen is named as needing a restart).
func TestFabricPKeysListenerIsTheAPIsTwin(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	certFile, keyFile := filepath.Join(dir, "afm.crt"), filepath.Join(dir, "afm.key")
	ca.WritePair(certFile, keyFile)
	path := filepath.Join(dir, "afm.conf")
	writeConfText(t, path, listenConf)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := tlsreload.New(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, storageURL, srv := serveListeners(t, cfg, certs)
	web := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}}}
	get := func(url, password string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		req.SetBasicAuth("ib-kubernetes-storage", password)
		req.Header.Set(api.RequestIDHeader, "req-from-ib-kubernetes-1")
		resp, err := web.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	resp, err := get(storageURL+"/ufmRest/app/ufm_version", "s3cret-storage-password")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ufm_version over TLS trusting [api]'s CA: %v %v", resp, err)
	}
	if id := resp.Header.Get(api.RequestIDHeader); id != "req-from-ib-kubernetes-1" {
		t.Errorf("request id answered %q, want the client's", id)
	}
	plain := strings.Replace(storageURL, "https://", "http://", 1) + "/ufmRest/app/ufm_version"
	if resp, err := http.Get(plain); err == nil && resp.StatusCode == http.StatusOK {
		t.Errorf("plain HTTP on the storage listener answered 200")
	}

	// SIGHUP with a new storage password: the old one is refused on the
	// fabric's listener at once, the new one works, listen needs a restart.
	next := strings.Replace(listenConf, "s3cret-storage-password", "s3cret-storage-password-2", 1)
	writeConfText(t, path, strings.TrimSuffix(next, "listen = 127.0.0.1:0\n")+"listen = 127.0.0.1:18091\n")
	var logged strings.Builder
	newHangup(path, cfg, nil, srv, slog.New(slog.NewJSONHandler(&logged, nil))).reload()
	if resp, err := get(storageURL+"/ufmRest/app/ufm_version", "s3cret-storage-password"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the old storage password after SIGHUP: %v %v, want 401", resp, err)
	}
	if resp, err := get(storageURL+"/ufmRest/app/ufm_version", "s3cret-storage-password-2"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the new storage password after SIGHUP: %v %v, want 200", resp, err)
	}
	for _, want := range []string{`"reloaded":["[fabric:storage:ufm_pkeys] password"]`,
		`"changed_settings_needing_restart":["[fabric:storage:ufm_pkeys] listen"]`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logged.String())
		}
	}
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

// TestFabricPKeysListenTakenBindsNothing: a fabric's listen address that is
// taken fails the start naming its section, and leaves no listener bound.
func TestFabricPKeysListenTakenBindsNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	path := filepath.Join(t.TempDir(), "afm.conf")
	writeConfText(t, path, strings.TrimSuffix(listenConf, "listen = 127.0.0.1:0\n")+"listen = "+taken.Addr().String()+"\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	st := openFabricsStore(t, cfg)
	pkeys, writeTimeout, err := pkeysAPIs(cfg, st, 30*time.Second, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Options{Prefix: cfg.API.Prefix, Domain: cfg.API.Domain, Token: cfg.API.Token, PKeys: pkeys}, st, log)
	mgr := &Manager{cfg: cfg, log: log, servers: listeners(cfg, srv, http.NotFoundHandler(), nil, writeTimeout, log)}
	err = mgr.listen()
	if err == nil || !strings.Contains(err.Error(), "[fabric:storage:ufm_pkeys] listen: ") {
		t.Fatalf("listen with the storage fabric's address taken: %v, want an error naming its section", err)
	}
	for _, s := range mgr.servers {
		if s.ln == nil {
			continue
		}
		if c, err := net.Dial("tcp", s.ln.Addr().String()); err == nil {
			c.Close()
			t.Errorf("%s still accepts on %s after the failed start", s.name, s.ln.Addr())
		}
	}
}
