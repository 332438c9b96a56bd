package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// credsServer serves both APIs and /metrics on a SQLite store; scrapes
// counts the requests that reached the metrics handler.
func credsServer(t *testing.T, opts Options) (*Server, *httptest.Server, *atomic.Int64) {
	t.Helper()
	st := storetest.Open(t, "sqlite").WithRules(store.Rules{KubernetesRange: kubeRange})
	var scrapes atomic.Int64
	opts.Prefix, opts.Domain = "/ufmRestV3", "cloudx"
	var pk PKeysOptions
	if len(opts.PKeys) > 0 {
		pk = opts.PKeys[0]
	}
	pk.Store, pk.Prefix, pk.ApplyTimeout = st, "/ufmRest", 10*time.Millisecond
	opts.PKeys = []PKeysOptions{pk}
	opts.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		scrapes.Add(1)
		w.Write([]byte("afm_up 1\n"))
	})
	s := New(opts, st, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv, &scrapes
}

// get sends a GET with the Authorization header auth ("" for none) and
// returns the status and body.
func get(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// defaultPKeys are the default fabric's pkeys API credentials, alone.
func defaultPKeys(user, password string, previous ...string) map[string]PKeysCredentials {
	return map[string]PKeysCredentials{store.DefaultFabric: {Username: user, Password: password, PreviousPasswords: previous}}
}

func basic(user, password string) string {
	r, _ := http.NewRequest("GET", "http://x", nil)
	r.SetBasicAuth(user, password)
	return r.Header.Get("Authorization")
}

// TestSetCredentials: new credentials take effect for the next request, and
// the old ones stop working at once: an operator revoking a leaked token,
// pkeys password or metrics token is done when SIGHUP returns.
func TestSetCredentials(t *testing.T) {
	const (
		newToken    = "n3w-token-0123456789"
		newPassword = "n3w-ufm-password-0123"
		oldMetrics  = "old-metrics-token-0123"
		newMetrics  = "n3w-metrics-token-0123"
	)
	s, srv, _ := credsServer(t, Options{Token: token, MetricsToken: oldMetrics,
		PKeys: []PKeysOptions{{Username: ufmUser, Password: ufmPassword}}})
	jobs := srv.URL + "/ufmRestV3/app/jobs/1"
	version := srv.URL + "/ufmRest/app/ufm_version"
	metrics := srv.URL + "/metrics"
	for _, c := range []struct{ url, auth string }{
		{jobs, "Basic " + token}, {version, basic(ufmUser, ufmPassword)}, {metrics, "Bearer " + oldMetrics},
	} {
		if status, body := get(t, c.url, c.auth); status == http.StatusUnauthorized {
			t.Fatalf("before the change: %s refused: %s", c.url, body)
		}
	}

	s.SetCredentials(Credentials{Token: newToken, PKeys: defaultPKeys(ufmUser, newPassword), MetricsToken: newMetrics})
	for _, c := range []struct {
		url, auth string
		want      int
	}{
		{jobs, "Basic " + token, http.StatusUnauthorized},
		{jobs, "Basic " + newToken, http.StatusNotFound}, // authenticated: no job 1
		{version, basic(ufmUser, ufmPassword), http.StatusUnauthorized},
		{version, basic(ufmUser, newPassword), http.StatusOK},
		{metrics, "Bearer " + oldMetrics, http.StatusUnauthorized},
		{metrics, "Bearer " + newMetrics, http.StatusOK},
	} {
		if status, body := get(t, c.url, c.auth); status != c.want {
			t.Errorf("after the change: %s with %q: %d %s, want %d", c.url, c.auth, status, body, c.want)
		}
	}

	// Removing the pkeys API's user name and password refuses all of its
	// requests at once, even an empty Basic auth.
	s.SetCredentials(Credentials{Token: newToken})
	for _, auth := range []string{basic(ufmUser, newPassword), basic("", ""), ""} {
		if status, body := get(t, version, auth); status != http.StatusUnauthorized {
			t.Errorf("pkeys credentials removed: ufm_version with %q: %d %s, want 401", auth, status, body)
		}
	}
}

// TestPreviousCredentialsDuringRotation: while a new token (or pkeys password)
// reaches every client, the previous ones are accepted beside it, and only
// those: once removed they fail at once, like any revoked secret.
func TestPreviousCredentialsDuringRotation(t *testing.T) {
	const (
		newToken, otherToken   = "n3w-token-0123456789", "0ther-token-0123456789"
		newPassword, otherPass = "n3w-ufm-password-0123", "0ther-ufm-password-0123"
	)
	s, srv, _ := credsServer(t, Options{Token: token, PKeys: []PKeysOptions{{Username: ufmUser, Password: ufmPassword}}})
	jobs := srv.URL + "/ufmRestV3/app/jobs/1"
	version := srv.URL + "/ufmRest/app/ufm_version"
	type authCase struct {
		url, auth string
		want      int
	}
	check := func(when string, cases []authCase) {
		t.Helper()
		for _, c := range cases {
			if status, body := get(t, c.url, c.auth); status != c.want {
				t.Errorf("%s: %s with %q: %d %s, want %d", when, c.url, c.auth, status, body, c.want)
			}
		}
	}
	s.SetCredentials(Credentials{Token: newToken, PreviousTokens: []string{otherToken, token},
		PKeys: defaultPKeys(ufmUser, newPassword, ufmPassword)})
	check("during the rotation", []authCase{
		{jobs, "Basic " + newToken, http.StatusNotFound}, // authenticated: no job 1
		{jobs, "Basic " + token, http.StatusNotFound},
		{jobs, "Basic " + otherToken, http.StatusNotFound},
		{jobs, "Basic " + token + "x", http.StatusUnauthorized},
		{version, basic(ufmUser, newPassword), http.StatusOK},
		{version, basic(ufmUser, ufmPassword), http.StatusOK},
		{version, basic(ufmUser, otherPass), http.StatusUnauthorized},
		{version, basic("someone", ufmPassword), http.StatusUnauthorized},
	})
	s.SetCredentials(Credentials{Token: newToken, PKeys: defaultPKeys(ufmUser, newPassword)})
	check("after the rotation", []authCase{
		{jobs, "Basic " + newToken, http.StatusNotFound},
		{jobs, "Basic " + token, http.StatusUnauthorized},
		{jobs, "Basic " + otherToken, http.StatusUnauthorized},
		{version, basic(ufmUser, newPassword), http.StatusOK},
		{version, basic(ufmUser, ufmPassword), http.StatusUnauthorized},
	})
}

// TestCredentialsSwappedDuringRequests swaps the credentials while requests
// are being checked (run with -race): every request is answered as one set
// or the other decides, never with an error.
func TestCredentialsSwappedDuringRequests(t *testing.T) {
	tokens := []string{"first-token-0123456789", "second-token-0123456789"}
	s, srv, _ := credsServer(t, Options{Token: tokens[0]})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, body := get(t, srv.URL+"/ufmRestV3/app/jobs/1", "Basic "+tokens[i%2])
				if status != http.StatusUnauthorized && status != http.StatusNotFound {
					t.Errorf("a request during the swaps: %d %s", status, body)
					return
				}
			}
		})
	}
	for i := range 200 {
		s.SetCredentials(Credentials{Token: tokens[i%2]})
	}
	close(stop)
	wg.Wait()
}

