// Command alternative-fabric-manager is an InfiniBand fabric manager for
// OpenStack's networking-mlnx: it serves the part of UFM's REST API that
// mlnx_sdn_assist uses and keeps OpenSM's partitions equal to what it recorded.
//
//	alternative-fabric-manager --config-file /etc/alternative-fabric-manager/afm.conf
//	alternative-fabric-manager --config-file ... --migrate   # apply database migrations, then exit
//	alternative-fabric-manager --config-file ... --render    # print the checked partitions file, then exit
//	alternative-fabric-manager --config-file ... --status [--json] | --confirm-switches | --show-keys
//	alternative-fabric-manager --config-file ... --show-enforcement-errors | --clear-enforcement-errors
//	alternative-fabric-manager --config-file ... --unfreeze   # HA: lift a freeze (docs/ha.md)
//
// With --render, the file goes to standard output and the exit status is 0; if the
// template fails or the check refuses the file, the problems go to standard error
// and the exit status is 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/leader"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
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
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "alternative-fabric-manager: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if n := countTrue(*migrate, *render, *status, *confirm, *showErrs, *clearErrs, *showKeys, *unfreezeFlag); n > 1 || (*asJSON && !*status) {
		fmt.Fprintln(os.Stderr, "alternative-fabric-manager: give at most one command flag (--json goes with --status)")
		os.Exit(2)
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *migrate:
		err = runMigrate(ctx, *configFile, log)
	case *render:
		err = runRender(ctx, *configFile, log)
	case *status || *confirm || *showErrs || *clearErrs || *showKeys || *unfreezeFlag:
		err = runOperator(ctx, *configFile, log, operatorCommand{status: *status, json: *asJSON,
			confirm: *confirm, showErrors: *showErrs, clearErrors: *clearErrs, showKeys: *showKeys, unfreeze: *unfreezeFlag})
	default:
		err = run(ctx, *configFile, log)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "alternative-fabric-manager: %v\n", err)
		os.Exit(1)
	}
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
	return store.Rules{PhysicalNetworks: cfg.API.PhysicalNetworks, FlatPKey: cfg.OpenSM.FlatPKey}
}

