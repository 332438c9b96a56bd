package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// Database is what a scrape reads from the database.
type Database interface {
	Revision(ctx context.Context) (int64, error)
	CountJobsByStatus(ctx context.Context) (map[string]int64, error)
	Leadership(ctx context.Context) (store.Leadership, error)
	EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error)
}

// OldestOpenJobs is read when the database offers it: the creation time of the
// oldest job of each open status (Pending, Running); a status without open
// jobs is absent.
type OldestOpenJobs interface {
	OldestOpenJobs(ctx context.Context) (map[string]time.Time, error)
}

// Gates say why jobs may not complete now (verdict.Source: the verdict on
// what the database records, as --status judges it).
type Gates interface {
	Closed(ctx context.Context) ([]verdict.Reason, error)
}

// Supervisor is what runs OpenSM as a scrape sees it (opensm.Supervisor).
type Supervisor interface {
	Running() bool
	Restarts() int
}

// SupervisorState is read when the supervisor offers it: a word for what it is doing
// (starting, running, restarting, stopped, ...) and its last error, nil when
// none.
type SupervisorState interface {
	State() string
	LastError() error
}

// Lease is read when leadership has one: when the current holder's lease
// expires.
type Lease interface {
	LeaseExpiry(ctx context.Context) (time.Time, error)
}

// State is a collector that reads one fabric's state at each scrape, every
// series labelled with the fabric. Gates and the supervisor are read only
// while this process leads the fabric: a follower has no OpenSM and no subnet
// dump of its own. Nil fields are skipped. Each fabric registers its own
// State, built with its store view (store.Store.Fabric) and its handle.
type State struct {
	Fabric *Fabric // the fabric's handle (Metrics.Fabric): its name and what this process knows of it
	DB     Database
	Gates  Gates
	SM     Supervisor
	Lease  Lease
	// Ready is the fabric's readiness (health.Checker), exported as
	// afm_ready; nil: not exported.
	Ready   func(ctx context.Context) bool
	Timeout time.Duration // for the whole scrape's reads; 0: 5 s

	once  sync.Once
	descs map[*gaugeSpec]*prometheus.Desc
}

// gaugeSpec is one of State's gauges: its name without the namespace, its
// help, and the labels it is sent with besides the fabric.
type gaugeSpec struct {
	name, help string
	labels     []string
}

// desc is spec's description for fabric: the fabric is a constant label, so
// that each fabric's collector describes series of its own.
func (g *gaugeSpec) desc(fabric string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_"+g.name, g.help, g.labels, prometheus.Labels{FabricLabel: fabric})
}

// The gauges State sends, one a line: name, help, labels.
var (
	specReady            = &gaugeSpec{"ready", "1 when the fabric is ready (/readyz lists the reasons when 0), else 0.", nil}
	specDatabaseUp       = &gaugeSpec{"database_up", "1 when this scrape could read the fabric's state from the database, else 0.", nil}
	specJobs             = &gaugeSpec{"jobs", "Jobs kept in the database, by status (Pending, Running, Completed, Failed).", []string{"status"}}
	specJobOldest        = &gaugeSpec{"job_oldest_age_seconds", "Age of the oldest job of each open status (Pending, Running); 0 when there is none.", []string{"status"}}
	specRevisionRecorded = &gaugeSpec{"revision_recorded", "The newest revision of the recorded state.", nil}
	specRevisionApplied  = &gaugeSpec{"revision_applied", "The revision this process, as the leader, last saw OpenSM apply; absent on a follower and before the term's first apply.", nil}
	specLastApplyFailed  = &gaugeSpec{"last_apply_failed", "1 when this leader's last apply had another outcome than applied, else 0; absent on a follower.", nil}
	specTerm             = &gaugeSpec{"leader_term", "The current leadership term in the database.", nil}
	specHeartbeat        = &gaugeSpec{"leader_heartbeat_timestamp_seconds", "When the current term's holder last wrote its heartbeat (Unix time).", nil}
	specLeaseExpiry      = &gaugeSpec{"leader_lease_expiry_timestamp_seconds", "When the current holder's lease expires (Unix time).", nil}
	specGate             = &gaugeSpec{"gate_closed", "1 for each reason jobs do not complete now, as the leader evaluates the gates; gate is the kind of reason.", []string{"gate", "reason"}}
	specGatesClosed      = &gaugeSpec{"gates_closed", "How many reasons jobs do not complete now; absent on a follower.", nil}
	specEnforcement      = &gaugeSpec{"enforcement_errors", "Switch ports recorded as having had their partition enforcement cleared (see --show-enforcement-errors).", nil}
	specSMUp             = &gaugeSpec{"opensm_up", "1 while OpenSM runs as this leader's child, else 0; absent on a follower.", nil}
	specSMRestarts       = &gaugeSpec{"opensm_restarts_total", "Times OpenSM was started again after it exited, since this process started.", nil}
	specSMState          = &gaugeSpec{"opensm_driver_state", "1 for the state the OpenSM driver is in.", []string{"state"}}
	specSMError          = &gaugeSpec{"opensm_driver_error", "1 while the OpenSM driver's last operation failed, else 0.", nil}

	stateSpecs = []*gaugeSpec{specReady, specDatabaseUp, specJobs, specJobOldest, specRevisionRecorded,
		specRevisionApplied, specLastApplyFailed, specTerm, specHeartbeat, specLeaseExpiry, specGate,
		specGatesClosed, specEnforcement, specSMUp, specSMRestarts, specSMState, specSMError}
)