// TestMetricsNeedATokenOffLoopback: without a metrics token, /metrics is
// served only when it is open (a loopback listener); otherwise every scrape
// is refused before the metrics, which read the database, are gathered.
func TestMetricsNeedATokenOffLoopback(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  Options
		auth  string
		want  int
		reach bool
	}{
		{"no token, not loopback", Options{Token: token}, "", http.StatusForbidden, false},
		{"no token, not loopback, the API token", Options{Token: token}, "Basic " + token, http.StatusForbidden, false},
		{"no token, loopback", Options{Token: token, MetricsOpen: true}, "", http.StatusOK, true},
		{"token, loopback, none sent", Options{Token: token, MetricsToken: "m3trics-token", MetricsOpen: true}, "", http.StatusUnauthorized, false},
		{"token sent", Options{Token: token, MetricsToken: "m3trics-token"}, "Bearer m3trics-token", http.StatusOK, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, srv, scrapes := credsServer(t, c.opts)
			status, body := get(t, srv.URL+"/metrics", c.auth)
			if status != c.want {
				t.Errorf("/metrics: %d %s, want %d", status, body, c.want)
			}
			if reached := scrapes.Load() > 0; reached != c.reach {
				t.Errorf("the metrics were gathered: %t, want %t", reached, c.reach)
			}
			if status == http.StatusForbidden && !strings.Contains(body, "metrics_token") {
				t.Errorf("the refusal does not say how to scrape: %s", body)
			}
		})
	}
}

