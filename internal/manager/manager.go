// Package manager is the running manager: its HTTP listeners, its health
// checks and metrics, and a Fabric per fabric it serves, each with its
// OpenSM, its elector and the services it runs while elected.
//
// New wires everything from the configuration and refuses to start on a
// setting or a recorded state it makes wrong; Run serves until its context
// ends, reloading credentials on SIGHUP; Stop (within Run) stops serving,
// stops every fabric's services and waits for them, then stops OpenSM.
package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/health"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/leader"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/metrics"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload"
)

// Manager is the running manager's parts, wired from its configuration.
type Manager struct {
	cfg *config.Config
	log *slog.Logger
	// version is the binary's version, which the pkeys API reports.
	version string
	certs   *tlsreload.Reloader // nil: the API is served without TLS
	db      *store.DB           // the database, every fabric's view
	// fabrics are every fabric's OpenSM, applier and election, the default
	// first.
	fabrics   []*Fabric
	metrics   *metrics.Metrics
	apiServer *api.Server
	servers   []*namedServer
	// errs receives why a server failed.
	errs chan error
	// closers release what New opened, last first.
	closers []func()
}

// New opens the database and prepares OpenSM and everything that uses them,
// refusing to start on a certificate, a template or a recorded state the
// configuration makes wrong. Nothing is served yet, nothing runs: Run (or
// Close, to release what New opened).
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, version string) (*Manager, error) {
	mgr := &Manager{cfg: cfg, log: log, version: version}
	wired := false
	defer func() {
		if !wired {
			mgr.Close()
		}
	}()
	var err error
	// Before anything is opened or written: a certificate that does not load
	// is a start-up error like a bad key.
	if cfg.API.TLSCertFile != "" {
		if mgr.certs, err = tlsreload.New(cfg.API.TLSCertFile, cfg.API.TLSKeyFile, log); err != nil {
			return nil, fmt.Errorf("[api] tls_cert_file, tls_key_file: %w", err)
		}
	}
	if err := CheckFabricSites(cfg); err != nil {
		return nil, err
	}
	plans, err := mgr.openStore(ctx)
	if err != nil {
		return nil, err
	}
	checker := mgr.wireHealth()
	if err := mgr.wireFabrics(ctx, plans, checker); err != nil {
		return nil, err
	}
	if err := mgr.registerState(checker); err != nil {
		return nil, err
	}
	if err := mgr.wireAPI(checker); err != nil {
		return nil, err
	}
	wired = true
	return mgr, nil
}

// openStore plans every fabric and opens the database with their rules.
func (mgr *Manager) openStore(ctx context.Context) ([]fabricPlan, error) {
	cfg := mgr.cfg
	rules := FabricRules(cfg)
	plans := make([]fabricPlan, len(rules))
	var err error
	for i, f := range cfg.Fabrics {
		if plans[i], err = planFabric(ctx, cfg, f, rules[i].Rules); err != nil {
			return nil, err
		}
		rules[i].Rules = plans[i].rules
	}
	if mgr.db, err = OpenStore(ctx, cfg, cfg.Database.AutoMigrate, rules, mgr.log); err != nil {
		return nil, err
	}
	mgr.closers = append(mgr.closers, func() { mgr.db.Close() })
	// A fabric's first start writes its state rows, whether or not this
	// start migrates (auto_migrate = false: --migrate did): they are rows,
	// not schema.
	if !cfg.Database.AutoMigrate && len(cfg.Fabrics) > 1 {
		if err := mgr.db.EnsureFabrics(ctx); err != nil {
			return nil, fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
		}
	}
	return plans, nil
}

// wireFabrics wires each planned fabric on its store view.
func (mgr *Manager) wireFabrics(ctx context.Context, plans []fabricPlan, checker *health.Checker) error {
	for _, p := range plans {
		view := mgr.db.Fabric(p.fab.Name)
		if view == nil {
			return fmt.Errorf("%s: the database serves no fabric %q", p.fab.Section(), p.fab.Name)
		}
		f, closeSM, err := wireFabric(ctx, p, view, mgr.metrics, checker,
			fabricLogger(mgr.log, mgr.cfg, p.fab.Name))
		mgr.closers = append(mgr.closers, closeSM)
		if err != nil {
			return err
		}
		mgr.fabrics = append(mgr.fabrics, f)
	}
	return nil
}

