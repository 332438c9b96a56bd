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
//	alternative-fabric-manager --config-file ... --confirm-hosts   # the host names UFM's hosts API resolves (docs/ufm-clients.md)
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
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/neutronimport"
)

// flags is the command line: the configuration, the command flag given (at
// most one) and what goes with it.
type flags struct {
	configFile                                             string
	migrate, render, debug, status, asJSON, confirm        bool
	showErrs, clearErrs, unfreeze, showKeys, replaceKeys   bool
	showVersion, importNeutron, dryRun, prune, healthcheck bool
	audit                                                  bool
	confirmHosts                                           bool
	acceptMoved, importKeys, rotateKeys                    string
	adoptFile, releasePKey, movePhysnet                    string
	fab                                                    *fabricChoice
	args                                                   []string // what follows the flags: none is expected
}

func main() {
	f, _ := parseFlags(flag.CommandLine, os.Args[1:]) // flag.CommandLine exits on a wrong flag
	if f.showVersion {
		fmt.Println(versionString())
		return
	}
	checkUsage(f)
	level := slog.LevelInfo
	if f.debug {
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
	if f.commands() == 0 {
		signal.Notify(hup, syscall.SIGHUP)
	}
	err := dispatch(ctx, f, log, level, hup)
	if code := exitCode(err); code != exitFailed && code != exitUsage {
		os.Exit(code) // a verdict (--status): printed already
	}
	// An error's lines are the program's; what it quotes may be a tenant's.
	fmt.Fprintf(os.Stderr, "alternative-fabric-manager: %s\n", escape.Lines(err.Error()))
	os.Exit(exitCode(err))
}

// parseFlags defines the manager's flags on fs and parses args with them;
// fs's ErrorHandling decides what a wrong flag does (flag.CommandLine
// exits; the docs' test continues, and reads the error).
func parseFlags(fs *flag.FlagSet, args []string) (*flags, error) {
	f := &flags{}
	fs.StringVar(&f.configFile, "config-file", config.DefaultPath, "the manager's configuration (INI)")
	fs.BoolVar(&f.migrate, "migrate", false, "apply the database migrations, then exit")
	fs.BoolVar(&f.render, "render", false, "print the partitions file the recorded state renders to (checked), then exit")
	fs.BoolVar(&f.debug, "debug", false, "log at debug level (every HTTP request, OpenSM's filtered output)")
	fs.BoolVar(&f.status, "status", false, "print who applies, the last apply, jobs by status and why jobs do not complete, then exit (0: every gate is open, 3: jobs do not complete, 4: cannot tell from this host)")
	fs.BoolVar(&f.asJSON, "json", false, "with --status: print it as JSON (fields in docs/status.md)")
	fs.BoolVar(&f.confirm, "confirm-switches", false, "record the switches of OpenSM's last sweep as the fabric's expected switches, then exit")
	fs.BoolVar(&f.confirmHosts, "confirm-hosts", false, "record the hosts of OpenSM's last sweep (host name and port GUIDs, from each node description) as the fabric's confirmed hosts, the only names UFM's hosts API resolves, then exit")
	fs.BoolVar(&f.showErrs, "show-enforcement-errors", false, "list the switch ports whose partition enforcement OpenSM cleared, then exit")
	fs.StringVar(&f.acceptMoved, "accept-moved-guid", "", "record the switch ports OpenSM's last sweep found these port GUIDs behind (comma separated) as theirs: a host recabled or its HCA moved; forget those not in it (a host gone for good) (docs/runbooks.md), then exit")
	fs.BoolVar(&f.clearErrs, "clear-enforcement-errors", false, "forget the recorded enforcement errors, so that jobs complete again, then exit")
	fs.BoolVar(&f.unfreeze, "unfreeze", false, "with [ha] ha = true: lift a freeze once you made sure the OpenSM --status names is stopped (docs/ha.md), then exit")
	fs.BoolVar(&f.showKeys, "show-keys", false, "print OpenSM's M_Key, SM_Key and SA_Key (secrets), then exit")
	fs.StringVar(&f.importKeys, "import-keys", "", "record the m_key, sm_key and sa_key of another manager's opensm.conf as OpenSM's keys (docs/key-rotation.md), then exit")
	fs.BoolVar(&f.replaceKeys, "replace-keys", false, "with --import-keys: replace keys already recorded (a rotation)")
	fs.StringVar(&f.rotateKeys, "rotate-keys", "", "record new random keys for the listed keys (m_key,sm_key,sa_key; docs/key-rotation.md), then exit")
	fs.BoolVar(&f.showVersion, "version", false, "print the version, the commit and the build date, then exit")
	fs.BoolVar(&f.importNeutron, "import-neutron", false, "record what Neutron has on the InfiniBand physnets and list what it lacks (docs/neutron-import.md), then exit (0: they agree, 5: differences listed)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "with --import-neutron or --move-physnet: print what would change, write nothing")
	fs.BoolVar(&f.prune, "prune", false, "with --import-neutron: also remove what is recorded and Neutron deleted")
	fs.BoolVar(&f.healthcheck, "healthcheck", false, "ask the running manager's /readyz, print its answer, exit 0 only if it is ready")
	fs.StringVar(&f.adoptFile, "adopt-partitions", "", "adopt the partitions of this running partitions file (docs/switch-over.md), then exit")
	fs.StringVar(&f.releasePKey, "release-adopted", "", "release the adopted members of this pkey, then exit")
	fs.BoolVar(&f.audit, "audit", false, auditHelp)
	fs.StringVar(&f.movePhysnet, "move-physnet", "", "move the networks recorded on this physical network, with their ports, to the fabric the configuration now gives it (docs/multi-fabric.md), then exit")
	f.fab = fabricFlag(fs)
	err := fs.Parse(args)
	f.args = fs.Args()
	return f, err
}

// operator is whether one of the commands runOperator answers was given.
func (f *flags) operator() bool {
	return f.status || f.confirm || f.confirmHosts || f.showErrs || f.clearErrs || f.showKeys || f.unfreeze || f.acceptMoved != ""
}

// commands counts the command flags given: with one, the manager runs it and
// exits; with none, it runs as the manager.
func (f *flags) commands() int {
	return countTrue(f.migrate, f.render, f.status, f.confirm, f.showErrs, f.clearErrs, f.showKeys, f.unfreeze,
		f.healthcheck, f.importKeys != "", f.rotateKeys != "", f.adoptFile != "", f.releasePKey != "",
		f.importNeutron, f.audit, f.movePhysnet != "", f.acceptMoved != "", f.confirmHosts)
}

// checkUsage exits with exitUsage on a command line usage refuses.
func checkUsage(f *flags) {
	if err := usage(f); err != nil {
		fmt.Fprintf(os.Stderr, "alternative-fabric-manager: %s\n", err)
		os.Exit(exitUsage)
	}
}

// usage refuses an argument, more than one command flag, a flag given
// without the command it goes with, and --fabric where no one fabric is
// acted on.
func usage(f *flags) error {
	if len(f.args) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", f.args[0])}
	}
	moving := f.movePhysnet != ""
	if f.commands() > 1 || (f.asJSON && !f.status && !f.audit) || (f.replaceKeys && f.importKeys == "") ||
		(f.dryRun && !f.importNeutron && !moving) || (f.prune && !f.importNeutron) {
		return usageError{"give at most one command flag (--json goes with --status or --audit, " +
			"--replace-keys with --import-keys, --dry-run with --import-neutron or --move-physnet, --prune with --import-neutron)"}
	}
	return fabricUse(f.fab, f.commands() == 0 || f.migrate || f.healthcheck || f.importNeutron)
}

// command is one row of the dispatch table: whether the command line asks
// for it, and how it runs.
type command struct {
	given func(f *flags) bool
	run   func(ctx context.Context, f *flags, log *slog.Logger) error
}

// commandTable lists the commands in the order they are tried; the manager
// itself runs when none is given.
var commandTable = []command{
	{func(f *flags) bool { return f.migrate }, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runMigrate(ctx, f.configFile, log)
	}},
	{func(f *flags) bool { return f.render }, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runRender(ctx, f.configFile, f.fab.name, log)
	}},
	{func(f *flags) bool { return f.healthcheck }, func(ctx context.Context, f *flags, _ *slog.Logger) error {
		return runHealthcheck(ctx, f.configFile)
	}},
	{func(f *flags) bool { return f.importKeys != "" || f.rotateKeys != "" }, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runKeys(ctx, f.configFile, log, keysCommand{importFile: f.importKeys, replace: f.replaceKeys, rotate: f.rotateKeys, fabric: f.fab.name})
	}},
	{func(f *flags) bool { return f.adoptFile != "" }, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runAdopt(ctx, f.configFile, f.fab.name, f.adoptFile, log, os.Stdout)
	}},
	{func(f *flags) bool { return f.releasePKey != "" }, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runReleaseAdopted(ctx, f.configFile, f.fab.name, f.releasePKey, log, os.Stdout)
	}},
	{func(f *flags) bool { return f.audit }, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runAuditCommand(ctx, f.configFile, f.fab.name, f.asJSON, log, os.Stdout)
	}},
	{func(f *flags) bool { return f.movePhysnet != "" }, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runMovePhysnet(ctx, f.configFile, f.fab, f.movePhysnet, f.dryRun, log, os.Stdout)
	}},
	{func(f *flags) bool { return f.importNeutron }, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runImportNeutron(ctx, f.configFile, neutronimport.Options{DryRun: f.dryRun, Prune: f.prune}, log)
	}},
	{(*flags).operator, func(ctx context.Context, f *flags, log *slog.Logger) error {
		return runOperator(ctx, f.configFile, log, operatorCommand{status: f.status, json: f.asJSON,
			confirm: f.confirm, confirmHosts: f.confirmHosts, showErrors: f.showErrs, clearErrors: f.clearErrs, showKeys: f.showKeys, unfreeze: f.unfreeze,
			acceptMoved: f.acceptMoved, fabric: f.fab.name, everyFabric: !f.fab.given})
	}},
}