// TestJobsReadableOnlyByTheirCreator: networking-mlnx's token reads only the
// jobs it created, the pkeys API's credentials only ib-kubernetes' ones; the
// other side's job is answered as a job that does not exist.
func TestJobsReadableOnlyByTheirCreator(t *testing.T) {
	_, srv, _ := credsServer(t, Options{Token: token, PKeys: []PKeysOptions{{Username: ufmUser, Password: ufmPassword}}})
	f := &fixture{t: t, srv: srv}
	resp, body := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json"))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("network: %d %s", resp.StatusCode, body)
	}
	neutronJob := strings.TrimPrefix(resp.Header.Get("Location"), "/ufmRestV3/app/jobs/")
	req, _ := http.NewRequest("POST", srv.URL+"/ufmRest/resources/pkeys", strings.NewReader(`{"pkey":"0x1005","guids":["`+podGUID1+`"]}`))
	req.SetBasicAuth(ufmUser, ufmPassword)
	pr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer appliedView
	if err := json.NewDecoder(pr.Body).Decode(&answer); err != nil || pr.StatusCode != http.StatusOK {
		t.Fatalf("pkeys add: %d %v", pr.StatusCode, err)
	}
	pr.Body.Close()
	kubeJob := answer.Job.ID
	const absent = "999"

	neutron, kube := "Basic "+token, basic(ufmUser, ufmPassword)
	for _, c := range []struct {
		path, auth string
		want       int
	}{
		{"/ufmRestV3/app/jobs/" + neutronJob, neutron, http.StatusOK},
		{"/ufmRestV3/jobs/" + neutronJob, neutron, http.StatusOK},
		{"/ufmRest/jobs/" + kubeJob, kube, http.StatusOK},
		{"/ufmRestV3/app/jobs/" + kubeJob, neutron, http.StatusNotFound},
		{"/ufmRestV3/jobs/" + kubeJob, neutron, http.StatusNotFound},
		{"/ufmRest/jobs/" + neutronJob, kube, http.StatusNotFound},
		{"/ufmRest/jobs/" + kubeJob, neutron, http.StatusUnauthorized},
		{"/ufmRestV3/app/jobs/" + neutronJob, kube, http.StatusUnauthorized},
	} {
		status, body := get(t, srv.URL+c.path, c.auth)
		if status != c.want {
			t.Errorf("GET %s as %q: %d %s, want %d", c.path, c.auth, status, body, c.want)
		}
		if status != http.StatusNotFound {
			continue
		}
		// The same answer as for a job that does not exist.
		id := c.path[strings.LastIndex(c.path, "/")+1:]
		_, none := get(t, srv.URL+strings.TrimSuffix(c.path, id)+absent, c.auth)
		if strings.ReplaceAll(body, id, absent) != none {
			t.Errorf("GET %s: %s, unlike a job that does not exist: %s", c.path, body, none)
		}
	}
}
