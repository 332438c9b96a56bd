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
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/neutronimport"
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