// wireHealth makes the metrics and the health checks; each fabric adds the
// liveness of its applier's loop.
func (mgr *Manager) wireHealth() *health.Checker {
	mgr.metrics = metrics.New()
	// The leader writes its heartbeat every elector CheckInterval.
	return &health.Checker{HeartbeatTimeout: leader.HeartbeatTimeout, Log: mgr.log}
}

// registerState registers each fabric's collectors that read its recorded
// state, and each fabric's readiness (its store view, its metrics, its
// OpenSM), in the manager's order: the default first. Each fabric's series
// carry its name.
func (mgr *Manager) registerState(checker *health.Checker) error {
	m := mgr.metrics
	for _, fr := range mgr.fabrics {
		f, sm := m.Fabric(fr.name), supervisorView{fr.sm}
		checker.Fabrics = append(checker.Fabrics, health.Fabric{Name: fr.name, DB: fr.st, Self: f, SM: sm})
		gates, err := status.VerdictSource(fr.cfg, fr.st, fr.app.Cfg.Dump)
		if err != nil {
			return err
		}
		m.Registry().MustRegister(&metrics.State{Fabric: f, DB: fr.st, Gates: gates, SM: sm,
			Ready: func(ctx context.Context) bool { return checker.FabricReady(ctx, f.Name()).OK() }})
		m.Registry().MustRegister(&metrics.SecondSM{Fabric: f, DB: fr.st})
		m.Registry().MustRegister(&metrics.SetFailures{Fabric: f, DB: fr.st})
	}
	return nil
}

// wireAPI makes the API's server and the HTTP listeners, not yet listening.
func (mgr *Manager) wireAPI(checker *health.Checker) error {
	cfg, log, m := mgr.cfg, mgr.log, mgr.metrics
	opts := api.Options{Prefix: cfg.API.Prefix, Domain: cfg.API.Domain, Token: cfg.API.Token,
		AccessLog: cfg.API.AccessLog, Health: checker, Observer: m,
		Quota: quotaOf(cfg.API.Quota, cfg.Database.JobRetention, mgr.db)}
	if cfg.API.MetricsListen == "" {
		opts.Metrics = m.Handler()
	}
	opts.MetricsToken, opts.MetricsOpen = cfg.API.MetricsToken, cfg.API.MetricsOpen()
	if cfg.API.MetricsToken == "" && !opts.MetricsOpen {
		log.Warn("/metrics refuses every scrape: it is served on an address other than loopback and [api] metrics_token "+
			"is not set (docs/operations.md)", "listen", cmp.Or(cfg.API.MetricsListen, cfg.API.Listen))
	}
	// Every fabric's pkeys API, through its store view.
	pkeys, writeTimeout, err := pkeysAPIs(cfg, mgr.db, 30*time.Second, mgr.version)
	if err != nil {
		return err
	}
	// And every [ufm_pkeys:NAME] client's, through its own view.
	clients, writeTimeout, err := pkeysClientAPIs(cfg, mgr.db, writeTimeout, mgr.version,
		func(st *store.Store) opensm.KeySource { return opensm.DatabaseKeys{Store: st} })
	if err != nil {
		return err
	}
	opts.PKeys = append(pkeys, clients...)
	mgr.apiServer = api.New(opts, mgr.db, log)
	mgr.servers = listeners(cfg, mgr.apiServer, m.Handler(), mgr.certs, writeTimeout, log)
	return nil
}

// Fabrics are the manager's fabrics, the default first.
func (mgr *Manager) Fabrics() []*Fabric { return mgr.fabrics }

