package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/health"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/metrics"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// fixedHealth answers health checks with set reports.
type fixedHealth struct{ live, ready health.Report }

func (h fixedHealth) Live() health.Report                 { return h.live }
func (h fixedHealth) Ready(context.Context) health.Report { return h.ready }

func opsServer(t *testing.T, opts Options, log *slog.Logger) *fixture {
	t.Helper()
	st := storetest.Open(t, config.EngineSQLite)
	opts.Prefix, opts.Domain, opts.Token = "/ufmRestV3", "cloudx", token
	srv := httptest.NewServer(New(opts, st, log))
	t.Cleanup(srv.Close)
	return &fixture{t: t, srv: srv, st: st, opts: opts}
}

// TestRequestID: a client's ID is kept and answered; one that could forge a
// log field, or none, is replaced by a fresh one; the log line carries it.
func TestRequestID(t *testing.T) {
	var logged bytes.Buffer
	f := opsServer(t, Options{AccessLog: true}, slog.New(slog.NewJSONHandler(&logged, nil)))
	for _, tt := range []struct {
		sent string
		kept bool
	}{
		{"req-42.a:b_c", true},
		{"", false},
		{`evil" "status":200`, false},
		{strings.Repeat("x", 129), false},
	} {
		resp, _ := f.do("GET", "/ufmRestV3/app/jobs/999", "", "X-Request-ID", tt.sent)
		got := resp.Header.Get(RequestIDHeader)
		switch {
		case tt.kept && got != tt.sent:
			t.Errorf("X-Request-ID %q answered as %q, want it kept", tt.sent, got)
		case !tt.kept && (got == tt.sent || len(got) != 32):
			t.Errorf("X-Request-ID %q answered as %q, want a fresh 32-digit one", tt.sent, got)
		}
		if !strings.Contains(logged.String(), `"request_id":"`+got+`"`) {
			t.Errorf("no log line carries request_id %q:\n%s", got, logged.String())
		}
	}
	if strings.Contains(logged.String(), "evil") {
		t.Errorf("a refused request ID reached the log:\n%s", logged.String())
	}
}

// TestHealthEndpoints: 200 or 503 with the reasons as JSON.
func TestHealthEndpoints(t *testing.T) {
	h := fixedHealth{live: health.Report{Status: "ok", Reasons: []string{}},
		ready: health.Report{Status: "fail", Role: "leader", Reasons: []string{"OpenSM is not running"}}}
	f := opsServer(t, Options{Health: h}, slog.New(slog.DiscardHandler))
	for path, want := range map[string]struct {
		status int
		report health.Report
	}{
		"/healthz": {http.StatusOK, h.live},
		"/readyz":  {http.StatusServiceUnavailable, h.ready},
	} {
		resp, body := f.do("GET", path, "")
		var got health.Report
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("%s: %v: %s", path, err, body)
		}
		if resp.StatusCode != want.status || got.Status != want.report.Status || got.Role != want.report.Role ||
			strings.Join(got.Reasons, ";") != strings.Join(want.report.Reasons, ";") {
			t.Errorf("%s = %d %+v, want %d %+v", path, resp.StatusCode, got, want.status, want.report)
		}
	}
}

// TestMetricsOnTheAPIListener: /metrics behind its own bearer token, never
// the API's; requests counted by route, with unmatched paths in one series.
func TestMetricsOnTheAPIListener(t *testing.T) {
	m := metrics.New()
	const metricsToken = "metrics-s3cret"
	f := opsServer(t, Options{Metrics: m.Handler(), MetricsToken: metricsToken, Observer: m}, slog.New(slog.DiscardHandler))
	f.do("GET", "/ufmRestV3/app/jobs/7", "")
	f.do("GET", "/no/such/path/1", "")
	f.do("GET", "/no/such/path/2", "")

	for _, auth := range []string{"", "Basic " + token, "Bearer wrong"} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("/metrics with Authorization %q: %v %v, want 401", auth, resp.StatusCode, err)
		}
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+metricsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics with its token: %v %v", resp.StatusCode, err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`afm_http_requests_total{code="404",method="GET",route="app/jobs/:id"} 1`,
		`afm_http_requests_total{code="400",method="GET",route="unmatched"} 2`,
	} {
		if !strings.Contains(body.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, body.String())
		}
	}
}

// TestJobRowKeepsRequestID plays the contract's request sequence: every job
// a change records keeps its request's ID in the jobs table, the client's
// X-Request-ID when it sent one, else the ID the answer's header carried. The
// job's JSON stays UFM's object: the ID is in the row and the log, not there.
func TestJobRowKeepsRequestID(t *testing.T) {
	var index struct {
		Steps []struct {
			Step                    int
			File, Method, Path, URL string
			Status                  int
		}
	}
	if err := json.Unmarshal([]byte(testdata(t, "index.json")), &index); err != nil {
		t.Fatal(err)
	}
	ufmKeys := "Created CreatedBy Description Foreground ID LastUpdated Operation Progress RelatedObjects SiteName Status Summary"
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			f := newFixture(t, engine)
			jobs := 0
			for _, step := range index.Steps {
				path := strings.NewReplacer("{url}", "/ufmRestV3", "{domain}", "cloudx").Replace(step.Path)
				var sent []string
				if step.Step%2 == 1 { // odd steps send their own ID, even ones none
					sent = []string{RequestIDHeader, fmt.Sprintf("client-req-%d:%s", step.Step, engine)}
				}
				resp, body := f.do(step.Method, path, testdata(t, step.File), sent...)
				if resp.StatusCode != step.Status {
					t.Fatalf("step %d: status %d, want %d: %s", step.Step, resp.StatusCode, step.Status, body)
				}
				answered := resp.Header.Get(RequestIDHeader)
				if len(sent) > 0 && answered != sent[1] {
					t.Errorf("step %d: sent X-Request-ID %q, answered %q", step.Step, sent[1], answered)
				}
				if answered == "" {
					t.Fatalf("step %d: the answer carries no X-Request-ID", step.Step)
				}
				if resp.StatusCode != http.StatusAccepted {
					continue
				}
				jobs++
				id, err := strconv.ParseInt(strings.TrimPrefix(resp.Header.Get("Location"), "/ufmRestV3/app/jobs/"), 10, 64)
				if err != nil {
					t.Fatalf("step %d: Location %q: %v", step.Step, resp.Header.Get("Location"), err)
				}
				j, err := f.st.GetJob(context.Background(), id)
				if err != nil {
					t.Fatalf("step %d: job %d: %v", step.Step, id, err)
				}
				if j.RequestID != answered {
					t.Errorf("step %d (%s %s): job %d's request_id is %q, the request's ID %q",
						step.Step, step.Method, path, id, j.RequestID, answered)
				}
				_, body = f.do("GET", "/ufmRestV3/app/jobs/"+strconv.FormatInt(id, 10), "")
				var view map[string]any
				if err := json.Unmarshal([]byte(body), &view); err != nil {
					t.Fatalf("job %d GET: %v: %s", id, err, body)
				}
				if keys := strings.Join(slices.Sorted(maps.Keys(view)), " "); keys != ufmKeys {
					t.Errorf("job %d's JSON has keys %s, want UFM's %s", id, keys, ufmKeys)
				}
			}
			if jobs != 8 {
				t.Errorf("%d steps recorded jobs, want 8", jobs)
			}
		})
	}
}