// dispatch runs the command the command line gives, or the manager.
func dispatch(ctx context.Context, f *flags, log *slog.Logger, level slog.Level, hup <-chan os.Signal) error {
	for _, c := range commandTable {
		if c.given(f) {
			return c.run(ctx, f, log)
		}
	}
	return run(ctx, f.configFile, level, hup)
}

// newLogger logs to standard error as [log] format says: JSON lines for
// machines, or key=value text for people (slog's text handler writes
// durations as 1.5s, not in nanoseconds).
func newLogger(format string, level slog.Level) *slog.Logger {
	return newLoggerTo(os.Stderr, format, level)
}

// newLoggerTo is newLogger's logger, writing to w. A logged text may quote a
// tenant's (a network's name in an audit's finding): the text handler
// quotes every value and message with a control or format character as Go
// does (\x1b, \u202e); the JSON handler escapes the C0 controls only, and the
// rest (DEL, C1, U+202E) is escaped on its way out (escape.JSONWriter).
func newLoggerTo(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(escape.JSONWriter(w), opts))
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

func runMigrate(ctx context.Context, path string, log *slog.Logger) error {
	cfg, err := loadCommandConfig(path)
	if err != nil {
		return err
	}
	db, err := openStore(ctx, cfg, true, fabricRules(cfg), log)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Println("database is at the newest schema version")
	return nil
}
