package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// An unreachable database is a 503 with a JSON error that says so, on both
// APIs (networking-mlnx and ib-kubernetes retry it), for changes and reads
// alike, also when the database does not answer at all (the request's
// deadline); any other failure stays a 500.
func TestUnreachableDatabaseIs503(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"refused", syscall.ECONNREFUSED, http.StatusServiceUnavailable},
		{"no answer", nil, http.StatusServiceUnavailable},
		{"other", errors.New("disk full"), http.StatusInternalServerError},
	}
	pkeyGUIDs := `{"pkey":"0x1005","guids":["` + podGUID1 + `"]}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := failingRecorder{tt.err}
			opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, DBTimeout: 100 * time.Millisecond,
				PKeys: []PKeysOptions{{Store: rec, Prefix: "/ufmRest", Username: ufmUser, Password: ufmPassword}}}
			srv := httptest.NewServer(New(opts, rec, slog.New(slog.DiscardHandler)))
			defer srv.Close()
			f := &pkeysFixture{fixture: &fixture{t: t, srv: srv, opts: opts}, user: ufmUser, password: ufmPassword}
			for _, req := range []struct {
				ufm                bool // ib-kubernetes' pkeys API, with its Basic auth
				method, path, body string
			}{
				{false, "POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json")},
				{false, "GET", "/ufmRestV3/app/jobs/7", ""},
				{true, "POST", "/ufmRest/resources/pkeys", pkeyGUIDs},
				{true, "POST", "/ufmRest/actions/remove_guids_from_pkey", pkeyGUIDs},
				{true, "DELETE", "/ufmRest/resources/pkeys/0x1005", ""},
				{true, "GET", "/ufmRest/resources/pkeys/?guids_data=true", ""},
				{true, "GET", "/ufmRest/resources/pkeys/0x1005", ""},
				{true, "GET", "/ufmRest/resources/pkeys/last_updated", ""},
				{true, "POST", "/ufmRest/resources/pkeys/hosts", `{"pkey":"0x1005","hosts_names":"node[01-02]"}`},
				{true, "DELETE", "/ufmRest/resources/pkeys/0x1005/hosts/node[01-02]", ""},
			} {
				send := f.ufm
				if !req.ufm {
					send = func(method, path, body string) (*http.Response, string) { return f.do(method, path, body) }
				}
				resp, body := send(req.method, req.path, req.body)
				var e struct{ Error string }
				if resp.StatusCode != tt.want || json.Unmarshal([]byte(body), &e) != nil {
					t.Fatalf("%s %s: %d %s; want %d with a JSON error", req.method, req.path, resp.StatusCode, body, tt.want)
				}
				if unavailable := strings.HasPrefix(e.Error, "database unreachable"); unavailable != (tt.want == http.StatusServiceUnavailable) {
					t.Errorf("%s %s: error %q", req.method, req.path, e.Error)
				}
			}
		})
	}
}

// A change the database aborted for conflicts at every attempt the store made
// (store.ConflictError) is a 503 that says so and asks for the change again:
// never a 500, which networking-mlnx counts against its retry_count.
func TestConflictingChangeIs503(t *testing.T) {
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token}
	conflict := &store.ConflictError{Attempts: 8, Err: errors.New("Error 1213: Deadlock found when trying to get lock")}
	srv := httptest.NewServer(New(opts, failingRecorder{conflict}, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	f := &fixture{t: t, srv: srv, opts: opts}
	resp, body := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json"))
	var e struct{ Error string }
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil ||
		!strings.HasPrefix(e.Error, "conflicting concurrent changes") || !strings.Contains(e.Error, "send it again") {
		t.Fatalf("a change aborted for conflicts: %d %s; want 503 saying so", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After on a 503")
	}
}
