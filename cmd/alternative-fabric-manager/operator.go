package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The operator's commands. Each needs only the configuration file, the
// database and the files in [opensm] config_dir, so they run the same beside a
// running manager (docker exec) and on a bare host. None migrates the database.

// operatorConnectTimeout bounds how long a command waits for the database: an
// operator at a terminal wants an error, not a hang.
const operatorConnectTimeout = 10 * time.Second

// operatorCommand is the command flag given (one at most), and the fabric
// it acts on.
type operatorCommand struct {
	status, json, confirm, showErrors, clearErrors, showKeys, unfreeze bool
	acceptMoved                                                        string // --accept-moved-guid's GUIDs
	confirmHosts                                                       bool
	// fabric is --fabric's name; everyFabric is --status without --fabric.
	fabric      string
	everyFabric bool
}

// unreachableError is a database that could not be opened.
type unreachableError struct {
	cfg *config.Config
	err error
	// drivers is what --status read of this host's OpenSM drivers: said
	// after the database's error, never before it (a "running" line first
	// would read as a status the database did not give).
	drivers string
}

func (e *unreachableError) Error() string {
	if e.drivers == "" {
		return e.err.Error()
	}
	return e.err.Error() + "\nthis host's OpenSM, as its driver last wrote it (the database, which says whether jobs " +
		"complete, could not be read):\n" + strings.TrimSuffix(e.drivers, "\n")
}

// addDrivers adds to err, when it is an unreachable database, the state of
// this host's OpenSM driver of each of fabrics: OpenSM keeps running
// through the outage.
func addDrivers(err error, fabrics []status.Fabric) {
	ue := (*unreachableError)(nil)
	if !errors.As(err, &ue) {
		return
	}
	var b strings.Builder
	status.PrintDrivers(&b, fabrics)
	ue.drivers = b.String()
}
func (e *unreachableError) Unwrap() error { return e.err }

// runOperator runs one operator command, printing to standard output. With the
// database unreachable, --status's error still says, after the database's,
// this host's OpenSM driver of each fabric it covers: OpenSM keeps running
// through the outage.
func runOperator(ctx context.Context, path string, log *slog.Logger, c operatorCommand) error {
	if c.status && c.everyFabric {
		return runStatusOfEveryFabric(ctx, path, log, c.json)
	}
	run := func(ctx context.Context, f operatorFabric, st *store.Store) error {
		return runOperatorCommand(ctx, f, st, c)
	}
	if c.confirm || c.confirmHosts || c.clearErrors || c.unfreeze || c.acceptMoved != "" {
		run = changing(run)
	}
	err := withOperatorStore(ctx, path, c.fabric, log, run)
	if ue := (*unreachableError)(nil); c.status && !c.json && errors.As(err, &ue) {
		if f, ferr := selectFabric(ue.cfg, c.fabric); ferr == nil {
			addDrivers(err, []status.Fabric{f.status()})
		}
	}
	return err
}

// runOperatorCommand runs c on fabric f, whose view of the store is st.
func runOperatorCommand(ctx context.Context, f operatorFabric, st *store.Store, c operatorCommand) error {
	w, cfg := os.Stdout, f.cfg
	switch {
	case c.status:
		return status.Run(ctx, []status.Fabric{f.status()}, []*store.Store{st}, w, c.json, wrapStatus)
	case c.confirm:
		return confirmSwitches(ctx, cfg, st, w)
	case c.confirmHosts:
		return confirmHosts(ctx, cfg, st, w)
	case c.showErrors:
		return showEnforcementErrors(ctx, st, w)
	case c.clearErrors:
		return clearEnforcementErrors(ctx, st, w)
	case c.unfreeze:
		return unfreeze(ctx, cfg, st, w)
	case c.acceptMoved != "":
		return acceptMovedGUIDs(ctx, cfg, st, c.acceptMoved, w)
	case c.showKeys:
		k, err := opensm.RecordedKeys(ctx, st)
		if err != nil {
			return err
		}
		return printKeys(w, k)
	}
	return errors.New("no operator command given")
}

// withOperatorStore loads the configuration, picks the fabric named fabric
// (a usageError when it has none such), opens the database without migrating
// it, and runs fn with the fabric's view of the store.
func withOperatorStore(ctx context.Context, path, fabric string, log *slog.Logger,
	fn func(ctx context.Context, f operatorFabric, st *store.Store) error) error {
	cfg, err := loadCommandConfig(path)
	if err != nil {
		return err
	}
	f, err := selectFabric(cfg, fabric)
	if err != nil {
		return err
	}
	return withOperatorDatabase(ctx, cfg, log, func(ctx context.Context, db *store.DB) error {
		v, err := f.view(db)
		if err != nil {
			return err
		}
		return f.wrap(fn(ctx, f, v))
	})
}

