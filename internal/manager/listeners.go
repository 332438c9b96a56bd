package manager

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload"
)

// listeners are the manager's HTTP servers: the API's (with /metrics unless
// metrics_listen is set), the fabrics' own pkeys APIs', the metrics' and
// pprof's. The API's and the
// metrics' bound how long a client may take to send a request and keep an
// idle connection open: a client that is slow on purpose holds no
// connection for long.
func listeners(cfg *config.Config, apiServer *api.Server, metrics http.Handler, certs *tlsreload.Reloader,
	writeTimeout time.Duration, log *slog.Logger) []*namedServer {
	bounded := func(h http.Handler, writeTimeout time.Duration) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}
	srv := bounded(apiServer, writeTimeout)
	if certs != nil {
		srv.TLSConfig = certs.Config()
	}
	servers := []*namedServer{{name: "API", key: "listen", addr: cfg.API.Listen, srv: srv, tls: certs != nil}}
	servers = append(servers, pkeysListeners(cfg, apiServer,
		func(h http.Handler) *http.Server { return bounded(h, writeTimeout) }, certs)...)
	if cfg.API.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", apiServer.MetricsHandler(metrics))
		servers = append(servers, &namedServer{name: "metrics", key: "metrics_listen", addr: cfg.API.MetricsListen,
			srv: bounded(mux, 30*time.Second)})
	}
	if cfg.API.DebugListen != "" {
		servers = append(servers, &namedServer{name: "pprof", key: "debug_listen", addr: cfg.API.DebugListen,
			// No WriteTimeout: a CPU profile or a trace streams for as long as
			// asked. On loopback only (the configuration refuses any other).
			srv: &http.Server{Handler: pprofMux(), ReadHeaderTimeout: 10 * time.Second}})
	}
	return servers
}

// namedServer is one of the manager's HTTP listeners.
type namedServer struct {
	// section and key set addr: "[api]" when section is "".
	name, section, key, addr string
	srv                      *http.Server
	tls                      bool
	ln                       net.Listener
}

func (s *namedServer) listen() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", cmp.Or(s.section, "[api]"), s.key, err)
	}
	if s.tls {
		ln = tls.NewListener(ln, s.srv.TLSConfig)
	}
	s.ln = ln
	return nil
}

func (s *namedServer) close() {
	if s.ln != nil {
		s.ln.Close()
	}
}

// pprofMux serves Go's profiler, on [api] debug_listen only.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
