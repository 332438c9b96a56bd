package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
)

// auditMetrics are the continuous audit's (internal/audit), set by the
// leader's audits only: a follower exposes none of the gauges.
type auditMetrics struct {
	runs        *prometheus.CounterVec
	duration    prometheus.Histogram
	findings    *prometheus.GaugeVec
	breaches    prometheus.Gauge
	lastSuccess prometheus.Gauge
}

// Outcomes of an audit, afm_audit_runs_total's outcome label.
const (
	AuditClean    = "clean"    // nothing found
	AuditFindings = "findings" // something found (see afm_audit_findings)
	AuditError    = "error"    // nothing judged: the dump or the file could not be read
)

func newAuditMetrics(reg *prometheus.Registry) *auditMetrics {
	a := &auditMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "audit_runs_total",
			Help: "Audits of the fabric's P_Key tables against the recorded state, by outcome (clean, findings, error).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "audit_duration_seconds",
			Help:    "Time an audit took: reading every host port's table and the switch port facing it, and comparing.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
		}),
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "audit_findings",
			Help: "Findings of the last audit that judged the fabric, by kind (missing_pkey, foreign_pkey, wrong_membership, switch_not_enforcing, unreachable).",
		}, []string{"kind"}),
		breaches: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "audit_breaches",
			Help: "Findings of the last audit that let a port reach a partition it must not; while above 0 no job completes.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "audit_last_success_timestamp_seconds",
			Help: "When the last audit that judged the fabric finished, in seconds since the epoch (whatever it found).",
		}),
	}
	reg.MustRegister(a.collectors()...)
	return a
}

func (a *auditMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.runs, a.duration, a.findings, a.breaches, a.lastSuccess}
}

// AuditFinished counts an audit (applier.AuditObserver); err: nothing was
// judged, and the last judgement's gauges stay.
func (m *Metrics) AuditFinished(s audit.Summary, err error) {
	a := m.audit
	if err != nil {
		a.runs.WithLabelValues(AuditError).Inc()
		return
	}
	outcome := AuditClean
	if !s.Clean() {
		outcome = AuditFindings
	}
	a.runs.WithLabelValues(outcome).Inc()
	a.duration.Observe(s.Took.Seconds())
	counts := s.Counts()
	for _, k := range audit.Kinds {
		a.findings.WithLabelValues(string(k)).Set(float64(counts[k]))
	}
	a.breaches.Set(float64(len(s.Breaches())))
	a.lastSuccess.Set(float64(s.Started.Add(s.Took).UnixNano()) / 1e9)
}

// leading forgets the last audit's gauges when this process stops leading
// (term 0): a former leader's breaches would otherwise keep the alert firing
// after the new leader found the fabric clean.
func (a *auditMetrics) leading(term int64) {
	if term == 0 {
		a.findings.Reset()
		a.breaches.Set(0)
	}
}
