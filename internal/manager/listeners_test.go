package manager

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"strings"
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

// TestClearTextOffLoopbackWarns: a listener off loopback without TLS is
// warned of at the start, naming its key: the token crosses the network in
// clear. On loopback, or with TLS, nothing is said.
func TestClearTextOffLoopbackWarns(t *testing.T) {
	for _, tc := range []struct {
		addr string
		tls  bool
		warn bool
	}{
		{"127.0.0.1:0", false, false},
		{"localhost:0", false, false},
		{"[::1]:0", false, false},
		{":0", false, true},
		{"0.0.0.0:0", false, true},
		{"0.0.0.0:0", true, false},
	} {
		var log strings.Builder
		cfg := config.Default()
		mgr := &Manager{cfg: &cfg, log: slog.New(slog.NewTextHandler(&log, nil)),
			servers: []*namedServer{{name: "API", key: "listen", addr: tc.addr, srv: &http.Server{}, tls: tc.tls}}}
		if tc.tls {
			mgr.servers[0].srv.TLSConfig = &tls.Config{}
		}
		if err := mgr.listen(); err != nil {
			t.Fatalf("%s: %v", tc.addr, err)
		}
		mgr.servers[0].close()
		warned := strings.Contains(log.String(), "level=WARN msg=\"serving off loopback without TLS") &&
			strings.Contains(log.String(), `key="[api] listen"`)
		if warned != tc.warn {
			t.Errorf("listen = %s, tls %t: warned %t, want %t:\n%s", tc.addr, tc.tls, warned, tc.warn, log.String())
		}
	}
}
