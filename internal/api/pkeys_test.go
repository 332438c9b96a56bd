package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

const (
	ufmUser     = "ib-kubernetes"
	ufmPassword = "s3cret-ufm-password"
	podGUID1    = "020000000000003e"
	podGUID2    = "020000000000003f"
)

var kubeRange = fabric.PKeyRange{First: 0x1000, Last: 0x1fff}

type pkeysFixture struct {
	*fixture
	user, password string
}

// newPKeysFixture serves both APIs on a SQLite store with the Kubernetes
// range 0x1000-0x1fff; a change waits at most applyTimeout for its apply.
func newPKeysFixture(t *testing.T, applyTimeout time.Duration) *pkeysFixture {
	st := storetest.Open(t, "sqlite").WithRules(store.Rules{KubernetesRange: kubeRange})
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, PKeys: []PKeysOptions{{
		Store: st, Prefix: "/ufmRest", Username: ufmUser, Password: ufmPassword,
		ApplyTimeout: applyTimeout, PollInterval: 5 * time.Millisecond, Version: "test 1.0",
	}}}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return &pkeysFixture{fixture: &fixture{t: t, srv: srv, st: st, opts: opts}, user: ufmUser, password: ufmPassword}
}

// newAppliedPKeysFixture is a pkeys fixture whose jobs an applier completes
// until the test ends.
func newAppliedPKeysFixture(t *testing.T) *pkeysFixture {
	f := newPKeysFixture(t, 20*time.Second)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.applier(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return f
}

// ufm sends a request as ib-kubernetes' http driver does: Basic auth, JSON.
func (f *pkeysFixture) ufm(method, path, body string) (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.SetBasicAuth(f.user, f.password)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (f *pkeysFixture) must(method, path, body string, want int) string {
	f.t.Helper()
	resp, answer := f.ufm(method, path, body)
	if resp.StatusCode != want {
		f.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, answer, want)
	}
	return answer
}

// applier completes every open job once, as a proven sweep would.
func (f *pkeysFixture) applier(ctx context.Context) {
	term, err := f.st.NewTerm(ctx, "test applier")
	if err != nil {
		if ctx.Err() == nil { // a test over before the applier began is no error
			f.t.Error(err)
		}
		return
	}
	for ctx.Err() == nil {
		rev, err := f.st.Revision(ctx)
		if err == nil {
			_, err = f.st.CompleteJobs(ctx, term, rev)
		}
		if err != nil && ctx.Err() == nil {
			f.t.Error(err)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPKeysRefuseOddInput(t *testing.T) {
	f := newPKeysFixture(t, time.Second)
	add := func(body string) (string, string) {
		return "/ufmRest/resources/pkeys", body
	}
	remove := func(body string) (string, string) {
		return "/ufmRest/actions/remove_guids_from_pkey", body
	}
	tests := []struct {
		name string
		path func(string) (string, string)
		body string
		want string
	}{
		{"pkey without 0x", add, `{"pkey":"1005","guids":["` + podGUID1 + `"]}`, `pkey "1005": want "0x" and 1 to 4 hex digits`},
		{"pkey 0x alone", add, `{"pkey":"0x","guids":["` + podGUID1 + `"]}`, `pkey "0x": want`},
		{"pkey of five digits", add, `{"pkey":"0x01005","guids":["` + podGUID1 + `"]}`, `pkey "0x01005": want`},
		{"pkey not hex", add, `{"pkey":"0xzz","guids":["` + podGUID1 + `"]}`, `pkey "0xzz" is not hexadecimal`},
		{"pkey as a number", add, `{"pkey":4101,"guids":["` + podGUID1 + `"]}`, "cannot unmarshal number"},
		{"pkey missing", add, `{"guids":["` + podGUID1 + `"]}`, `"pkey" is missing`},
		{"pkey 0x0000", add, `{"pkey":"0x0000","guids":["` + podGUID1 + `"]}`, "0x0000 is no partition's"},
		{"pkey 0x7fff", add, `{"pkey":"0x7fff","guids":["` + podGUID1 + `"]}`, "pkey 0x7fff is the default partition's"},
		{"pkey 0xffff", add, `{"pkey":"0xffff","guids":["` + podGUID1 + `"]}`, "membership bit 0x8000 set"},
		{"pkey with the membership bit", add, `{"pkey":"0x9005","guids":["` + podGUID1 + `"]}`, "membership bit 0x8000 set"},
		{"pkey outside the range", add, `{"pkey":"0x0005","guids":["` + podGUID1 + `"]}`, "pkey 0x0005 is outside [ufm_pkeys] pkey_range 0x1000-0x1fff"},
		{"GUID with colons", add, `{"pkey":"0x1005","guids":["02:00:00:00:00:00:00:3e"]}`, "16 hex digits without separators"},
		{"GUID too short", add, `{"pkey":"0x1005","guids":["0200000000003e"]}`, "has 14 hex digits: want 16"},
		{"GUID too long", add, `{"pkey":"0x1005","guids":["020000000000003e00"]}`, "has 18 hex digits: want 16"},
		{"GUID not hex", add, `{"pkey":"0x1005","guids":["02000000000000zz"]}`, "is not hexadecimal"},
		{"GUID zero", add, `{"pkey":"0x1005","guids":["0000000000000000"]}`, "is no port's"},
		{"GUID twice", add, `{"pkey":"0x1005","guids":["` + podGUID1 + `","` + strings.ToUpper(podGUID1) + `"]}`, "is listed twice"},
		{"no GUIDs", add, `{"pkey":"0x1005","guids":[]}`, `"guids" is missing or empty`},
		{"GUIDs missing", add, `{"pkey":"0x1005"}`, `"guids" is missing or empty`},
		{"memberships too short", add, `{"pkey":"0x1005","guids":["` + podGUID1 + `","` + podGUID2 + `"],"memberships":["full"]}`, "memberships has 1 entries for 2 GUIDs"},
		{"membership and memberships", add, `{"pkey":"0x1005","guids":["` + podGUID1 + `"],"membership":"full","memberships":["full"]}`, "not both"},
		{"membership both", add, `{"pkey":"0x1005","guids":["` + podGUID1 + `"],"membership":"both"}`, `membership "both": want full or limited`},
		{"membership in capitals", add, `{"pkey":"0x1005","guids":["` + podGUID1 + `"],"memberships":["FULL"]}`, `membership "FULL"`},
		{"unknown field", add, `{"pkey":"0x1005","guids":["` + podGUID1 + `"],"mtu":4}`, `unknown field "mtu"`},
		{"misspelt field", add, `{"pkey":"0x1005","guid":["` + podGUID1 + `"]}`, `unknown field "guid"`},
		{"not an object", add, `["0x1005"]`, "must be a JSON object"},
		{"two objects", add, `{"pkey":"0x1005","guids":["` + podGUID1 + `"]} {}`, "more than one JSON value"},
		{"index0 as a string", add, `{"pkey":"0x1005","guids":["` + podGUID1 + `"],"index0":"true"}`, "cannot unmarshal string"},
		{"remove: no GUIDs", remove, `{"pkey":"0x1005","guids":[]}`, `"guids" is missing or empty`},
		{"remove: pkey outside the range", remove, `{"pkey":"0x2000","guids":["` + podGUID1 + `"]}`, "outside [ufm_pkeys] pkey_range"},
		{"remove: unknown field", remove, `{"pkey":"0x1005","guids":["` + podGUID1 + `"],"membership":"full"}`, `unknown field "membership"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, body := tt.path(tt.body)
			answer := f.must("POST", path, body, http.StatusBadRequest)
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(answer), &e); err != nil || !strings.Contains(e.Error, tt.want) {
				t.Errorf("answer %s, want an error saying %q", answer, tt.want)
			}
			if r := f.revision(); r != 0 {
				t.Errorf("a refused request moved the revision to %d", r)
			}
		})
	}
	for _, path := range []string{"/ufmRest/resources/pkeys/0x10000", "/ufmRest/resources/pkeys/5", "/ufmRest/resources/pkeys/0x8005"} {
		f.must("GET", path, "", http.StatusBadRequest)
		f.must("DELETE", path, "", http.StatusBadRequest)
	}
	f.must("GET", "/ufmRest/resources/pkeys?guids_data=maybe", "", http.StatusBadRequest)
}

// A change is answered once it is applied, with what is now true, and the
// reads show it as ib-kubernetes reads them.
func TestPKeysCycle(t *testing.T) {
	f := newAppliedPKeysFixture(t)

	if got := f.must("GET", "/ufmRest/resources/pkeys/last_updated", "", 200); strings.TrimSpace(got) != `{"last_updated":null}` {
		t.Errorf("last_updated before any change = %s", got)
	}
	resp, _ := f.ufm("HEAD", "/ufmRest/app/ufm_version", "")
	if resp.StatusCode != 200 || resp.Header.Get("Date") == "" {
		t.Errorf("HEAD ufm_version: %d, Date %q", resp.StatusCode, resp.Header.Get("Date"))
	}
	if got := f.must("GET", "/ufmRest/app/ufm_version", "", 200); strings.TrimSpace(got) != `{"ufm_release_version":"test 1.0"}` {
		t.Errorf("ufm_version = %s", got)
	}
	serverTime, _ := http.ParseTime(resp.Header.Get("Date"))

	answer := f.must("POST", "/ufmRest/resources/pkeys",
		`{"pkey": "0x1005", "index0": true, "ip_over_ib": true, "membership": "full", "guids": ["`+podGUID1+`"]}`, 200)
	var applied appliedView
	if err := json.Unmarshal([]byte(answer), &applied); err != nil || !applied.Applied || applied.Job.Status != "Completed" ||
		applied.Message != "GUIDs 020000000000003e (full) in Kubernetes pkey 0x1005" {
		t.Fatalf("add answered %s", answer)
	}
	f.must("POST", "/ufmRest/resources/pkeys",
		`{"pkey":"0x100A","guids":["`+podGUID1+`","`+podGUID2+`"],"memberships":["limited","full"],"index0":false}`, 200)

	var lastUpdated struct {
		Last *string `json:"last_updated"`
	}
	json.Unmarshal([]byte(f.must("GET", "/ufmRest/resources/pkeys/last_updated", "", 200)), &lastUpdated)
	if lastUpdated.Last == nil {
		t.Fatal("last_updated is null after applied changes")
	}
	at, err := time.Parse(time.UnixDate, *lastUpdated.Last)
	if err != nil || at.Before(serverTime) {
		t.Errorf("last_updated %q (%v) is before the server's Date %v before the change", *lastUpdated.Last, err, serverTime)
	}

	list := f.must("GET", "/ufmRest/resources/pkeys/?guids_data=true", "", 200)
	want := `{"0x1005":{"pkey":"0x1005","partition":"k8s-1005","ip_over_ib":true,"guids":[{"guid":"020000000000003e","membership":"full","index0":true}]},` +
		`"0x100a":{"pkey":"0x100a","partition":"k8s-100a","ip_over_ib":true,"guids":[{"guid":"020000000000003e","membership":"limited","index0":false},{"guid":"020000000000003f","membership":"full","index0":false}]},` +
		`"0x7fff":{"pkey":"0x7fff","partition":"management","ip_over_ib":true,"membership":"limited","index0":false,"guids":[]}}`
	if strings.TrimSpace(list) != want {
		t.Errorf("list =\n%s\nwant\n%s", list, want)
	}
	if got := f.must("GET", "/ufmRest/resources/pkeys", "", 200); strings.Contains(got, "guids") || !strings.Contains(got, `"0x1005"`) {
		t.Errorf("list without guids_data = %s", got)
	}
	if got := f.must("GET", "/ufmRest/resources/pkeys/0x1005", "", 200); strings.TrimSpace(got) != `{"pkey":"0x1005","partition":"k8s-1005","ip_over_ib":true}` {
		t.Errorf("GET 0x1005 = %s", got)
	}
	if got := f.must("GET", "/ufmRest/resources/pkeys/0x1006?guids_data=true", "", 200); strings.TrimSpace(got) != `{}` {
		t.Errorf("GET of an absent pkey = %s, want {}", got)
	}

	answer = f.must("POST", "/ufmRest/actions/remove_guids_from_pkey", `{"pkey": "0x100A", "guids": ["`+podGUID1+`"]}`, 200)
	if !strings.Contains(answer, `"applied":true`) {
		t.Errorf("remove answered %s", answer)
	}
	if got := f.must("GET", "/ufmRest/resources/pkeys/0x100a?guids_data=true", "", 200); strings.Contains(got, podGUID1) || !strings.Contains(got, podGUID2) {
		t.Errorf("after remove: %s", got)
	}
	// An empty pkey, as the limited partition ib-kubernetes adds pods to.
	f.must("POST", "/ufmRest/resources/pkeys/add", `{"pkey": "0x1fff", "ip_over_ib": false}`, 200)
	if got := f.must("GET", "/ufmRest/resources/pkeys/0x1fff?guids_data=true", "", 200); strings.TrimSpace(got) !=
		`{"pkey":"0x1fff","partition":"k8s-1fff","ip_over_ib":false,"guids":[]}` {
		t.Errorf("GET of the created pkey = %s", got)
	}
	f.must("POST", "/ufmRest/resources/pkeys/add", `{"pkey": "0x1fff", "mtu_limit": 3}`, http.StatusBadRequest)
	f.must("POST", "/ufmRest/resources/pkeys/add", `{"pkey": "0x7fff"}`, http.StatusBadRequest)
	f.must("DELETE", "/ufmRest/resources/pkeys/0x100a", "", 200)
	f.must("DELETE", "/ufmRest/resources/pkeys/0x100a", "", http.StatusNotFound)
	if got := f.must("GET", "/ufmRest/resources/pkeys/0x100a", "", 200); strings.TrimSpace(got) != `{}` {
		t.Errorf("GET of a deleted pkey = %s", got)
	}
}

// Without an apply, a change is answered 200 after apply_timeout, saying it
// is not applied yet, and last_updated does not move until it is.
func TestPKeysChangeNotAppliedInTime(t *testing.T) {
	f := newPKeysFixture(t, 200*time.Millisecond)
	start := time.Now()
	answer := f.must("POST", "/ufmRest/resources/pkeys", `{"pkey":"0x1005","guids":["`+podGUID1+`"]}`, 200)
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("answered after %s, before apply_timeout", took)
	}
	if !strings.Contains(answer, `"applied":false`) || !strings.Contains(answer, "not yet seen applied") {
		t.Errorf("answer = %s", answer)
	}
	if got := f.must("GET", "/ufmRest/resources/pkeys/last_updated", "", 200); !strings.Contains(got, "null") {
		t.Errorf("last_updated = %s before the change is applied", got)
	}
	// It is recorded all the same.
	if got := f.must("GET", "/ufmRest/resources/pkeys/0x1005?guids_data=true", "", 200); !strings.Contains(got, podGUID1) {
		t.Errorf("GET after an unapplied add = %s", got)
	}
	ctx := context.Background()
	term, _ := f.st.NewTerm(ctx, "test")
	f.st.FailJobs(ctx, term, 1, "OpenSM rejected the partitions file")
	f.must("POST", "/ufmRest/resources/pkeys", `{"pkey":"0x1005","guids":["`+podGUID2+`"]}`, 200)
	f.st.FailJobs(ctx, term, 2, "OpenSM rejected the partitions file")
	// A failed apply is an error ib-kubernetes retries.
	go func() {
		time.Sleep(50 * time.Millisecond)
		f.st.FailJobs(ctx, term, 3, "OpenSM rejected the partitions file")
	}()
	f.pkeysTimeout(t, 10*time.Second)
	answer = f.must("POST", "/ufmRest/actions/remove_guids_from_pkey", `{"pkey":"0x1005","guids":["`+podGUID2+`"]}`, 500)
	m := regexp.MustCompile(`recorded as job ([1-9][0-9]*), but OpenSM did not apply it: OpenSM rejected the partitions file`).FindStringSubmatch(answer)
	if m == nil {
		t.Fatalf("failed apply answered %s", answer)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	if j, err := f.st.GetJob(ctx, id); err != nil || j.Status != store.StatusFailed || j.Revision != 3 {
		t.Errorf("the job the answer names: %+v, %v; want the failed job of revision 3", j, err)
	}
}

// pkeysTimeout gives the fixture's server a new apply timeout.
func (f *pkeysFixture) pkeysTimeout(t *testing.T, d time.Duration) {
	opts := f.opts
	opts.PKeys = []PKeysOptions{opts.PKeys[0]}
	opts.PKeys[0].ApplyTimeout = d
	srv := httptest.NewServer(New(opts, f.st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	f.srv = srv
}

func TestPKeysAuthentication(t *testing.T) {
	f := newPKeysFixture(t, time.Second)
	for _, c := range []struct{ name, user, password string }{
		{"wrong password", ufmUser, "s3cret-ufm-passwore"},
		{"wrong user", "admin", ufmPassword},
		{"no credentials", "", ""},
		{"the API token", ufmUser, token},
	} {
		f.user, f.password = c.user, c.password
		resp, body := f.ufm("POST", "/ufmRest/resources/pkeys", `{"pkey":"0x1005","guids":["`+podGUID1+`"]}`)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
		}
		if strings.Contains(body, "s3cret") {
			t.Errorf("%s: the answer shows a secret: %s", c.name, body)
		}
		if resp, _ := f.ufm("GET", "/ufmRest/app/ufm_version", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: ufm_version answered %d", c.name, resp.StatusCode)
		}
	}
	if f.revision() != 0 {
		t.Error("an unauthenticated request was recorded")
	}
	// networking-mlnx's token opens none of these routes, nor their
	// credentials networking-mlnx's.
	resp, _ := f.do("GET", "/ufmRest/resources/pkeys", "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET pkeys with the API token: %d", resp.StatusCode)
	}
}

// Without [ufm_pkeys] credentials no route is served: UFM's paths answer 404,
// networking-mlnx's unknown paths still 400.
func TestPKeysOff(t *testing.T) {
	f := newFixture(t, "sqlite")
	f.opts.PKeys = []PKeysOptions{{Prefix: "/ufmRest"}}
	srv := httptest.NewServer(New(f.opts, f.st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	f.srv = srv
	for _, path := range []string{"/ufmRest/app/ufm_version", "/ufmRest/resources/pkeys", "/ufmRest/resources/pkeys/last_updated"} {
		resp, body := f.do("GET", path, "")
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "the pkeys API is off") {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	if resp, _ := f.do("GET", "/ufmRestV3/nothing", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("networking-mlnx's unknown path: %d", resp.StatusCode)
	}
}
