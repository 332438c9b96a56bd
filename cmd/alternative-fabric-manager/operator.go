package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
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
	// fabric is --fabric's name; everyFabric is --status without --fabric.
	fabric      string
	everyFabric bool
}

// unreachableError is a database that could not be opened.
type unreachableError struct {
	cfg *config.Config
	err error
}

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// runOperator runs one operator command, printing to standard output. With the
// database unreachable, --status still shows this host's OpenSM driver of each
// fabric it covers: OpenSM keeps running through the outage.
func runOperator(ctx context.Context, path string, log *slog.Logger, c operatorCommand) error {
	if c.status && c.everyFabric {
		return runStatusOfEveryFabric(ctx, path, log, c.json)
	}
	err := withOperatorStore(ctx, path, c.fabric, log, func(ctx context.Context, f operatorFabric, st *store.Store) error {
		return runOperatorCommand(ctx, f, st, c)
	})
	if ue := (*unreachableError)(nil); c.status && !c.json && errors.As(err, &ue) {
		if f, ferr := selectFabric(ue.cfg, c.fabric); ferr == nil {
			printDriverOf(os.Stdout, []operatorFabric{f})
		}
	}
	return err
}

// runOperatorCommand runs c on fabric f, whose view of the store is st.
func runOperatorCommand(ctx context.Context, f operatorFabric, st *store.Store, c operatorCommand) error {
	w, cfg := os.Stdout, f.cfg
	switch {
	case c.status:
		return runStatus(ctx, []operatorFabric{f}, []*store.Store{st}, w, c.json)
	case c.confirm:
		return confirmSwitches(ctx, cfg, st, w)
	case c.showErrors:
		return showEnforcementErrors(ctx, st, w)
	case c.clearErrors:
		return clearEnforcementErrors(ctx, st, w)
	case c.unfreeze:
		return unfreeze(ctx, cfg, st, w)
	case c.acceptMoved != "":
		return acceptMovedGUIDs(ctx, cfg, st, c.acceptMoved, w)
	case c.showKeys:
		k, err := recordedKeys(ctx, st)
		if err != nil {
			return err
		}
		return printKeys(w, k)
	}
	return errors.New("no operator command given")
}

// printDriverOf writes this host's OpenSM driver line of each fabric, as far
// as it can be read: what --status can say without the database.
func printDriverOf(w io.Writer, fabrics []operatorFabric) {
	for _, f := range fabrics {
		d, err := opensm.ReadStatus(supervisorStatusFile(f.cfg))
		switch {
		case err != nil:
		case len(fabrics) == 1 && f.name == config.DefaultFabric:
			fmt.Fprintf(w, "OpenSM driver: %s\n", driverLine(d))
		default:
			fmt.Fprintf(w, "fabric %s: OpenSM driver: %s\n", f.name, driverLine(d))
		}
	}
}

// subnetDump is where OpenSM writes its subnet dump: the manager writes
// dump_files_dir = config_dir into opensm.conf.
func subnetDump(cfg *config.Config) string {
	return filepath.Join(cfg.OpenSM.ConfigDir, topology.FileName)
}

// withOperatorStore loads the configuration, picks the fabric named fabric
// (a usageError when it has none such), opens the database without migrating
// it, and runs fn with the fabric's view of the store.
func withOperatorStore(ctx context.Context, path, fabric string, log *slog.Logger,
	fn func(ctx context.Context, f operatorFabric, st *store.Store) error) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	f, err := selectFabric(cfg, fabric)
	if err != nil {
		return err
	}
	return withOperatorDatabase(ctx, cfg, log, func(ctx context.Context, st *store.Store) error {
		v, err := f.view(st)
		if err != nil {
			return err
		}
		return f.wrap(fn(ctx, f, v))
	})
}

// withOperatorDatabase opens the database of cfg without migrating it, and
// runs fn with the store (every fabric's; the default fabric's view).
func withOperatorDatabase(ctx context.Context, cfg *config.Config, log *slog.Logger,
	fn func(ctx context.Context, st *store.Store) error) error {
	st, err := openExisting(ctx, cfg, fabricRules(cfg), operatorConnectTimeout, log)
	if nc := (notReadyError{}); errors.As(err, &nc) {
		return nc
	}
	if err != nil {
		return &unreachableError{cfg: cfg,
			err: fmt.Errorf("database %s is unreachable: %w", config.RedactURL(cfg.Database.Connection), err)}
	}
	defer st.Close()
	if err := fn(ctx, st); err != nil {
		return fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
	}
	return nil
}

