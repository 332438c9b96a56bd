// Package status is the operator's --status: what it reads of a fabric (the
// database, this host's OpenSM driver, OpenSM's subnet dump), the JSON
// contract --status --json prints (docs/status.md documents each field), the
// text an operator reads, and the verdict its exit status carries.
package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Fabric is one fabric as --status reads it: its name, the section that
// configures it (for messages), and its configuration: its own settings
// beside the file's process-wide ones.
type Fabric struct {
	Name, Section string
	Config        config.FabricConfig
}

// Status is what --status --json prints; docs/status.md documents each field.
type Status struct {
	Applier       Applier          `json:"applier"`
	Revision      int64            `json:"revision"`
	LastApply     *Apply           `json:"last_apply"`
	Jobs          map[string]int64 `json:"jobs"`
	NotCompleting []string         `json:"not_completing"`
	// Unchecked is what this host could not check (another host's OpenSM
	// or subnet dump): it may hold jobs too.
	Unchecked []string `json:"unchecked"`
	// Driver is this host's OpenSM driver, as the manager last wrote it to
	// <config_dir>/driver-status.json; nil when no manager ever ran here.
	Driver *opensm.Status `json:"driver"`
	// Lease is the HA lease ([ha] ha = true); absent without HA.
	Lease *Lease `json:"lease,omitempty"`
	// Adopted are the adopted partitions (--adopt-partitions), in pkey order.
	Adopted []Adopted `json:"adopted"`
	// Audit is the last fabric audit.
	Audit *Audit `json:"audit"`
	// OldestOpenJob is when the oldest Pending or Running job was
	// created; nil when every job is done.
	OldestOpenJob *time.Time `json:"oldest_open_job"`
	// ForeignSMs are the subnet managers MASTER by their own SMInfo that
	// master no port, as the leader last saw them: they hold no job.
	ForeignSMs []ForeignSM `json:"foreign_sms"`
	// ReservedHeld are the memberships recorded before their GUID was
	// reserved (a subnet manager's port, [api] reserved_guids): kept, and
	// named here (store.ReservedHeld).
	ReservedHeld []string `json:"reserved_held,omitempty"`

	// Hosts are the confirmed hosts (--confirm-hosts) and where OpenSM's
	// last sweep disagrees with them; absent while none is confirmed.
	Hosts *Hosts `json:"hosts,omitempty"`
}

// Lease is the HA lease as --status shows it (docs/ha.md).
type Lease struct {
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

// Applier is the leadership row: who won the applier lock last.
type Applier struct {
	Holder    string     `json:"holder"`
	Term      int64      `json:"term"`
	Heartbeat *time.Time `json:"heartbeat"`
}

// Apply is the last apply the applier recorded.
type Apply struct {
	Revision   int64     `json:"revision"`
	Term       int64     `json:"term"`
	Outcome    string    `json:"outcome"`
	Detail     string    `json:"detail"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// NeverStarted explains a fabric without state rows.
const NeverStarted = "no manager has started this fabric yet: a manager writes its state when it first starts " +
	"with this configuration"

// ErrNeverStarted refuses a change to a fabric without state rows: what it
// would record has no revision to take, no lease nor keys beside it.
var ErrNeverStarted = errors.New(NeverStarted)

// CheckStarted returns ErrNeverStarted when no manager has started st's
// fabric (it has no state rows), as --status tells it; the one check every
// command that changes a fabric runs before it reads or writes anything.
func CheckStarted(ctx context.Context, st *store.Store) error {
	_, err := st.Leadership(ctx)
	switch {
	case driver.IsNoRows(err):
		return ErrNeverStarted
	case err != nil:
		return fmt.Errorf("the fabric's state: %w", err)
	}
	return nil
}

// Read gathers the status of the fabric cfg configures from its view of the
// store st, this host's OpenSM driver and OpenSM's subnet dump.
func Read(ctx context.Context, cfg config.FabricConfig, st *store.Store) (Status, error) {
	s := Status{NotCompleting: []string{}, Unchecked: []string{}}
	l, err := st.Leadership(ctx)
	if driver.IsNoRows(err) && st.FabricName() != store.DefaultFabric {
		return neverStartedStatus(cfg, s)
	}
	if err != nil {
		return s, err
	}
	s.Applier = Applier{Holder: l.Holder, Term: l.Term, Heartbeat: l.Heartbeat}
	if err := readProgress(ctx, st, &s); err != nil {
		return s, err
	}
	if err := readDriver(cfg, &s); err != nil {
		return s, err
	}
	if why := applierReason(cfg, l, time.Now()); why != "" {
		s.NotCompleting = append(s.NotCompleting, why)
	}
	if s.LastApply != nil && s.LastApply.Outcome != "applied" {
		s.NotCompleting = append(s.NotCompleting, fmt.Sprintf("the last apply, of revision %d, ended %s: %s",
			s.LastApply.Revision, s.LastApply.Outcome, s.LastApply.Detail))
	}
	if err := readRecorded(ctx, cfg, st, &s); err != nil {
		return s, err
	}
	if cfg.HA.HA {
		return s, readLease(ctx, st, &s)
	}
	return s, nil
}

// readDriver reads this host's OpenSM driver into s, with the reasons it
// gives or what it leaves unchecked.
func readDriver(cfg config.FabricConfig, s *Status) error {
	file := cfg.OpenSM.DriverStatusFile()
	switch d, err := opensm.ReadStatus(file); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("OpenSM driver status: %w", err)
	default:
		s.Driver = &d
	}
	reasons, unchecked := driverReasons(cfg, s.Driver, file)
	s.NotCompleting = append(s.NotCompleting, reasons...)
	s.Unchecked = append(s.Unchecked, unchecked...)
	return nil
}

// readRecorded adds what the database records beside the progress: the
// verdict, the adopted partitions, the last audit, the confirmed hosts and
// the foreign SMs.
func readRecorded(ctx context.Context, cfg config.FabricConfig, st *store.Store, s *Status) error {
	if err := readVerdict(ctx, cfg, st, s); err != nil {
		return err
	}
	var err error
	if s.Adopted, err = readAdopted(ctx, cfg, st); err != nil {
		return err
	}
	if err := readAudit(ctx, cfg, st, s); err != nil {
		return err
	}
	if err := readHosts(ctx, cfg, st, s); err != nil {
		return err
	}
	if err := readForeignSMs(ctx, st, s); err != nil {
		return err
	}
	s.ReservedHeld, err = st.ReservedHeld(ctx)
	return err
}

// neverStartedStatus is the status of a fabric no manager has started: no
// state in the database, which is what holds its jobs; this host's OpenSM
// driver as its file says.
func neverStartedStatus(cfg config.FabricConfig, s Status) (Status, error) {
	s.Jobs = map[string]int64{store.StatusPending: 0, store.StatusRunning: 0, store.StatusCompleted: 0, store.StatusFailed: 0}
	s.Adopted = []Adopted{}
	s.ForeignSMs = []ForeignSM{}
	s.NotCompleting = append(s.NotCompleting, NeverStarted)
	switch d, err := opensm.ReadStatus(cfg.OpenSM.DriverStatusFile()); {
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
		s.LastApply = &Apply{Revision: a.Revision, Term: a.Term, Outcome: a.Outcome, Detail: a.Detail,
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

func leaseStatus(l store.Lease) *Lease {
	s := &Lease{LastHolder: l.Holder, Term: l.Term, ExpiresAt: l.ExpiresAt, PreviousHolder: l.PreviousHolder,
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