// desc is spec's description for this State's fabric.
func (s *State) desc(spec *gaugeSpec) *prometheus.Desc {
	s.once.Do(func() {
		s.descs = map[*gaugeSpec]*prometheus.Desc{}
		for _, g := range stateSpecs {
			s.descs[g] = g.desc(s.Fabric.Name())
		}
	})
	return s.descs[spec]
}

// Describe sends the descriptions of every metric State may send.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range stateSpecs {
		ch <- s.desc(g)
	}
}

// scrapeContext bounds a scrape's database reads: timeout, or 5 s.
func scrapeContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return context.WithTimeout(context.Background(), timeout)
}

// Collect reads the state. A read that fails counts a database error and
// leaves its metrics out of this scrape: a missing series is honest, a zero
// would claim that nothing waits.
func (s *State) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := scrapeContext(s.Timeout)
	defer cancel()
	gauge := func(g *gaugeSpec, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(s.desc(g), prometheus.GaugeValue, v, labels...)
	}
	failed := func(op string) { s.Fabric.m.DatabaseError(op) }
	if s.Ready != nil {
		gauge(specReady, bool01(s.Ready(ctx)))
	}

	up := true
	if rev, err := s.DB.Revision(ctx); err != nil {
		up = false
		failed("scrape_revision")
	} else {
		gauge(specRevisionRecorded, float64(rev))
	}
	gauge(specDatabaseUp, bool01(up))
	if up {
		s.collectJobs(ctx, gauge, failed)
		if l, err := s.DB.Leadership(ctx); err != nil {
			failed("scrape_leadership")
		} else {
			gauge(specTerm, float64(l.Term))
			if l.Heartbeat != nil {
				gauge(specHeartbeat, float64(l.Heartbeat.UnixNano())/1e9)
			}
		}
		if errs, err := s.DB.EnforcementErrors(ctx); err != nil {
			failed("scrape_enforcement_errors")
		} else {
			gauge(specEnforcement, float64(len(errs)))
		}
		if s.Lease != nil {
			if exp, err := s.Lease.LeaseExpiry(ctx); err != nil {
				failed("scrape_lease")
			} else if !exp.IsZero() {
				gauge(specLeaseExpiry, float64(exp.UnixNano())/1e9)
			}
		}
	}

	if s.SM != nil {
		// The counter is this process' and exists on every node.
		ch <- prometheus.MustNewConstMetric(s.desc(specSMRestarts), prometheus.CounterValue, float64(s.SM.Restarts()))
	}
	if s.Fabric.LeaderTerm() == 0 {
		return
	}
	if rev := s.Fabric.appliedRevision.Load(); rev >= 0 {
		gauge(specRevisionApplied, float64(rev))
	}
	gauge(specLastApplyFailed, bool01(s.Fabric.LastApplyFailed()))
	if s.SM != nil {
		gauge(specSMUp, bool01(s.SM.Running()))
		if d, ok := s.SM.(SupervisorState); ok {
			gauge(specSMState, 1, d.State())
			gauge(specSMError, bool01(d.LastError() != nil))
		}
	}
	if s.Gates != nil && up {
		reasons, err := s.Gates.Closed(ctx)
		if err != nil {
			failed("scrape_gates")
			return
		}
		gauge(specGatesClosed, float64(len(reasons)))
		for _, r := range reasons {
			gauge(specGate, 1, string(r.Kind), r.Text)
		}
	}
}

func (s *State) collectJobs(ctx context.Context, gauge func(*gaugeSpec, float64, ...string), failed func(string)) {
	counts, err := s.DB.CountJobsByStatus(ctx)
	if err != nil {
		failed("scrape_jobs")
		return
	}
	for _, status := range []string{store.StatusPending, store.StatusRunning, store.StatusCompleted, store.StatusFailed} {
		gauge(specJobs, float64(counts[status]), status)
	}
	o, ok := s.DB.(OldestOpenJobs)
	if !ok {
		return
	}
	oldest, err := o.OldestOpenJobs(ctx)
	if err != nil {
		failed("scrape_oldest_jobs")
		return
	}
	now := time.Now()
	for _, status := range []string{store.StatusPending, store.StatusRunning} {
		age := 0.0
		if t, ok := oldest[status]; ok {
			age = max(now.Sub(t).Seconds(), 0)
		}
		gauge(specJobOldest, age, status)
	}
}
