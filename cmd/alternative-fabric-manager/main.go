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
//	alternative-fabric-manager --config-file ... --unfreeze   # HA: lift a freeze (docs/ha.md)
//	alternative-fabric-manager --config-file ... --healthcheck  # exit 0 only if the running manager is ready
//
// With --render, the file goes to standard output and the exit status is 0; if the
// template fails or the check refuses the file, the problems go to standard error
// and the exit status is 1.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
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
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/health"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/leader"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/metrics"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/smcontainer"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

func main() {
	configFile := flag.String("config-file", config.DefaultPath, "the manager's configuration (INI)")
	migrate := flag.Bool("migrate", false, "apply the database migrations, then exit")
	render := flag.Bool("render", false, "print the partitions file the recorded state renders to (checked), then exit")
	debug := flag.Bool("debug", false, "log at debug level (every HTTP request, OpenSM's filtered output)")
	status := flag.Bool("status", false, "print who applies, the last apply, jobs by status and why jobs do not complete, then exit")
	asJSON := flag.Bool("json", false, "with --status: print it as JSON (fields in docs/status.md)")
	confirm := flag.Bool("confirm-switches", false, "record the switches of OpenSM's last sweep as the fabric's expected switches, then exit")
	showErrs := flag.Bool("show-enforcement-errors", false, "list the switch ports whose partition enforcement OpenSM cleared, then exit")
	clearErrs := flag.Bool("clear-enforcement-errors", false, "forget the recorded enforcement errors, so that jobs complete again, then exit")
	unfreezeFlag := flag.Bool("unfreeze", false, "with [ha] ha = true: lift a freeze once you made sure the OpenSM --status names is stopped (docs/ha.md), then exit")
	showKeys := flag.Bool("show-keys", false, "print OpenSM's M_Key, SM_Key and SA_Key (secrets), then exit")
	showVersion := flag.Bool("version", false, "print the version and commit, then exit")
	healthcheck := flag.Bool("healthcheck", false, "ask the running manager's /readyz, print its answer, exit 0 only if it is ready")
	flag.Parse()
	if *showVersion {
		fmt.Println(versionString())
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "alternative-fabric-manager: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if n := countTrue(*migrate, *render, *status, *confirm, *showErrs, *clearErrs, *showKeys, *unfreezeFlag, *healthcheck); n > 1 || (*asJSON && !*status) {
		fmt.Fprintln(os.Stderr, "alternative-fabric-manager: give at most one command flag (--json goes with --status)")
		os.Exit(2)
	}
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
	if n := countTrue(*migrate, *render, *status, *confirm, *showErrs, *clearErrs, *showKeys, *healthcheck); n == 0 {
		signal.Notify(hup, syscall.SIGHUP)
	}
	var err error
	switch {
	case *migrate:
		err = runMigrate(ctx, *configFile, log)
	case *render:
		err = runRender(ctx, *configFile, log)
	case *healthcheck:
		err = runHealthcheck(ctx, *configFile)
	case *status || *confirm || *showErrs || *clearErrs || *showKeys || *unfreezeFlag:
		err = runOperator(ctx, *configFile, log, operatorCommand{status: *status, json: *asJSON,
			confirm: *confirm, showErrors: *showErrs, clearErrors: *clearErrs, showKeys: *showKeys, unfreeze: *unfreezeFlag})
	default:
		err = run(ctx, *configFile, level, hup)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "alternative-fabric-manager: %v\n", err)
		os.Exit(1)
	}
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

// storeRules are the configured rules a request is recorded by, without the
// template's static partitions and without a port limit: enough for the
// commands that record nothing.
func storeRules(cfg *config.Config) store.Rules {
	return store.Rules{PhysicalNetworks: cfg.API.PhysicalNetworks, FlatPKey: cfg.OpenSM.FlatPKey,
		KubernetesRange: cfg.UFMPKeys.PKeyRange, KubernetesMaxMembersPerPKey: cfg.UFMPKeys.MaxMembersPerPKey,
		KubernetesMaxMembers: cfg.UFMPKeys.MaxMembers}
}

