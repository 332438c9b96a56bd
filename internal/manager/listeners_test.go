package manager

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestListenersBoundClients: the metrics' listener bounds a request's reading
// and an idle connection as the API's does, so that neither can be held open
// by a client that is slow or idle on purpose.
func TestListenersBoundClients(t *testing.T) {
	cfg := config.Default()
	cfg.API.Token = "s3cret-token-0123456789"
	cfg.API.MetricsListen, cfg.API.DebugListen = "127.0.0.1:9464", "127.0.0.1:6060"
	st := storetest.Open(t, config.EngineSQLite)
	log := slog.New(slog.DiscardHandler)
	servers := listeners(&cfg, api.New(api.Options{Token: cfg.API.Token}, st, log), http.NotFoundHandler(), nil, time.Minute, log)
	byName := map[string]*http.Server{}
	for _, s := range servers {
		byName[s.name] = s.srv
	}
	a, m := byName["API"], byName["metrics"]
	if a == nil || m == nil || byName["pprof"] == nil {
		t.Fatalf("listeners: %v, want API, metrics and pprof", byName)
	}
	for name, s := range map[string]*http.Server{"API": a, "metrics": m} {
		if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.IdleTimeout <= 0 || s.WriteTimeout <= 0 {
			t.Errorf("%s: read header %s, read %s, idle %s, write %s; want each bounded", name,
				s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout, s.WriteTimeout)
		}
	}
	if m.ReadHeaderTimeout != a.ReadHeaderTimeout || m.ReadTimeout != a.ReadTimeout || m.IdleTimeout != a.IdleTimeout {
		t.Errorf("metrics: read header %s, read %s, idle %s; the API's: %s, %s, %s", m.ReadHeaderTimeout,
			m.ReadTimeout, m.IdleTimeout, a.ReadHeaderTimeout, a.ReadTimeout, a.IdleTimeout)
	}
}
