package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
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

// Gates say why jobs may not complete now (applier.Gates).
type Gates interface {
	Closed(ctx context.Context) ([]applier.GateReason, error)
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

// State is a collector that reads the fabric's state at each scrape. Gates
// and the supervisor are read only while this process leads: a follower has no
// OpenSM and no subnet dump of its own. Nil fields are skipped.
type State struct {
	M     *Metrics
	DB    Database
	Gates Gates
	SM    Supervisor
	Lease Lease
	// Ready is /readyz's verdict (health.Checker), exported as afm_ready; nil:
	// not exported.
	Ready   func(ctx context.Context) bool
	Timeout time.Duration // for the whole scrape's reads; 0: 5 s
}

// gaugeDesc describes one of State's gauges: its name without the namespace,
// its help, and the labels it is sent with.
func gaugeDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
}

// The gauges State sends, one a line: name, help, labels.
var (
	descReady            = gaugeDesc("ready", "1 when /readyz answers 200 (see its reasons when 0), else 0.")
	descDatabaseUp       = gaugeDesc("database_up", "1 when this scrape could read the database, else 0.")
	descJobs             = gaugeDesc("jobs", "Jobs kept in the database, by status (Pending, Running, Completed, Failed).", "status")
	descJobOldest        = gaugeDesc("job_oldest_age_seconds", "Age of the oldest job of each open status (Pending, Running); 0 when there is none.", "status")
	descRevisionRecorded = gaugeDesc("revision_recorded", "The newest revision of the recorded state.")
	descRevisionApplied  = gaugeDesc("revision_applied", "The revision this process, as the leader, last saw OpenSM apply; absent on a follower and before the term's first apply.")
	descLastApplyFailed  = gaugeDesc("last_apply_failed", "1 when this leader's last apply had another outcome than applied, else 0; absent on a follower.")
	descTerm             = gaugeDesc("leader_term", "The current leadership term in the database.")
	descHeartbeat        = gaugeDesc("leader_heartbeat_timestamp_seconds", "When the current term's holder last wrote its heartbeat (Unix time).")
	descLeaseExpiry      = gaugeDesc("leader_lease_expiry_timestamp_seconds", "When the current holder's lease expires (Unix time).")
	descGate             = gaugeDesc("gate_closed", "1 for each reason jobs do not complete now, as the leader evaluates the gates; gate is the kind of reason.", "gate", "reason")
	descGatesClosed      = gaugeDesc("gates_closed", "How many reasons jobs do not complete now; absent on a follower.")
	descEnforcement      = gaugeDesc("enforcement_errors", "Switch ports recorded as having had their partition enforcement cleared (see --show-enforcement-errors).")
	descSMUp             = gaugeDesc("opensm_up", "1 while OpenSM runs as this leader's child, else 0; absent on a follower.")
	descSMRestarts       = gaugeDesc("opensm_restarts_total", "Times OpenSM was started again after it exited, since this process started.")
	descSMState          = gaugeDesc("opensm_driver_state", "1 for the state the OpenSM driver is in.", "state")
	descSMError          = gaugeDesc("opensm_driver_error", "1 while the OpenSM driver's last operation failed, else 0.")
)

// Describe sends the descriptions of every metric State may send.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReady, descDatabaseUp, descJobs, descJobOldest, descRevisionRecorded,
		descRevisionApplied, descLastApplyFailed, descTerm, descHeartbeat, descLeaseExpiry, descGate,
		descGatesClosed, descEnforcement, descSMUp, descSMRestarts, descSMState, descSMError} {
		ch <- d
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
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	failed := func(op string) { s.M.DatabaseError(op) }
	if s.Ready != nil {
		gauge(descReady, bool01(s.Ready(ctx)))
	}

	up := true
	if rev, err := s.DB.Revision(ctx); err != nil {
		up = false
		failed("scrape_revision")
	} else {
		gauge(descRevisionRecorded, float64(rev))
	}
	gauge(descDatabaseUp, bool01(up))
	if up {
		s.collectJobs(ctx, gauge, failed)
		if l, err := s.DB.Leadership(ctx); err != nil {
			failed("scrape_leadership")
		} else {
			gauge(descTerm, float64(l.Term))
			if l.Heartbeat != nil {
				gauge(descHeartbeat, float64(l.Heartbeat.UnixNano())/1e9)
			}
		}
		if errs, err := s.DB.EnforcementErrors(ctx); err != nil {
			failed("scrape_enforcement_errors")
		} else {
			gauge(descEnforcement, float64(len(errs)))
		}
		if s.Lease != nil {
			if exp, err := s.Lease.LeaseExpiry(ctx); err != nil {
				failed("scrape_lease")
			} else if !exp.IsZero() {
				gauge(descLeaseExpiry, float64(exp.UnixNano())/1e9)
			}
		}
	}

	if s.SM != nil {
		// The counter is this process' and exists on every node.
		ch <- prometheus.MustNewConstMetric(descSMRestarts, prometheus.CounterValue, float64(s.SM.Restarts()))
	}
	if s.M.LeaderTerm() == 0 {
		return
	}
	if rev := s.M.appliedRevision.Load(); rev >= 0 {
		gauge(descRevisionApplied, float64(rev))
	}
	gauge(descLastApplyFailed, bool01(s.M.LastApplyFailed()))
	if s.SM != nil {
		gauge(descSMUp, bool01(s.SM.Running()))
		if d, ok := s.SM.(SupervisorState); ok {
			gauge(descSMState, 1, d.State())
			gauge(descSMError, bool01(d.LastError() != nil))
		}
	}
	if s.Gates != nil && up {
		reasons, err := s.Gates.Closed(ctx)
		if err != nil {
			failed("scrape_gates")
			return
		}
		gauge(descGatesClosed, float64(len(reasons)))
		for _, r := range reasons {
			gauge(descGate, 1, string(r.Kind), r.Text)
		}
	}
}

func (s *State) collectJobs(ctx context.Context, gauge func(*prometheus.Desc, float64, ...string), failed func(string)) {
	counts, err := s.DB.CountJobsByStatus(ctx)
	if err != nil {
		failed("scrape_jobs")
		return
	}
	for _, status := range []string{store.StatusPending, store.StatusRunning, store.StatusCompleted, store.StatusFailed} {
		gauge(descJobs, float64(counts[status]), status)
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
		gauge(descJobOldest, age, status)
	}
}
