package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestHeldByAnotherOwner: a GUID one client holds, named by the other
// client, is refused with 400 "held by another owner", in both directions;
// the answer names none of the holder's objects (it would tell a client what
// the other holds), and the manager's log names them at debug level for the
// operator.
func TestHeldByAnotherOwner(t *testing.T) {
	var logged bytes.Buffer
	st := storetest.Open(t, "sqlite").WithRules(store.Rules{KubernetesRange: kubeRange})
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, PKeys: []PKeysOptions{{
		Store: st, Prefix: "/ufmRest", Username: ufmUser, Password: ufmPassword,
		ApplyTimeout: 10 * time.Millisecond, PollInterval: 5 * time.Millisecond, Version: "test 1.0",
	}}}
	log := slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(New(opts, st, log))
	t.Cleanup(srv.Close)
	f := &pkeysFixture{fixture: &fixture{t: t, srv: srv, st: st, opts: opts}, user: ufmUser, password: ufmPassword}

	if resp, body := f.do("POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json")); resp.StatusCode != 202 {
		t.Fatalf("network: %d %s", resp.StatusCode, body)
	}
	port := testdata(t, "port_create_baremetal.json") // GUID 248a070300b1c2d4
	if resp, body := f.do("POST", "/ufmRestV3/cloudx/Port", port); resp.StatusCode != 202 {
		t.Fatalf("port: %d %s", resp.StatusCode, body)
	}
	f.must("POST", "/ufmRest/resources/pkeys", `{"pkey": "0x1006", "guids": ["`+podGUID1+`"]}`, http.StatusOK)

	podPort := strings.Replace(strings.Replace(port, portID, "11111111-1d3b-4e5f-9a7c-6b2d0e1f3a94", 1),
		"00:02:c9:00:24:8a:07:03:00:b1:c2:d4", "00:02:c9:00:02:00:00:00:00:00:00:3e", 1)
	for _, c := range []struct {
		name   string
		send   func() (*http.Response, string)
		hidden []string
		held   string
	}{
		{"ib-kubernetes naming an OpenStack port's GUID", func() (*http.Response, string) {
			return f.ufm("POST", "/ufmRest/resources/pkeys", `{"pkey": "0x1005", "guids": ["248a070300b1c2d4"]}`)
		}, []string{networkID, portID}, "OpenStack network " + networkID + " (port " + portID + ")"},
		{"networking-mlnx naming a pod's GUID", func() (*http.Response, string) {
			return f.do("POST", "/ufmRestV3/cloudx/Port", podPort)
		}, []string{"0x1006", "1006"}, "Kubernetes pkey 0x1006"},
	} {
		t.Run(c.name, func(t *testing.T) {
			logged.Reset()
			resp, body := c.send()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "is held by another owner") {
				t.Errorf("answer %d %s, want 400 saying the GUID is held by another owner", resp.StatusCode, body)
			}
			for _, h := range c.hidden {
				if strings.Contains(body, h) {
					t.Errorf("answer %s names the other owner's %q", body, h)
				}
			}
			if !loggedHeldBy(t, logged.Bytes(), c.held) {
				t.Errorf("the log names no holder %q at debug:\n%s", c.held, logged.String())
			}
		})
	}
}

// loggedHeldBy says whether a debug line of log names held as held_by.
func loggedHeldBy(t *testing.T, log []byte, held string) bool {
	t.Helper()
	for _, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		var e struct {
			Level  string `json:"level"`
			HeldBy string `json:"held_by"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		if e.Level == "DEBUG" && e.HeldBy == held {
			return true
		}
	}
	return false
}