// openStore opens the configured database, migrating it when asked to.
func openStore(ctx context.Context, cfg *config.Config, migrate bool, rules store.Rules, log *slog.Logger) (*store.Store, error) {
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
	st, err := storeopen.Open(octx, conn.Engine, conn.DSN, migrate, rules, log)
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
	st, err := openStore(ctx, cfg, true, storeRules(cfg), log)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Println("database is at the newest schema version")
	return nil
}

func runRender(ctx context.Context, path string, log *slog.Logger) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	return renderPartitions(ctx, cfg, os.Stdout, log)
}

// renderPartitions writes to out the partitions file the recorded state renders
// to with the configured template, once it passes the check; otherwise it writes
// nothing and returns the template's error or every problem the check found. The
// database is migrated only if [database] auto_migrate says so.
func renderPartitions(ctx context.Context, cfg *config.Config, out io.Writer, log *slog.Logger) error {
	tpl, err := loadTemplate(cfg)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg, cfg.Database.AutoMigrate, storeRules(cfg), log)
	if err != nil {
		return err
	}
	defer st.Close()
	// The check reads the file as the configured OpenSM would; if it cannot be
	// asked, as the distributions' OpenSM, the stricter one.
	flavour, err := opensm.DetectFlavour(ctx, cfg.OpenSM.Command)
	if err != nil {
		flavour = fabric.Upstream
	}
	text, err := checkRecordedState(ctx, cfg, st, tpl, flavour)
	if err != nil {
		return err
	}
	_, err = out.Write(text)
	return err
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

