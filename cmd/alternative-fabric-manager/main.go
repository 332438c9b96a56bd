// Command alternative-fabric-manager is an InfiniBand fabric manager for
// OpenStack's networking-mlnx: it serves the part of UFM's REST API that
// mlnx_sdn_assist uses and keeps OpenSM's partitions equal to what it recorded.
//
//	alternative-fabric-manager --config-file /etc/alternative-fabric-manager/afm.conf
//	alternative-fabric-manager --config-file ... --migrate   # apply database migrations, then exit
//	alternative-fabric-manager --config-file ... --render    # print the checked partitions file, then exit
//	alternative-fabric-manager --config-file ... --healthcheck  # exit 0 if the running manager answers /healthz
//	alternative-fabric-manager --version
//	alternative-fabric-manager --config-file ... --status [--json] | --confirm-switches | --show-keys
//	alternative-fabric-manager --config-file ... --show-enforcement-errors | --clear-enforcement-errors
//	alternative-fabric-manager --config-file ... --accept-moved-guid GUID[,GUID...]  # docs/runbooks.md
//	alternative-fabric-manager --config-file ... --import-neutron [--dry-run] [--prune]  # docs/neutron-import.md
//	alternative-fabric-manager --config-file ... --unfreeze   # HA: lift a freeze (docs/ha.md)
//	alternative-fabric-manager --config-file ... --move-physnet PHYSNET [--dry-run]  # docs/multi-fabric.md
//	alternative-fabric-manager --config-file ... --import-keys opensm.conf [--replace-keys] | --rotate-keys m_key,sm_key,sa_key
//	alternative-fabric-manager --config-file ... --healthcheck  # exit 0 only if the running manager is ready
//
// With --render, the file goes to standard output and the exit status is 0; if the
// template fails or the check refuses the file, the problems go to standard error
// and the exit status is 1. --status exits 0 only when every gate is open, 3 when
// jobs do not complete, 4 when something could not be checked from this host
// (docs/status.md).
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/health"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/leader"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/metrics"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/neutronimport"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/smcontainer"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload"
)

