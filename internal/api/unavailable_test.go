package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// failingRecorder is a fake Recorder whose every call fails with err, or
// blocks until its context ends when err is nil (a black-holed database).
// The end-to-end suite takes real databases away; this pins the mapping.
type failingRecorder struct{ err error }

func (f failingRecorder) fail(ctx context.Context) error {
	if f.err == nil {
		<-ctx.Done()
		return fmt.Errorf("query: %w", ctx.Err())
	}
	return fmt.Errorf("query: %w", f.err)
}

func (f failingRecorder) RecordNetwork(ctx context.Context, c store.NetworkChange) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) RemoveNetwork(ctx context.Context, r store.NetworkRemoval) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) RecordPort(ctx context.Context, c store.PortChange) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) RemovePort(ctx context.Context, r store.PortRemoval) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}
func (f failingRecorder) GetJob(ctx context.Context, id int64) (store.Job, error) {
	return store.Job{}, f.fail(ctx)
}

// An unreachable database is a 503 with a JSON error that says so, for
// changes and job reads alike, also when the database does not answer at all
// (the request's deadline); any other failure stays a 500.
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, DBTimeout: 100 * time.Millisecond}
			srv := httptest.NewServer(New(opts, failingRecorder{tt.err}, slog.New(slog.DiscardHandler)))
			defer srv.Close()
			f := &fixture{t: t, srv: srv, opts: opts}
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/ufmRestV3/cloudx/Network", testdata(t, "network_create_vlan.json")},
				{"GET", "/ufmRestV3/app/jobs/7", ""},
			} {
				resp, body := f.do(req.method, req.path, req.body)
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