// Run serves and applies until ctx ends or a server fails, reloading the
// credentials and the TLS certificate at each signal on hup (the
// configuration file is read again from path); then it stops everything
// and releases what New opened.
func (mgr *Manager) Run(ctx context.Context, path string, hup <-chan os.Signal) error {
	defer mgr.Close()
	if err := mgr.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop while starting: a stop, not a failure
		}
		return err
	}
	reload := newHangup(path, mgr.cfg, mgr.certs, mgr.apiServer, mgr.log)
	var err error
	for done := false; !done; {
		select {
		case <-ctx.Done():
			mgr.log.Info("stopping")
			done = true
		case err = <-mgr.errs:
			mgr.log.Error("stopping", "error", err)
			done = true
		case <-hup:
			reload.reload()
		}
	}
	mgr.Stop(ctx)
	return err
}

// Start binds every listener (or none), serves them, and starts every
// fabric's campaign. On an error nothing it started runs on.
func (mgr *Manager) Start(ctx context.Context) error {
	if err := mgr.listen(); err != nil {
		return err
	}
	mgr.serve()
	for _, f := range mgr.fabrics {
		if err := f.Start(ctx); err != nil {
			mgr.Stop(ctx)
			return fmt.Errorf("fabric %s: %w", f.name, err)
		}
	}
	return nil
}

// Stop stops serving, stops every fabric's campaign and waits a while for
// them (and with them their services), then stops every OpenSM. ctx gives
// the values of the stop's context, not its end: the stop is bounded
// itself.
func (mgr *Manager) Stop(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, s := range mgr.servers {
		_ = s.srv.Shutdown(sctx)
		// Shutdown closes only the listeners Serve has begun on: one whose
		// goroutine has not run yet (a stop as the manager starts) would
		// accept connections nobody answers.
		s.close()
	}
	// A term that does not end within the bound does not keep OpenSM
	// running past the manager's end.
	select {
	case <-stopFabrics(mgr.fabrics):
	case <-sctx.Done():
		mgr.log.Error("a fabric's term did not end in time; stopping OpenSM all the same")
	}
	stopOpenSMs(context.WithoutCancel(ctx), mgr.fabrics)
}

// Close releases what New opened: OpenSM's driver, then the database.
func (mgr *Manager) Close() {
	for i := len(mgr.closers) - 1; i >= 0; i-- {
		mgr.closers[i]()
	}
	mgr.closers = nil
}

// clearTextWarning is logged at the start for each listener off loopback
// without TLS: the API token, the pkeys passwords and the metrics token
// cross the network in clear, for anyone on its path to read and replay.
const clearTextWarning = "serving off loopback without TLS: credentials cross the network in clear; " +
	"set [api] tls_cert_file and tls_key_file, or listen on loopback behind a TLS proxy (docs/operations.md)"

// listen binds every listener, or none.
func (mgr *Manager) listen() error {
	for _, s := range mgr.servers {
		if err := s.listen(); err != nil {
			for _, o := range mgr.servers {
				o.close()
			}
			return err
		}
		mgr.log.Info("serving "+s.name, "listen", s.ln.Addr().String(), "tls", s.tls)
		if !s.tls && !config.Loopback(s.addr) {
			mgr.log.Warn(clearTextWarning, "server", s.name, "key", cmp.Or(s.section, "[api]")+" "+s.key, "listen", s.addr)
		}
	}
	mgr.log.Info("API routes", "prefix", mgr.cfg.API.Prefix, "domain", mgr.cfg.API.Domain)
	return nil
}

// serve serves every listener; a server that fails sends why on errs.
func (mgr *Manager) serve() {
	mgr.errs = make(chan error, len(mgr.servers))
	for _, s := range mgr.servers {
		go func() {
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				mgr.errs <- fmt.Errorf("%s server: %w", s.name, err)
			}
		}()
	}
}

// applierObserver tells the metrics of every apply, and liveness of every
// turn of the applier's loop.
type applierObserver struct {
	*metrics.Fabric
	loop *health.Loop
}

func (o applierObserver) Alive() { o.loop.Beat() }