func main() {
	configFile := flag.String("config-file", config.DefaultPath, "the manager's configuration (INI)")
	migrate := flag.Bool("migrate", false, "apply the database migrations, then exit")
	render := flag.Bool("render", false, "print the partitions file the recorded state renders to (checked), then exit")
	debug := flag.Bool("debug", false, "log at debug level (every HTTP request, OpenSM's filtered output)")
	status := flag.Bool("status", false, "print who applies, the last apply, jobs by status and why jobs do not complete, then exit (0: every gate is open, 3: jobs do not complete, 4: cannot tell from this host)")
	asJSON := flag.Bool("json", false, "with --status: print it as JSON (fields in docs/status.md)")
	confirm := flag.Bool("confirm-switches", false, "record the switches of OpenSM's last sweep as the fabric's expected switches, then exit")
	showErrs := flag.Bool("show-enforcement-errors", false, "list the switch ports whose partition enforcement OpenSM cleared, then exit")
	acceptMoved := flag.String("accept-moved-guid", "", "record the switch ports OpenSM's last sweep found these port GUIDs behind (comma separated) as theirs: a host recabled or its HCA moved; forget those not in it (a host gone for good) (docs/runbooks.md), then exit")
	clearErrs := flag.Bool("clear-enforcement-errors", false, "forget the recorded enforcement errors, so that jobs complete again, then exit")
	unfreezeFlag := flag.Bool("unfreeze", false, "with [ha] ha = true: lift a freeze once you made sure the OpenSM --status names is stopped (docs/ha.md), then exit")
	showKeys := flag.Bool("show-keys", false, "print OpenSM's M_Key, SM_Key and SA_Key (secrets), then exit")
	importKeys := flag.String("import-keys", "", "record the m_key, sm_key and sa_key of another manager's opensm.conf as OpenSM's keys (docs/key-rotation.md), then exit")
	replaceKeys := flag.Bool("replace-keys", false, "with --import-keys: replace keys already recorded (a rotation)")
	rotateKeys := flag.String("rotate-keys", "", "record new random keys for the listed keys (m_key,sm_key,sa_key; docs/key-rotation.md), then exit")
	showVersion := flag.Bool("version", false, "print the version, the commit and the build date, then exit")
	importNeutron := flag.Bool("import-neutron", false, "record what Neutron has on the InfiniBand physnets and list what it lacks (docs/neutron-import.md), then exit (0: they agree, 5: differences listed)")
	dryRun := flag.Bool("dry-run", false, "with --import-neutron or --move-physnet: print what would change, write nothing")
	prune := flag.Bool("prune", false, "with --import-neutron: also remove what is recorded and Neutron deleted")
	healthcheck := flag.Bool("healthcheck", false, "ask the running manager's /readyz, print its answer, exit 0 only if it is ready")
	adoptFile := flag.String("adopt-partitions", "", "adopt the partitions of this running partitions file (docs/switch-over.md), then exit")
	releasePKey := flag.String("release-adopted", "", "release the adopted members of this pkey, then exit")
	auditFlag := flag.Bool("audit", false, auditHelp)
	movePhysnet := flag.String("move-physnet", "", "move the networks recorded on this physical network, with their ports, to the fabric the configuration now gives it (docs/multi-fabric.md), then exit")
	fab := fabricFlag(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(versionString())
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "alternative-fabric-manager: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	keysCmd := *importKeys != "" || *rotateKeys != ""
	adopting, releasing, moving := *adoptFile != "", *releasePKey != "", *movePhysnet != ""
	// At most one command flag; with one, the manager runs it and exits.
	commands := countTrue(*migrate, *render, *status, *confirm, *showErrs, *clearErrs, *showKeys, *unfreezeFlag,
		*healthcheck, *importKeys != "", *rotateKeys != "", adopting, releasing, *importNeutron, *auditFlag, moving, *acceptMoved != "")
	if commands > 1 || (*asJSON && !*status && !*auditFlag) || (*replaceKeys && *importKeys == "") ||
		(*dryRun && !*importNeutron && !moving) || (*prune && !*importNeutron) {
		fmt.Fprintln(os.Stderr, "alternative-fabric-manager: give at most one command flag (--json goes with --status or --audit, "+
			"--replace-keys with --import-keys, --dry-run with --import-neutron or --move-physnet, --prune with --import-neutron)")
		os.Exit(2)
	}
	checkFabricUse(fab, commands == 0 || *migrate || *healthcheck || *importNeutron)
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := newLogger("json", level)
	slog.SetDefault(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Taken at once, before the configuration and the database are read: a
	// SIGHUP's default action is to end the process, and the manager must
	// survive one (a closed terminal, systemctl reload, a log rotation).
	hup := make(chan os.Signal, 1)
	if commands == 0 {
		signal.Notify(hup, syscall.SIGHUP)
	}
	var err error
	switch {
	case *migrate:
		err = runMigrate(ctx, *configFile, log)
	case *render:
		err = runRender(ctx, *configFile, fab.name, log)
	case *healthcheck:
		err = runHealthcheck(ctx, *configFile)
	case keysCmd:
		err = runKeys(ctx, *configFile, log, keysCommand{importFile: *importKeys, replace: *replaceKeys, rotate: *rotateKeys, fabric: fab.name})
	case adopting:
		err = runAdopt(ctx, *configFile, fab.name, *adoptFile, log, os.Stdout)
	case releasing:
		err = runReleaseAdopted(ctx, *configFile, fab.name, *releasePKey, log, os.Stdout)
	case *auditFlag:
		err = runAuditCommand(ctx, *configFile, fab.name, *asJSON, log, os.Stdout)
	case moving:
		err = runMovePhysnet(ctx, *configFile, fab, *movePhysnet, *dryRun, log, os.Stdout)
	case *importNeutron:
		err = runImportNeutron(ctx, *configFile, neutronimport.Options{DryRun: *dryRun, Prune: *prune}, log)
	case *status || *confirm || *showErrs || *clearErrs || *showKeys || *unfreezeFlag || *acceptMoved != "":
		err = runOperator(ctx, *configFile, log, operatorCommand{status: *status, json: *asJSON,
			confirm: *confirm, showErrors: *showErrs, clearErrors: *clearErrs, showKeys: *showKeys, unfreeze: *unfreezeFlag, acceptMoved: *acceptMoved, fabric: fab.name, everyFabric: !fab.given})
	default:
		err = run(ctx, *configFile, level, hup)
	}
	if code := exitCode(err); code != exitFailed && code != exitUsage {
		os.Exit(code) // a verdict (--status): printed already
	}
	fmt.Fprintf(os.Stderr, "alternative-fabric-manager: %v\n", err)
	os.Exit(exitCode(err))
}

// newLogger logs to standard error as [log] format says: JSON lines for
// machines, or key=value text for people (slog's text handler writes
// durations as 1.5s, not in nanoseconds).
func newLogger(format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

func countTrue(flags ...bool) int {
	n := 0
	for _, f := range flags {
		if f {
			n++
		}
	}
	return n
}

// openStore opens the configured database, migrating it when asked to, with
// a view per fabric (fabrics: each one's rules, the default first); it
// returns the default fabric's view.
func openStore(ctx context.Context, cfg *config.Config, migrate bool, fabrics []store.FabricRules, log *slog.Logger) (*store.Store, error) {
	conn, err := config.ParseConnection(cfg.Database.Connection)
	if err != nil {
		return nil, err
	}
	if conn.Engine == config.EngineSQLite {
		if err := privateSQLite(conn.DSN); err != nil {
			return nil, fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
		}
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := storeopen.OpenFabrics(octx, conn.Engine, conn.DSN, migrate, fabrics, log)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
	}
	return st, nil
}

func runMigrate(ctx context.Context, path string, log *slog.Logger) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg, true, fabricRules(cfg), log)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Println("database is at the newest schema version")
	return nil
}

// loadTemplate reads [opensm] partitions_template, once, or returns the built-in
// template when it is not set.
func loadTemplate(cfg *config.Config) (*partitions.Template, error) {
	path := cfg.OpenSM.PartitionsTemplate
	if path == "" {
		return partitions.BuiltinTemplate(), nil
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("[opensm] partitions_template: %w", err)
	}
	return partitions.ParseTemplate(path, text)
}

// checkRules are the partitions check's configurable rules, for the OpenSM
// that reads the file: only NVIDIA's knows ALL_VCAS.
func checkRules(cfg *config.Config, flavour fabric.Flavour) partitions.Rules {
	return partitions.Rules{SharedDefaultPartition: cfg.OpenSM.SharedDefaultPartition, Flavour: flavour}
}

// run is the manager: wired from its configuration, serving its HTTP
// listeners, and applying while elected, until ctx ends or a server fails.
func run(ctx context.Context, path string, level slog.Level, hup <-chan os.Signal) error {
	cfg, log, err := loadRunConfig(path, level)
	if err != nil {
		return err
	}
	mgr, err := wire(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer mgr.close()
	if err := mgr.listen(); err != nil {
		return err
	}
	errs := mgr.serve()
	electorDone := mgr.elect(ctx)
	reload := newHangup(path, cfg, mgr.certs, mgr.apiServer, log)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			log.Info("stopping")
			done = true
		case err = <-errs:
			log.Error("stopping", "error", err)
			done = true
		case <-hup:
			reload.reload()
		}
	}
	mgr.shutdown(ctx, electorDone)
	return err
}

