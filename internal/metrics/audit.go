package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
)

// auditMetrics are the continuous audit's (internal/audit), set by each
// fabric's leader's audits only: a follower exposes none of the findings.
type auditMetrics struct {
	runs        *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	findings    *prometheus.GaugeVec
	breaches    *prometheus.GaugeVec
	heldPorts   *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
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
		}, []string{FabricLabel, "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "audit_duration_seconds",
			Help:    "Time an audit took: reading every host port's table and the switch port facing it, and comparing.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
		}, []string{FabricLabel}),
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "audit_findings",
			Help: "Findings of the last audit that judged the fabric, by kind (missing_pkey, foreign_pkey, wrong_membership, switch_not_enforcing, unreachable).",
		}, []string{FabricLabel, "kind"}),
		breaches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "audit_breaches",
			Help: "Findings of the last audit that let a port reach a partition it must not; while above 0 no job of the fabric completes.",
		}, []string{FabricLabel}),
		heldPorts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "audit_held_port",
			Help: "1 for each host port whose own P_Key table the last audit found lying while the switch port facing it is right and enforces: that port's jobs are held, not the fabric's.",
		}, []string{FabricLabel, "port"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "audit_last_success_timestamp_seconds",
			Help: "When the last audit that judged the fabric finished, in seconds since the epoch (whatever it found).",
		}, []string{FabricLabel}),
	}
	reg.MustRegister(a.collectors()...)
	return a
}

func (a *auditMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.runs, a.duration, a.findings, a.breaches, a.heldPorts, a.lastSuccess}
}

// fabricAudit is one fabric's audit series.
type fabricAudit struct {
	name        string
	runs        *prometheus.CounterVec // curried with the fabric
	findings    *prometheus.GaugeVec   // all fabrics': leading deletes only this one's
	heldPorts   *prometheus.GaugeVec   // all fabrics', as findings
	duration    prometheus.Observer
	breaches    prometheus.Gauge
	lastSuccess prometheus.Gauge
}

// fabric makes fabric name's series. The duration, breaches and last success
// exist from the start, at 0, as the single fabric's always did.
func (a *auditMetrics) fabric(name string) fabricAudit {
	return fabricAudit{
		name:        name,
		runs:        a.runs.MustCurryWith(prometheus.Labels{FabricLabel: name}),
		findings:    a.findings,
		heldPorts:   a.heldPorts,
		duration:    a.duration.WithLabelValues(name),
		breaches:    a.breaches.WithLabelValues(name),
		lastSuccess: a.lastSuccess.WithLabelValues(name),
	}
}

// AuditFinished counts an audit of the fabric (applier.AuditObserver); err:
// nothing was judged, and the last judgement's gauges stay.
func (f *Fabric) AuditFinished(s audit.Summary, err error) {
	a := f.audit
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
		a.findings.WithLabelValues(a.name, string(k)).Set(float64(counts[k]))
	}
	a.breaches.Set(float64(len(s.Breaches())))
	a.heldPorts.DeletePartialMatch(prometheus.Labels{FabricLabel: a.name})
	for port := range s.HeldPorts() {
		a.heldPorts.WithLabelValues(a.name, port.String()).Set(1)
	}
	a.lastSuccess.Set(float64(s.Started.Add(s.Took).UnixNano()) / 1e9)
}

// leading forgets the fabric's last audit's gauges when this process stops
// leading it (term 0): a former leader's breaches would otherwise keep the
// alert firing after the new leader found the fabric clean. Another fabric's
// findings stay.
func (a fabricAudit) leading(term int64) {
	if term == 0 {
		a.findings.DeletePartialMatch(prometheus.Labels{FabricLabel: a.name})
		a.heldPorts.DeletePartialMatch(prometheus.Labels{FabricLabel: a.name})
		a.breaches.Set(0)
	}
}