func run(ctx context.Context, path string, level slog.Level, hup <-chan os.Signal) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log.Format, level)
	slog.SetDefault(log)
	if err := cfg.CheckToken(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	log.Info("starting", "config", cfg)
	// Before anything is opened or written: a certificate that does not load
	// is a start-up error like a bad key.
	var certs *tlsreload.Reloader
	if cfg.API.TLSCertFile != "" {
		if certs, err = tlsreload.New(cfg.API.TLSCertFile, cfg.API.TLSKeyFile, log); err != nil {
			return fmt.Errorf("[api] tls_cert_file, tls_key_file: %w", err)
		}
	}
	tpl, err := loadTemplate(cfg)
	if err != nil {
		return err
	}
	// Refused when sent: a network whose VLAN ID is a static partition's pkey,
	// and a port whose host port would fill its switch port's pkey table.
	static, err := tpl.Static(ctx, cfg.OpenSM.DefaultPartition, cfg.OpenSM.FlatPKey)
	if err != nil {
		return fmt.Errorf("[opensm] partitions_template: %w", err)
	}
	// One reader of the subnet dump for the API's capacity check, the gates
	// and the metrics: it parses the file only when OpenSM wrote another
	// content.
	dump := topology.NewDump(subnetDump(cfg))
	limit := &topology.PortLimit{DumpFile: subnetDump(cfg), Dump: dump, Capacity: cfg.OpenSM.SwitchPKeyCapacity, Static: static.PKeysOf}
	rules := storeRules(cfg)
	rules.StaticPKey = static.Name
	rules.StaticMember = static.Listing
	rules.PortLimit = func() (store.PortCheck, error) { return limit.Checker() }
	st, err := openStore(ctx, cfg, cfg.Database.AutoMigrate, rules, log)
	if err != nil {
		return err
	}
	defer st.Close()

	sm, flavour, closeSM, err := prepareOpenSM(ctx, cfg, log, databaseKeys{st})
	if err != nil {
		return err
	}
	defer closeSM()
	// A configuration changed under the recorded networks (flat_pkey now a
	// network's VLAN, a static partition on its pkey) would fail every later
	// job: refuse to start, naming them, as for an unknown key.
	if _, err := checkRecordedState(ctx, cfg, st, tpl, flavour); err != nil {
		return err
	}
	host, _ := os.Hostname()
	elector := &leader.Elector{Store: st, Holder: fmt.Sprintf("%s pid %d", host, os.Getpid()), Log: log,
		RetryInterval: 2 * time.Second, CheckInterval: time.Second}
	m := metrics.New()
	gates := applier.Gates{Store: st, SubnetDump: subnetDump(cfg), Dump: dump}
	checker := &health.Checker{DB: st, Self: m, SM: supervisorView{sm},
		// The leader writes its heartbeat every elector CheckInterval.
		HeartbeatTimeout: 10 * elector.CheckInterval}
	m.Registry().MustRegister(&metrics.State{M: m, DB: st, Gates: gates, SM: supervisorView{sm},
		Ready: func(ctx context.Context) bool { return checker.Ready(ctx).OK() }})
	// An apply waits for OpenSM's sweep (sweep_timeout) and, in a burst, for
	// the batch; the loop turns at least every poll and check interval
	// otherwise. Past three sweeps and two checks it is stuck.
	applierLoop := checker.Loop("applier", 3*cfg.OpenSM.SweepTimeout+2*cfg.OpenSM.CheckInterval+time.Minute)
	app := &applier.Applier{Store: st, SM: sm, Log: log, Observer: applierObserver{m, applierLoop}, Cfg: applier.Config{
		PartitionsFile:   filepath.Join(cfg.OpenSM.ConfigDir, "partitions.conf"),
		LogFile:          cfg.OpenSM.LogFile,
		DefaultPartition: cfg.OpenSM.DefaultPartition,
		FlatPKey:         cfg.OpenSM.FlatPKey,
		Template:         tpl,
		Rules:            checkRules(cfg, flavour),
		SweepTimeout:     cfg.OpenSM.SweepTimeout,
		CheckInterval:    cfg.OpenSM.CheckInterval,
		PollInterval:     cfg.Database.PollInterval,
		BatchWindow:      time.Second,
		JobRetention:     cfg.Database.JobRetention,
		SubnetDump:       subnetDump(cfg),
		Dump:             dump,
		PortLimit:        limit,
	}}

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
	opts.PKeys.Prefix = cfg.UFMPKeys.Prefix
	writeTimeout := 30 * time.Second
	if u := cfg.UFMPKeys; u.Enabled() {
		opts.PKeys = api.PKeysOptions{Store: st, Prefix: u.Prefix, Username: u.Username, Password: u.Password,
			ApplyTimeout: u.ApplyTimeout, Version: versionString(), MaxGUIDsPerRequest: u.MaxGUIDsPerRequest,
			MaxConcurrentRequests: u.MaxConcurrentRequests}
		// A pkeys change is answered once applied, up to apply_timeout.
		writeTimeout = max(writeTimeout, u.ApplyTimeout+api.DefaultDBTimeout+5*time.Second)
	}
	apiServer := api.New(opts, st, log)
	servers := listeners(cfg, apiServer, m.Handler(), certs, writeTimeout, log)
	for _, s := range servers {
		if err := s.listen(); err != nil {
			for _, o := range servers {
				o.close()
			}
			return err
		}
		log.Info("serving "+s.name, "listen", s.ln.Addr().String(), "tls", s.tls)
	}
	log.Info("API routes", "prefix", cfg.API.Prefix, "domain", cfg.API.Domain)

	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("%s server: %w", s.name, err)
			}
		}()
	}
	// leading tells the metrics and liveness that this manager applies.
	leading := func(ctx context.Context, term int64, lead func(context.Context) error) error {
		m.Leading(term)
		applierLoop.Active(true)
		defer func() {
			applierLoop.Active(false)
			m.Leading(0)
		}()
		return lead(ctx)
	}
	holder := fmt.Sprintf("%s pid %d", host, os.Getpid())
	electorDone := make(chan struct{})
	if cfg.HA.HA {
		// Several managers: the lease elects (docs/ha.md), and OpenSM runs
		// only while this manager holds it.
		leases, err := st.Leases()
		if err != nil {
			return err
		}
		app.Lease = leases
		ha := &leader.LeaseElector{Leases: leases, TryLock: st.TryLock, Holder: holder, Log: log,
			LeaseTimeout: cfg.HA.LeaseTimeout, Stop: sm.StopTerm}
		go func() {
			defer close(electorDone)
			_ = ha.Run(ctx, func(ctx context.Context, term leader.Term) error {
				return leading(ctx, term.ID, func(ctx context.Context) error {
					return app.LeadTerm(ctx, term.ID, term.Taken.Suspect)
				})
			})
		}()
	} else {
		go func() {
			defer close(electorDone)
			_ = elector.Run(ctx, func(ctx context.Context, term int64) error {
				return leading(ctx, term, func(ctx context.Context) error { return app.Lead(ctx, term) })
			})
		}()
	}

	reload := newHangup(path, cfg, certs, apiServer, log)
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
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.srv.Shutdown(sctx)
	}
	select {
	case <-electorDone:
	case <-sctx.Done():
	}
	stopOpenSM(context.WithoutCancel(ctx), sm, log)
	return err
}