// loadRunConfig reads the configuration and logs as it says, from now on.
func loadRunConfig(path string, level slog.Level) (*config.Config, *slog.Logger, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	log := newLogger(cfg.Log.Format, level)
	slog.SetDefault(log)
	if err := cfg.CheckToken(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	log.Info("starting", "config", cfg)
	return cfg, log, nil
}

// manager is the running manager's parts, wired from its configuration.
type manager struct {
	cfg   *config.Config
	log   *slog.Logger
	certs *tlsreload.Reloader // nil: the API is served without TLS
	st    *store.Store        // the default fabric's view
	// fabrics are every fabric's OpenSM, applier and election, the default
	// first (fabricrun.go).
	fabrics   []*fabricRun
	metrics   *metrics.Metrics
	apiServer *api.Server
	servers   []*namedServer
	// closers release what wire opened, last first.
	closers []func()
}

// wire opens the database and prepares OpenSM and everything that uses them,
// refusing to start on a certificate, a template or a recorded state the
// configuration makes wrong. Nothing is served yet.
func wire(ctx context.Context, cfg *config.Config, log *slog.Logger) (*manager, error) {
	mgr := &manager{cfg: cfg, log: log}
	wired := false
	defer func() {
		if !wired {
			mgr.close()
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
	if err := checkFabricSites(cfg); err != nil {
		return nil, err
	}
	rules := fabricRules(cfg)
	plans := make([]fabricPlan, len(rules))
	for i, f := range cfg.AllFabrics() {
		if plans[i], err = planFabric(ctx, cfg, f, rules[i].Rules); err != nil {
			return nil, err
		}
		rules[i].Rules = plans[i].rules
	}
	if mgr.st, err = openStore(ctx, cfg, cfg.Database.AutoMigrate, rules, log); err != nil {
		return nil, err
	}
	mgr.closers = append(mgr.closers, func() { mgr.st.Close() })
	// A fabric's first start writes its state rows, whether or not this
	// start migrates (auto_migrate = false: --migrate did): they are rows,
	// not schema.
	if !cfg.Database.AutoMigrate && len(cfg.Fabrics) > 0 {
		if err := mgr.st.EnsureFabrics(ctx); err != nil {
			return nil, fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
		}
	}
	checker := mgr.wireHealth()
	for _, p := range plans {
		view := mgr.st.Fabric(p.fab.Name)
		if view == nil {
			return nil, fmt.Errorf("%s: the database serves no fabric %q", p.fab.Section(), p.fab.Name)
		}
		fr, closeSM, err := wireFabric(ctx, p, view, mgr.metrics, checker, fabricLogger(log, cfg, p.fab.Name))
		mgr.closers = append(mgr.closers, closeSM)
		if err != nil {
			return nil, err
		}
		mgr.fabrics = append(mgr.fabrics, fr)
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

// wireHealth makes the metrics and the health checks; each fabric adds the
// liveness of its applier's loop.
func (mgr *manager) wireHealth() *health.Checker {
	mgr.metrics = metrics.New()
	// The leader writes its heartbeat every elector CheckInterval.
	return &health.Checker{DB: mgr.st, Self: mgr.metrics.Fabric(config.DefaultFabric), HeartbeatTimeout: leader.HeartbeatTimeout}
}

// registerState registers each fabric's collectors that read its recorded
// state, and the OpenSM its health checks watch; each fabric's series carry
// its name.
func (mgr *manager) registerState(checker *health.Checker) error {
	m := mgr.metrics
	for _, fr := range mgr.fabrics {
		f, sm := m.Fabric(fr.name), supervisorView{fr.sm}
		if fr.name == config.DefaultFabric {
			checker.SM = sm
		} else {
			checker.Fabrics = append(checker.Fabrics, health.Fabric{Name: fr.name, DB: fr.st, Self: f, SM: sm})
		}
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
func (mgr *manager) wireAPI(checker *health.Checker) error {
	cfg, log, m := mgr.cfg, mgr.log, mgr.metrics
	opts := api.Options{Prefix: cfg.API.Prefix, Domain: cfg.API.Domain, Token: cfg.API.Token,
		AccessLog: cfg.API.AccessLog, Health: checker, Observer: m}
	if cfg.API.MetricsListen == "" {
		opts.Metrics = m.Handler()
	}
	opts.MetricsToken, opts.MetricsOpen = cfg.API.MetricsToken, cfg.API.MetricsOpen()
	if cfg.API.MetricsToken == "" && !opts.MetricsOpen {
		log.Warn("/metrics refuses every scrape: it is served on an address other than loopback and [api] metrics_token "+
			"is not set (docs/operations.md)", "listen", cmp.Or(cfg.API.MetricsListen, cfg.API.Listen))
	}
	// Every fabric's pkeys API, through its store view.
	pkeys, writeTimeout, err := pkeysAPIs(cfg, mgr.st, 30*time.Second)
	if err != nil {
		return err
	}
	opts.PKeys = pkeys
	mgr.apiServer = api.New(opts, mgr.st, log)
	mgr.servers = listeners(cfg, mgr.apiServer, m.Handler(), mgr.certs, writeTimeout, log)
	return nil
}

// listen binds every listener, or none.
func (mgr *manager) listen() error {
	for _, s := range mgr.servers {
		if err := s.listen(); err != nil {
			for _, o := range mgr.servers {
				o.close()
			}
			return err
		}
		mgr.log.Info("serving "+s.name, "listen", s.ln.Addr().String(), "tls", s.tls)
	}
	mgr.log.Info("API routes", "prefix", mgr.cfg.API.Prefix, "domain", mgr.cfg.API.Domain)
	return nil
}

// serve serves every listener; a server that fails sends why on the channel.
func (mgr *manager) serve() <-chan error {
	errs := make(chan error, len(mgr.servers))
	for _, s := range mgr.servers {
		go func() {
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("%s server: %w", s.name, err)
			}
		}()
	}
	return errs
}

// electorCheckInterval is how often the applier lock's holder checks it,
// and writes its heartbeat.
const electorCheckInterval = leader.ManagerCheckInterval

// elect campaigns for every fabric until ctx ends, each applying while
// elected; the channel is closed once every election has stopped.
func (mgr *manager) elect(ctx context.Context) <-chan struct{} {
	return electAll(ctx, mgr.fabrics, mgr.cfg.HA)
}

// shutdown stops serving, waits a while for the elections to stop (and with
// them the appliers), then stops every OpenSM.
func (mgr *manager) shutdown(ctx context.Context, electorDone <-chan struct{}) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, s := range mgr.servers {
		_ = s.srv.Shutdown(sctx)
	}
	select {
	case <-electorDone:
	case <-sctx.Done():
	}
	stopAll(context.WithoutCancel(ctx), mgr.fabrics)
}

// close releases what wire opened: OpenSM's driver, then the database.
func (mgr *manager) close() {
	for i := len(mgr.closers) - 1; i >= 0; i-- {
		mgr.closers[i]()
	}
}

// applierObserver tells the metrics of every apply, and liveness of every
// turn of the applier's loop.
type applierObserver struct {
	*metrics.Fabric
	loop *health.Loop
}

func (o applierObserver) Alive() { o.loop.Beat() }

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

// supervisorView shows OpenSM's supervisor's status to the health checks and
// the metrics. An error is reported only while it keeps OpenSM from running:
// a supervisor that restarted OpenSM and runs it again is healthy.
type supervisorView struct{ sm *opensm.Supervisor }

func (d supervisorView) Running() bool { return d.sm.Status().State == opensm.StateRunning }
func (d supervisorView) Restarts() int { return d.sm.Restarts() }
func (d supervisorView) State() string { return string(d.sm.Status().State) }

func (d supervisorView) LastError() error {
	st := d.sm.Status()
	if (st.State != opensm.StateFailed && st.State != opensm.StateRestarting) || st.LastError == "" {
		return nil
	}
	return fmt.Errorf("OpenSM driver %s: %s", st.State, st.LastError)
}

// stopOpenSM stops OpenSM and waits for it, for a little longer than its
// SIGKILL deadline.
func stopOpenSM(ctx context.Context, sm *opensm.Supervisor, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := sm.Stop(ctx); err != nil {
		log.Error("stop OpenSM", "error", err)
	}
}

// prepareOpenSM writes opensm.conf, with the hardening options the running
// OpenSM knows and the keys from keys, and the per-module logging file, and
// returns the supervisor of what runs or signals OpenSM ([opensm] driver),
// started by the first term, and what writes opensm.conf again with the keys
// as they are then. The OpenSMs it starts get cacheDir as OSM_CACHE_DIR
// ("": OpenSM's own; cacheDirOf). Whatever it needs is checked here, before
// anything starts: a bad setting is a start-up error.
func prepareOpenSM(ctx context.Context, cfg *config.Config, log *slog.Logger, keys opensm.KeySource, cacheDir string) (
	sm *opensm.Supervisor, flavour fabric.Flavour, closeSM func(), writeConf func(context.Context) error, err error) {
	dir := cfg.OpenSM.ConfigDir
	if err := privateDir(dir, log); err != nil {
		return nil, 0, nil, nil, fmt.Errorf("[opensm] config_dir: %w", err)
	}
	perModule := filepath.Join(dir, "per-module-logging.conf")
	if err := opensm.WriteFileAtomic(perModule, opensm.PerModuleLoggingConf(), 0o644); err != nil {
		return nil, 0, nil, nil, err
	}
	confFile := filepath.Join(dir, "opensm.conf")
	sm, flavour, closeSM, err = newSupervisor(ctx, cfg, confFile, cacheDir, log)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	hardening := cfg.OpenSM.Hardening
	log.Info("OpenSM hardening", "flavour", flavour.String(), "groups", hardening.Groups)
	for _, g := range hardening.Unwritten(flavour) {
		log.Warn("hardening group has no effect on this OpenSM", "group", g, "flavour", flavour.String())
	}
	pass := make([]opensm.KeyValue, 0, len(cfg.OpenSMConf))
	for _, kv := range cfg.OpenSMConf {
		pass = append(pass, opensm.KeyValue{Key: kv.Key, Value: kv.Value})
	}
	writeConf = func(ctx context.Context) error {
		k, err := keys.Keys(ctx)
		if err != nil {
			return err
		}
		return opensm.WriteConf(confFile, opensm.ConfOptions{
			PartitionsFile:       filepath.Join(dir, "partitions.conf"),
			LogFile:              cfg.OpenSM.LogFile,
			PerModuleLoggingFile: perModule,
			DumpFilesDir:         dir,
			Hardening:            hardening,
			Flavour:              flavour,
			Keys:                 k,
			Passthrough:          pass,
		})
	}
	if err := writeConf(ctx); err != nil {
		closeSM()
		return nil, 0, nil, nil, err
	}
	return sm, flavour, closeSM, writeConf, nil
}

// newSupervisor returns the supervisor of OpenSM run or watched the way
// [opensm] driver says (a child process, a container of its own, or someone
// else's container), the flavour of that OpenSM, and what releases the
// supervisor's resources.
func newSupervisor(ctx context.Context, cfg *config.Config, confFile, cacheDir string, log *slog.Logger) (*opensm.Supervisor, fabric.Flavour, func(), error) {
	o := cfg.OpenSM
	if o.Driver == config.DriverProcess {
		flavour, err := opensm.DetectFlavour(ctx, o.Command)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("[opensm] command: %w", err)
		}
		return opensm.NewProcess(opensm.ProcessConfig{Command: o.Command, ConfFile: confFile,
			EnvFile: o.EnvFile, Dir: o.ConfigDir, CacheDir: cacheDir, LogFile: o.LogFile,
			StatusFile: supervisorStatusFile(cfg), Logger: log}), flavour, func() {}, nil
	}
	cli, err := smcontainer.Connect(ctx)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("[opensm] driver = %s: %w", o.Driver, err)
	}
	closeCli := func() { cli.Close() }
	var sm *opensm.Supervisor
	var flavour fabric.Flavour
	switch o.Driver {
	case config.DriverManaged:
		sm, flavour, err = smcontainer.PrepareManaged(ctx, smcontainer.ManagedConfig{Client: cli, Name: o.Container,
			Manager: o.ManagerContainer, Image: o.Image, Command: o.Command, ConfFile: confFile, EnvFile: o.EnvFile,
			ConfigDir: o.ConfigDir, CacheDir: cacheDir, LogFile: o.LogFile, StatusFile: supervisorStatusFile(cfg), Logger: log})
	case config.DriverDocker:
		sm, flavour, err = smcontainer.PrepareExternal(ctx, smcontainer.ExternalConfig{Client: cli, Name: o.Container,
			ConfigDir: o.ConfigDir, LogFile: o.LogFile, StatusFile: supervisorStatusFile(cfg), Logger: log}, o.Command)
	default:
		err = fmt.Errorf("unknown driver %q", o.Driver)
	}
	if err != nil {
		closeCli()
		return nil, 0, nil, fmt.Errorf("[opensm] driver = %s: %w", o.Driver, err)
	}
	return sm, flavour, closeCli, nil
}