// confirmSwitches records the switches of OpenSM's last sweep as the fabric's
// expected switches, replacing the previous set.
func confirmSwitches(ctx context.Context, cfg *config.Config, st *store.Store, w io.Writer) error {
	dump := subnetDump(cfg)
	topo, err := topology.Load(dump)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("OpenSM has not swept yet: %s does not exist; start the manager and try again once OpenSM has brought the subnet up", dump)
	}
	if err != nil {
		return fmt.Errorf("OpenSM's subnet dump: %w (if OpenSM was sweeping, try again)", err)
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
		fmt.Fprintf(w, "  %s  %s  (%d ports)\n", sw.GUID, sw.Description, sw.Ports)
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
		fmt.Fprintf(w, "%s  first seen %s  last seen %s  %d times\n    %s\n", e.SwitchPort(),
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

// Status is what --status --json prints; docs/status.md documents each field.
type Status struct {
	Applier       ApplierStatus    `json:"applier"`
	Revision      int64            `json:"revision"`
	LastApply     *ApplyStatus     `json:"last_apply"`
	Jobs          map[string]int64 `json:"jobs"`
	NotCompleting []string         `json:"not_completing"`
	// Unchecked is what this host could not check (another host's OpenSM
	// or subnet dump): it may hold jobs too.
	Unchecked []string `json:"unchecked"`
	// Driver is this host's OpenSM driver, as the manager last wrote it to
	// <config_dir>/driver-status.json; nil when no manager ever ran here.
	Driver *opensm.Status `json:"driver"`
	// Lease is the HA lease ([ha] ha = true); absent without HA.
	Lease *LeaseStatus `json:"lease,omitempty"`
	// Adopted are the adopted partitions (--adopt-partitions), in pkey order.
	Adopted []AdoptedStatus `json:"adopted"`
	// Audit is the last fabric audit (audit.go).
	Audit *AuditStatus `json:"audit"`
	// OldestOpenJob is when the oldest Pending or Running job was
	// created; nil when every job is done.
	OldestOpenJob *time.Time `json:"oldest_open_job"`
	// ForeignSMs are the subnet managers MASTER by their own SMInfo that
	// master no port, as the leader last saw them (secondsm.go): they hold
	// no job.
	ForeignSMs []ForeignSMStatus `json:"foreign_sms"`
}

// LeaseStatus is the HA lease as --status shows it (docs/ha.md).
type LeaseStatus struct {
	// Holder is the manager holding the lease now, "" when none does (it was
	// released, or it expired); LastHolder took the current term.
	Holder     string     `json:"holder"`
	LastHolder string     `json:"last_holder"`
	Term       int64      `json:"term"`
	ExpiresAt  *time.Time `json:"expires_at"`
	// ExpiresIn is ExpiresAt less the database's clock, in seconds; negative
	// once expired.
	ExpiresIn       *float64 `json:"expires_in_seconds"`
	PreviousHolder  string   `json:"previous_holder"`
	PreviousExpired bool     `json:"previous_expired"`
	// Freeze says why no job completes, "" when not frozen; Check is the
	// manager whose OpenSM to make sure is stopped before --unfreeze.
	Freeze          string `json:"freeze"`
	Check           string `json:"check"`
	UnfreezePending bool   `json:"unfreeze_pending"`
}

func leaseStatus(l store.Lease) *LeaseStatus {
	s := &LeaseStatus{LastHolder: l.Holder, Term: l.Term, ExpiresAt: l.ExpiresAt, PreviousHolder: l.PreviousHolder,
		PreviousExpired: l.PreviousExpired, Freeze: l.Freeze, UnfreezePending: l.UnfreezeRequested}
	if l.Held() {
		s.Holder = l.Holder
	}
	if l.ExpiresAt != nil {
		in := l.ExpiresAt.Sub(l.Now).Seconds()
		s.ExpiresIn = &in
	}
	if l.Freeze != "" {
		s.Check = l.Suspect
		if s.Check == "" {
			s.Check = "any other SM on the fabric"
		}
	}
	return s
}

// supervisorStatusFile is where the manager's OpenSM supervisor reports its
// state (the file's name is older than the supervisor).
func supervisorStatusFile(cfg *config.Config) string {
	return filepath.Join(cfg.OpenSM.ConfigDir, "driver-status.json")
}

// ApplierStatus is the leadership row: who won the applier lock last.
type ApplierStatus struct {
	Holder    string     `json:"holder"`
	Term      int64      `json:"term"`
	Heartbeat *time.Time `json:"heartbeat"`
}

// ApplyStatus is the last apply the applier recorded.
type ApplyStatus struct {
	Revision   int64     `json:"revision"`
	Term       int64     `json:"term"`
	Outcome    string    `json:"outcome"`
	Detail     string    `json:"detail"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// readStatus gathers the status from the database, this host's OpenSM driver
// and OpenSM's subnet dump.
func readStatus(ctx context.Context, cfg *config.Config, st *store.Store) (Status, error) {
	s := Status{NotCompleting: []string{}, Unchecked: []string{}}
	l, err := st.Leadership(ctx)
	if driver.IsNoRows(err) && st.FabricName() != store.DefaultFabric {
		return neverStartedStatus(cfg, s)
	}
	if err != nil {
		return s, err
	}
	s.Applier = ApplierStatus{Holder: l.Holder, Term: l.Term, Heartbeat: l.Heartbeat}
	if err := readProgress(ctx, st, &s); err != nil {
		return s, err
	}
	file := supervisorStatusFile(cfg)
	switch d, err := opensm.ReadStatus(file); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return s, fmt.Errorf("OpenSM driver status: %w", err)
	default:
		s.Driver = &d
	}
	reasons, unchecked := driverReasons(cfg, s.Driver, file)
	s.NotCompleting = append(s.NotCompleting, reasons...)
	s.Unchecked = append(s.Unchecked, unchecked...)
	if why := applierReason(cfg, l, time.Now()); why != "" {
		s.NotCompleting = append(s.NotCompleting, why)
	}
	if s.LastApply != nil && s.LastApply.Outcome != "applied" {
		s.NotCompleting = append(s.NotCompleting, fmt.Sprintf("the last apply, of revision %d, ended %s: %s",
			s.LastApply.Revision, s.LastApply.Outcome, s.LastApply.Detail))
	}
	if err := readVerdict(ctx, cfg, st, nil, &s); err != nil {
		return s, err
	}
	if s.Adopted, err = readAdopted(ctx, cfg, st); err != nil {
		return s, err
	}
	if err := readAuditStatus(ctx, cfg, st, &s); err != nil {
		return s, err
	}
	if err := readSecondSMs(ctx, st, &s); err != nil {
		return s, err
	}
	if cfg.HA.HA {
		return s, readLease(ctx, st, &s)
	}
	return s, nil
}

// neverStartedStatus is the status of a fabric no manager has started: no
// state in the database, which is what holds its jobs; this host's OpenSM
// driver as its file says.
func neverStartedStatus(cfg *config.Config, s Status) (Status, error) {
	s.Jobs = map[string]int64{store.StatusPending: 0, store.StatusRunning: 0, store.StatusCompleted: 0, store.StatusFailed: 0}
	s.Adopted = []AdoptedStatus{}
	s.ForeignSMs = []ForeignSMStatus{}
	s.NotCompleting = append(s.NotCompleting, neverStarted)
	switch d, err := opensm.ReadStatus(supervisorStatusFile(cfg)); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return s, fmt.Errorf("OpenSM driver status: %w", err)
	default:
		s.Driver = &d
	}
	return s, nil
}

// readProgress reads the revision, the last apply and the jobs into s.
func readProgress(ctx context.Context, st *store.Store, s *Status) error {
	var err error
	if s.Revision, err = st.Revision(ctx); err != nil {
		return fmt.Errorf("revision: %w", err)
	}
	a, err := st.LastApply(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return fmt.Errorf("last apply: %w", err)
	default:
		s.LastApply = &ApplyStatus{Revision: a.Revision, Term: a.Term, Outcome: a.Outcome, Detail: a.Detail,
			StartedAt: a.StartedAt.UTC(), FinishedAt: a.FinishedAt.UTC()}
	}
	counts, err := st.CountJobsByStatus(ctx)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	s.Jobs = map[string]int64{store.StatusPending: 0, store.StatusRunning: 0, store.StatusCompleted: 0, store.StatusFailed: 0}
	for status, n := range counts {
		s.Jobs[status] = n
	}
	oldest, err := st.OldestOpenJobs(ctx)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	for _, t := range oldest {
		if s.OldestOpenJob == nil || t.Before(*s.OldestOpenJob) {
			s.OldestOpenJob = &t
		}
	}
	return nil
}

// readLease reads the HA lease into s, with the reasons it gives.
func readLease(ctx context.Context, st *store.Store, s *Status) error {
	leases, err := st.Leases()
	if err != nil {
		return err
	}
	l, err := leases.ReadLease(ctx)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	s.Lease = leaseStatus(l)
	if l.Term > 0 && !l.Held() {
		s.NotCompleting = append(s.NotCompleting, "no manager holds the lease")
	}
	return nil // the freeze is the verdict's (readVerdict)
}

// printStatus writes the status for a person to read.
func printStatus(w io.Writer, s Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if s.Applier.Term == 0 {
		fmt.Fprintln(tw, "applier lock:\tnever held")
	} else {
		heartbeat := "never"
		if s.Applier.Heartbeat != nil {
			heartbeat = s.Applier.Heartbeat.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "applier lock:\t%s, term %d, heartbeat %s\n", s.Applier.Holder, s.Applier.Term, heartbeat)
	}
	fmt.Fprintf(tw, "current revision:\t%d\n", s.Revision)
	if s.LastApply == nil {
		fmt.Fprintln(tw, "last apply:\tnone")
	} else {
		a := s.LastApply
		fmt.Fprintf(tw, "last apply:\trevision %d, %s (%s), finished %s, term %d\n",
			a.Revision, a.Outcome, a.Detail, a.FinishedAt.Format(time.RFC3339), a.Term)
	}
	fmt.Fprintf(tw, "jobs:\tPending %d, Running %d, Completed %d, Failed %d\n", s.Jobs[store.StatusPending],
		s.Jobs[store.StatusRunning], s.Jobs[store.StatusCompleted], s.Jobs[store.StatusFailed])
	if s.OldestOpenJob == nil {
		fmt.Fprintln(tw, "oldest open job:\tnone")
	} else {
		fmt.Fprintf(tw, "oldest open job:\tcreated %s\n", s.OldestOpenJob.Format(time.RFC3339))
	}
	if l := s.Lease; l != nil {
		printLease(tw, l)
	}
	printAdopted(tw, s.Adopted)
	printAuditStatus(tw, s.Audit)
	printForeignSMs(tw, s.ForeignSMs) // secondsm.go
	if d := s.Driver; d == nil {
		fmt.Fprintln(tw, "OpenSM driver:\tno manager has run on this host")
	} else {
		fmt.Fprintf(tw, "OpenSM driver:\t%s\n", driverLine(*d))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.NotCompleting) > 0 {
		fmt.Fprintf(w, "jobs do not complete:\n  - %s\n", strings.Join(s.NotCompleting, "\n  - "))
	}
	if len(s.Unchecked) > 0 {
		fmt.Fprintf(w, "cannot be checked from this host:\n  - %s\n", strings.Join(s.Unchecked, "\n  - "))
	}
	if len(s.NotCompleting) == 0 && len(s.Unchecked) == 0 {
		fmt.Fprintln(w, "jobs complete: every gate is open")
	}
	return nil
}

// printLease writes the HA lease's lines of --status.
func printLease(w io.Writer, l *LeaseStatus) {
	expiry := ""
	if l.ExpiresAt != nil && l.ExpiresIn != nil {
		expiry = fmt.Sprintf(", expires %s (in %.1f s)", l.ExpiresAt.Format(time.RFC3339), *l.ExpiresIn)
	}
	switch {
	case l.Term == 0:
		fmt.Fprintln(w, "lease:\tnever taken")
	case l.Holder != "":
		fmt.Fprintf(w, "lease:\theld by %s, term %d%s\n", l.Holder, l.Term, expiry)
	case l.ExpiresAt == nil:
		fmt.Fprintf(w, "lease:\tfree (released by %s, term %d)\n", l.LastHolder, l.Term)
	default:
		fmt.Fprintf(w, "lease:\tfree: expired, not released, by %s, term %d%s\n", l.LastHolder, l.Term, expiry)
	}
	if l.PreviousHolder != "" {
		how := "released"
		if l.PreviousExpired {
			how = "expired instead of being released"
		}
		fmt.Fprintf(w, "previous lease:\t%s, %s\n", l.PreviousHolder, how)
	}
	if l.Freeze == "" {
		fmt.Fprintln(w, "freeze:\tnone")
		return
	}
	fmt.Fprintf(w, "freeze:\tFROZEN: check %s\n", l.Check)
	if l.UnfreezePending {
		fmt.Fprintln(w, "unfreeze:\tpending: requested, not yet taken by the leader (its OpenSM is not master yet)")
	} else {
		fmt.Fprintln(w, "unfreeze:\tnot requested: once that OpenSM is stopped, run --unfreeze")
	}
}

// unfreeze records an operator's --unfreeze.
func unfreeze(ctx context.Context, cfg *config.Config, st *store.Store, w io.Writer) error {
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

// driverLine is the driver's status on one line.
func driverLine(d opensm.Status) string {
	line := fmt.Sprintf("%s since %s, %d restarts", d.State, d.Since.Format(time.RFC3339), d.Restarts)
	if d.PID != 0 {
		line += fmt.Sprintf(", pid %d", d.PID)
	}
	if d.LastError != "" {
		line += fmt.Sprintf("; last error at %s: %s", d.LastErrorAt.Format(time.RFC3339), d.LastError)
	}
	return line
}