// changing is fn behind the check every command that changes a fabric runs
// first: a fabric no manager has started is refused, as --status says of it
// (status.CheckStarted), before anything is read or recorded.
func changing(fn func(ctx context.Context, f operatorFabric, st *store.Store) error) func(ctx context.Context, f operatorFabric, st *store.Store) error {
	return func(ctx context.Context, f operatorFabric, st *store.Store) error {
		if err := status.CheckStarted(ctx, st); err != nil {
			return err
		}
		return fn(ctx, f, st)
	}
}

// checkEveryStarted is changing's check for the commands whose one
// transaction spans every fabric (--move-physnet bumps each fabric's
// revision, --import-neutron imports into each): one fabric no manager has
// started refuses the command, naming its section, before anything is read
// from Neutron or recorded.
func checkEveryStarted(ctx context.Context, db *store.DB, fabrics []operatorFabric) error {
	for _, f := range fabrics {
		v, err := f.view(db)
		if err != nil {
			return err
		}
		if err := status.CheckStarted(ctx, v); err != nil {
			return f.wrap(err)
		}
	}
	return nil
}

// withOperatorDatabase opens the database of cfg without migrating it, and
// runs fn with the database (every fabric's view).
func withOperatorDatabase(ctx context.Context, cfg *config.Config, log *slog.Logger,
	fn func(ctx context.Context, db *store.DB) error) error {
	db, err := openExisting(ctx, cfg, fabricRules(cfg), operatorConnectTimeout, log)
	if nc := (notReadyError{}); errors.As(err, &nc) {
		return nc
	}
	if err != nil {
		return &unreachableError{cfg: cfg,
			err: fmt.Errorf("database %s is unreachable: %w", config.RedactURL(cfg.Database.Connection), err)}
	}
	defer db.Close()
	if err := fn(ctx, db); err != nil {
		return fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
	}
	return nil
}

// lastSweep reads OpenSM's subnet dump, its last sweep's view of the fabric,
// for a command that confirms what it found.
func lastSweep(cfg config.FabricConfig) (*topology.Topology, error) {
	dump := cfg.OpenSM.SubnetDump()
	topo, err := topology.Load(dump)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("OpenSM has not swept yet: %s does not exist; start the manager and try again once OpenSM has brought the subnet up", dump)
	}
	if err != nil {
		return nil, fmt.Errorf("OpenSM's subnet dump: %w (if OpenSM was sweeping, try again)", err)
	}
	return topo, nil
}

// confirmSwitches records the switches of OpenSM's last sweep as the fabric's
// expected switches, replacing the previous set.
func confirmSwitches(ctx context.Context, cfg config.FabricConfig, st *store.Store, w io.Writer) error {
	topo, err := lastSweep(cfg)
	if err != nil {
		return err
	}
	var switches []store.ExpectedSwitch
	for _, sw := range topo.Switches() {
		switches = append(switches, store.ExpectedSwitch{GUID: sw.GUID, Description: sw.Description})
	}
	if err := st.ConfirmSwitches(ctx, switches); err != nil {
		return err
	}
	fmt.Fprintf(w, "confirmed %d switches as the fabric's expected switches:\n", len(switches))
	for _, sw := range topo.Switches() {
		escape.Fprintf(w, "  %s  %s  (%d ports)\n", sw.GUID, sw.Description, sw.Ports)
	}
	return nil
}

// showEnforcementErrors lists the switch ports whose enforcement OpenSM cleared.
func showEnforcementErrors(ctx context.Context, st *store.Store, w io.Writer) error {
	errs, err := st.EnforcementErrors(ctx)
	if err != nil {
		return err
	}
	if len(errs) == 0 {
		fmt.Fprintln(w, "no enforcement errors recorded")
		return nil
	}
	unattributed := false
	for _, e := range errs {
		escape.Fprintf(w, "%s  first seen %s  last seen %s  %d times\n    %s\n", e.SwitchPort(),
			e.FirstSeen.Format(time.RFC3339), e.LastSeen.Format(time.RFC3339), e.Count, e.Line)
		unattributed = unattributed || e.Switch == store.Unattributed
	}
	if unattributed {
		fmt.Fprintln(w, "unattributed: OpenSM's line named no switch port; read OpenSM's log around it.")
	}
	return nil
}

// clearEnforcementErrors forgets the recorded enforcement errors.
func clearEnforcementErrors(ctx context.Context, st *store.Store, w io.Writer) error {
	n, err := st.ClearEnforcementErrors(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "cleared %d enforcement errors\n", n)
	return nil
}

// unfreeze records an operator's --unfreeze.
func unfreeze(ctx context.Context, cfg config.FabricConfig, st *store.Store, w io.Writer) error {
	if !cfg.HA.HA {
		return errors.New("--unfreeze is for [ha] ha = true: without HA there is no freeze")
	}
	l, err := st.Unfreeze(ctx)
	if err != nil {
		return err
	}
	if l.Freeze == "" {
		_, err := fmt.Fprintln(w, "not frozen: nothing to lift")
		return err
	}
	_, err = fmt.Fprintf(w, "unfreeze requested: the leader (%s, term %d) lifts the freeze once its OpenSM is master; "+
		"--status shows it pending until then\n", l.Holder, l.Term)
	return err
}