// openStore opens the configured database, migrating it when asked to.
func openStore(ctx context.Context, cfg *config.Config, migrate bool, rules store.Rules, log *slog.Logger) (*store.Store, error) {
	conn, err := config.ParseConnection(cfg.Database.Connection)
	if err != nil {
		return nil, err
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
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read recorded state: %w", err)
	}
	// The check reads the file as the configured OpenSM would; if it cannot be
	// asked, as the distributions' OpenSM, the stricter one.
	flavour, err := opensm.DetectFlavour(ctx, cfg.OpenSM.Command)
	if err != nil {
		flavour = fabric.Upstream
	}
	_, text, checkErr, err := applier.Render(ctx, snap, applier.Config{DefaultPartition: cfg.OpenSM.DefaultPartition,
		FlatPKey: cfg.OpenSM.FlatPKey, Template: tpl, Rules: checkRules(cfg, flavour)})
	if err != nil {
		return fmt.Errorf("revision %d: %w", snap.Revision, err)
	}
	err = checkErr
	if perr := (*partitions.Error)(nil); errors.As(err, &perr) {
		// One problem per line, all of them: the log line's summary is not enough
		// to repair a template.
		var b strings.Builder
		for _, p := range perr.Problems {
			fmt.Fprintf(&b, "\n  %s", p)
		}
		if perr.Omitted > 0 {
			fmt.Fprintf(&b, "\n  and %d more", perr.Omitted)
		}
		return fmt.Errorf("revision %d renders to a file that fails the check:%s", snap.Revision, b.String())
	}
	if err != nil {
		return fmt.Errorf("revision %d: %w", snap.Revision, err)
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

func run(ctx context.Context, path string, log *slog.Logger) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	log.Info("starting", "config", cfg)
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
	limit := &topology.PortLimit{DumpFile: subnetDump(cfg), Capacity: cfg.OpenSM.SwitchPKeyCapacity, Static: static.PKeysOf}
	rules := storeRules(cfg)
	rules.StaticPKey = static.Name
	rules.PortLimit = func() (store.PortCheck, error) { return limit.Checker() }
	st, err := openStore(ctx, cfg, cfg.Database.AutoMigrate, rules, log)
	if err != nil {
		return err
	}
	defer st.Close()

	sm, flavour, err := prepareOpenSM(ctx, cfg, log, databaseKeys{st})
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	elector := &leader.Elector{Store: st, Holder: fmt.Sprintf("%s pid %d", host, os.Getpid()), Log: log,
		RetryInterval: 2 * time.Second, CheckInterval: time.Second}
	app := &applier.Applier{Store: st, SM: sm, Log: log, Cfg: applier.Config{
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
		PortLimit:        limit,
	}}

	srv := &http.Server{
		Handler:           api.New(api.Options{Prefix: cfg.API.Prefix, Domain: cfg.API.Domain, Token: cfg.API.Token}, st, log),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return fmt.Errorf("[api] listen: %w", err)
	}
	log.Info("serving the API", "listen", ln.Addr().String(), "prefix", cfg.API.Prefix, "domain", cfg.API.Domain)

	errs := make(chan error, 2)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("API server: %w", err)
		}
	}()
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
			LeaseTimeout: cfg.HA.LeaseTimeout, Stop: sm.Stop}
		go func() {
			defer close(electorDone)
			_ = ha.Run(ctx, func(ctx context.Context, term leader.Term) error {
				return app.LeadTerm(ctx, term.ID, term.Taken.Suspect)
			})
		}()
	} else {
		go func() {
			defer close(electorDone)
			_ = elector.Run(ctx, app.Lead)
		}()
	}

	select {
	case <-ctx.Done():
		log.Info("stopping")
	case err = <-errs:
		log.Error("stopping", "error", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	select {
	case <-electorDone:
	case <-sctx.Done():
	}
	stopOpenSM(context.WithoutCancel(ctx), sm, log)
	return err
}

// stopOpenSM stops OpenSM and waits for it, for a little longer than its
// SIGKILL deadline.
func stopOpenSM(ctx context.Context, sm *opensm.Process, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := sm.Stop(ctx); err != nil {
		log.Error("stop OpenSM", "error", err)
	}
}

// prepareOpenSM writes opensm.conf, with the hardening options the running
// OpenSM knows and the keys from keys, and the per-module logging file, and
// returns the process driver that supervises OpenSM (started by the first term).
func prepareOpenSM(ctx context.Context, cfg *config.Config, log *slog.Logger, keys opensm.KeySource) (*opensm.Process, fabric.Flavour, error) {
	if cfg.OpenSM.Driver != "process" {
		return nil, 0, fmt.Errorf("[opensm] driver %q is not supported", cfg.OpenSM.Driver)
	}
	dir := cfg.OpenSM.ConfigDir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, 0, fmt.Errorf("[opensm] config_dir: %w", err)
	}
	perModule := filepath.Join(dir, "per-module-logging.conf")
	if err := opensm.WriteFileAtomic(perModule, opensm.PerModuleLoggingConf(), 0o644); err != nil {
		return nil, 0, err
	}
	flavour, err := opensm.DetectFlavour(ctx, cfg.OpenSM.Command)
	if err != nil {
		return nil, 0, fmt.Errorf("[opensm] command: %w", err)
	}
	hardening := cfg.OpenSM.Hardening
	log.Info("OpenSM hardening", "flavour", flavour.String(), "groups", hardening.Groups)
	for _, g := range hardening.Unwritten(flavour) {
		log.Warn("hardening group has no effect on this OpenSM", "group", g, "flavour", flavour.String())
	}
	k, err := keys.Keys(ctx)
	if err != nil {
		return nil, 0, err
	}
	pass := make([]opensm.KeyValue, 0, len(cfg.OpenSMConf))
	for _, kv := range cfg.OpenSMConf {
		pass = append(pass, opensm.KeyValue{Key: kv.Key, Value: kv.Value})
	}
	confFile := filepath.Join(dir, "opensm.conf")
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
		return nil, 0, err
	}
	return opensm.NewProcess(opensm.ProcessConfig{Command: cfg.OpenSM.Command, ConfFile: confFile,
		EnvFile: cfg.OpenSM.EnvFile, Dir: dir, LogFile: cfg.OpenSM.LogFile,
		StatusFile: driverStatusFile(cfg), Logger: log}), flavour, nil
}