// applierObserver tells the metrics of every apply, and liveness of every
// turn of the applier's loop.
type applierObserver struct {
	*metrics.Metrics
	loop *health.Loop
}

func (o applierObserver) Alive() { o.loop.Beat() }

// listeners are the manager's HTTP servers: the API's (with /metrics unless
// metrics_listen is set), the metrics' and pprof's. The API's and the
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
	name, key, addr string
	srv             *http.Server
	tls             bool
	ln              net.Listener
}

func (s *namedServer) listen() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("[api] %s: %w", s.key, err)
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
// started by the first term. Whatever it needs is checked here, before
// anything starts: a bad setting is a start-up error.
func prepareOpenSM(ctx context.Context, cfg *config.Config, log *slog.Logger, keys opensm.KeySource) (*opensm.Supervisor, fabric.Flavour, func(), error) {
	dir := cfg.OpenSM.ConfigDir
	if err := privateDir(dir, log); err != nil {
		return nil, 0, nil, fmt.Errorf("[opensm] config_dir: %w", err)
	}
	perModule := filepath.Join(dir, "per-module-logging.conf")
	if err := opensm.WriteFileAtomic(perModule, opensm.PerModuleLoggingConf(), 0o644); err != nil {
		return nil, 0, nil, err
	}
	confFile := filepath.Join(dir, "opensm.conf")
	sm, flavour, closeSM, err := newSupervisor(ctx, cfg, confFile, log)
	if err != nil {
		return nil, 0, nil, err
	}
	hardening := cfg.OpenSM.Hardening
	log.Info("OpenSM hardening", "flavour", flavour.String(), "groups", hardening.Groups)
	for _, g := range hardening.Unwritten(flavour) {
		log.Warn("hardening group has no effect on this OpenSM", "group", g, "flavour", flavour.String())
	}
	k, err := keys.Keys(ctx)
	if err != nil {
		closeSM()
		return nil, 0, nil, err
	}
	pass := make([]opensm.KeyValue, 0, len(cfg.OpenSMConf))
	for _, kv := range cfg.OpenSMConf {
		pass = append(pass, opensm.KeyValue{Key: kv.Key, Value: kv.Value})
	}
	if err := opensm.WriteConf(confFile, opensm.ConfOptions{
		PartitionsFile:       filepath.Join(dir, "partitions.conf"),
		LogFile:              cfg.OpenSM.LogFile,
		PerModuleLoggingFile: perModule,
		DumpFilesDir:         dir,
		Hardening:            hardening,
		Flavour:              flavour,
		Keys:                 k,
		Passthrough:          pass,
	}); err != nil {
		closeSM()
		return nil, 0, nil, err
	}
	return sm, flavour, closeSM, nil
}

// newSupervisor returns the supervisor of OpenSM run or watched the way
// [opensm] driver says (a child process, a container of its own, or someone
// else's container), the flavour of that OpenSM, and what releases the
// supervisor's resources.
func newSupervisor(ctx context.Context, cfg *config.Config, confFile string, log *slog.Logger) (*opensm.Supervisor, fabric.Flavour, func(), error) {
	o := cfg.OpenSM
	if o.Driver == config.DriverProcess {
		flavour, err := opensm.DetectFlavour(ctx, o.Command)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("[opensm] command: %w", err)
		}
		return opensm.NewProcess(opensm.ProcessConfig{Command: o.Command, ConfFile: confFile,
			EnvFile: o.EnvFile, Dir: o.ConfigDir, LogFile: o.LogFile, StatusFile: supervisorStatusFile(cfg),
			Logger: log}), flavour, func() {}, nil
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
			ConfigDir: o.ConfigDir, LogFile: o.LogFile, StatusFile: supervisorStatusFile(cfg), Logger: log})
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
