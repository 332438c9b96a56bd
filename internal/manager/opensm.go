package manager

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/smcontainer"
)

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

// prepareOpenSM writes opensm.conf, with the hardening options the running
// OpenSM knows and the keys from keys, and the per-module logging file, and
// returns the supervisor of what runs or signals OpenSM ([opensm] driver),
// started by the first term, and what writes opensm.conf again with the keys
// as they are then. The OpenSMs it starts get cacheDir as OSM_CACHE_DIR
// ("": OpenSM's own; config.Fabric.CacheDir) and report their state in statusFile.
// Whatever it needs is checked here, before anything starts: a bad setting
// is a start-up error.
func prepareOpenSM(ctx context.Context, cfg config.FabricConfig, log *slog.Logger, keys opensm.KeySource, qos *atomic.Bool,
	cacheDir, statusFile string) (
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
	sm, flavour, closeSM, err = newSupervisor(ctx, cfg, confFile, cacheDir, statusFile, log)
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
			QoSPolicyFile:        qosPolicyFile(cfg),
			QoS:                  qos.Load(),
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

// qosPolicyFile is the fabric's QoS policy file, beside its partitions
// file, when the manager owns qos there (a pkeys client may set a QoS); ""
// leaves qos and qos_policy_file to [opensm_conf].
func qosPolicyFile(cfg config.FabricConfig) string {
	if !cfg.OwnsQoS() {
		return ""
	}
	return filepath.Join(cfg.OpenSM.ConfigDir, opensm.QoSPolicyFileName)
}

// openSMUser resolves [opensm] user: nil runs OpenSM as the manager's own
// user (driver process) or the image's (managed), which a root manager of
// the process driver warns of, since OpenSM then holds every right the
// manager has. A user that does not exist stops the start.
func openSMUser(name, driver string, log *slog.Logger) (*opensm.RunAs, error) {
	if name == "" {
		if os.Geteuid() == 0 && driver == config.DriverProcess {
			log.Warn("OpenSM runs as root, the manager's user: it could read the manager's configuration (tokens, " +
				"passwords) and write its database. Set [opensm] user = afm-opensm (docs/security.md)")
		}
		return nil, nil
	}
	u, err := opensm.LookupUser(name)
	if err != nil {
		return nil, fmt.Errorf("[opensm] user: %w", err)
	}
	return u, nil
}

// hiddenFromOpenSM are the manager's files OpenSM run as its own user must
// not reach: the configuration file and the SQLite database (a server
// database's password is in the configuration).
func hiddenFromOpenSM(c *config.Config) []string {
	var hide []string
	if c.File != "" {
		hide = append(hide, c.File)
	}
	if conn, err := config.ParseConnection(c.Database.Connection); err == nil && conn.Engine == config.EngineSQLite {
		hide = append(hide, conn.DSN)
	}
	return hide
}

// newSupervisor returns the supervisor of OpenSM run or watched the way
// [opensm] driver says (a child process, a container of its own, or someone
// else's container), the flavour of that OpenSM, and what releases the
// supervisor's resources.
func newSupervisor(ctx context.Context, cfg config.FabricConfig, confFile, cacheDir, statusFile string, log *slog.Logger) (*opensm.Supervisor, fabric.Flavour, func(), error) {
	o := cfg.OpenSM
	if o.Driver == config.DriverProcess {
		flavour, err := opensm.DetectFlavour(ctx, o.Command)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("[opensm] command: %w", err)
		}
		pc := opensm.ProcessConfig{Command: o.Command, ConfFile: confFile,
			EnvFile: o.EnvFile, Dir: o.ConfigDir, CacheDir: cacheDir, LogFile: o.LogFile,
			StatusFile: statusFile, Hide: hiddenFromOpenSM(cfg.Config), Logger: log}
		if pc.User, err = openSMUser(o.User, o.Driver, log); err != nil {
			return nil, 0, nil, err
		}
		if err := pc.Check(); err != nil {
			return nil, 0, nil, fmt.Errorf("[opensm] user: %w", err)
		}
		return opensm.NewProcess(pc), flavour, func() {}, nil
	}
	user, err := openSMUser(o.User, o.Driver, log)
	if err != nil {
		return nil, 0, nil, err
	}
	if user != nil && o.Driver == config.DriverDocker {
		log.Warn("[opensm] user does nothing with driver = docker: the container's own user runs OpenSM", "user", o.User)
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
			ConfigDir: o.ConfigDir, CacheDir: cacheDir, LogFile: o.LogFile, StatusFile: statusFile, User: user,
			Logger: log})
	case config.DriverDocker:
		sm, flavour, err = smcontainer.PrepareExternal(ctx, smcontainer.ExternalConfig{Client: cli, Name: o.Container,
			ConfigDir: o.ConfigDir, LogFile: o.LogFile, StatusFile: statusFile, Logger: log}, o.Command)
	default:
		err = fmt.Errorf("unknown driver %q", o.Driver)
	}
	if err != nil {
		closeCli()
		return nil, 0, nil, fmt.Errorf("[opensm] driver = %s: %w", o.Driver, err)
	}
	return sm, flavour, closeCli, nil
}
