// Package metrics is the manager's Prometheus instrumentation: what its
// loops count as they go (applies, HTTP requests, database errors), and what
// is read from the database, OpenSM and the gates each time /metrics is
// scraped (jobs, revisions, leadership, gates, enforcement errors).
//
// Everything is registered on the manager's own registry, never on
// client_golang's global one, so that a test can run several and a library
// cannot add metrics behind the manager's back. Names follow Prometheus'
// conventions: the afm_ prefix, base units (seconds), _total for counters,
// labels with bounded values.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace starts every metric's name.
const Namespace = "afm"

// Phases of an apply, as the applier's "partitions applied" log line splits
// its time: reading and rendering the state, marking the jobs and writing the
// file, OpenSM's heavy sweep, reading the ports' tables back until they show
// the changes ([opensm] verify = tables only), and the gates and job
// completion.
const (
	PhaseRender   = "render"
	PhaseWrite    = "write"
	PhaseSweep    = "sweep"
	PhaseVerify   = "verify"
	PhaseComplete = "complete"
)

// Metrics holds the manager's registry and the metrics its code updates.
// Every series a fabric owns (its applies, leadership, state, audits, second
// subnet manager) carries a fabric label and is updated through that fabric's
// handle (Fabric); the HTTP and database error series are the process' and
// carry none.
type Metrics struct {
	registry *prometheus.Registry

	applies       *prometheus.CounterVec
	applyDuration *prometheus.HistogramVec
	applyPhase    *prometheus.HistogramVec

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	dbErrors *prometheus.CounterVec

	// refused counts the requests a principal's quota refused.
	refused *prometheus.CounterVec

	audit *auditMetrics // audit.go

	mu      sync.Mutex
	fabrics map[string]*Fabric
}

// FabricLabel is the label naming the fabric a series belongs to.
const FabricLabel = "fabric"

// New makes the registry with the Go runtime's and the process' collectors and
// the manager's own metrics; each fabric's handle is made by Fabric.
func New() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry(), fabrics: map[string]*Fabric{}}
	m.audit = newAuditMetrics(m.registry)
	m.applies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "applies_total",
		Help: "Applies of the recorded state to OpenSM by outcome (applied, rejected, failed, timeout, check-failed, write-failed, pkey-errors, ...).",
	}, []string{FabricLabel, "outcome"})
	m.applyDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "apply_duration_seconds",
		Help:    "Time from the start of an apply to its outcome, by outcome.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120},
	}, []string{FabricLabel, "outcome"})
	m.applyPhase = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "apply_phase_duration_seconds",
		Help:    "Time each phase of a successful apply took: render (read and render the state), write (mark jobs, write the file, signal OpenSM), sweep (OpenSM's heavy sweep), complete (gates and job completion).",
		Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
	}, []string{FabricLabel, "phase"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "http_requests_total",
		Help: "HTTP requests served, by method, route and status code.",
	}, []string{"method", "route", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by method and route.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"method", "route"})
	m.dbErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "database_errors_total",
		Help: "Database operations that failed, by operation.",
	}, []string{"operation"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "requests_refused_total",
		Help: "Changes refused 429 by their principal's quota, by principal (networking-mlnx, a fabric's ib-kubernetes, ufm_pkeys:NAME) and reason (stored_bytes, jobs_per_minute).",
	}, []string{"principal", "reason"})
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.applies, m.applyDuration, m.applyPhase,
		m.httpRequests, m.httpDuration, m.dbErrors, m.refused,
	)
	return m
}

// Registry is where the manager's collectors are registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in Prometheus' text format. A collector that
// fails does not hide the others (promhttp.ContinueOnError).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Fabric is one fabric's instruments: what its elector, its applier and its
// audits tell, exported with fabric=NAME. It is the applier's Observer and
// AuditObserver and health's Self for that fabric.
type Fabric struct {
	name string
	m    *Metrics

	applies       *prometheus.CounterVec // curried with the fabric
	applyDuration prometheus.ObserverVec // curried with the fabric
	applyPhase    prometheus.ObserverVec // curried with the fabric
	audit         fabricAudit            // audit.go

	// What this process knows of its own role on the fabric, read at scrape
	// time.
	leaderTerm      atomic.Int64 // term this process leads; 0: it does not
	appliedRevision atomic.Int64 // revision this process last saw OpenSM apply; -1: none
	mu              sync.Mutex
	lastApplyFailed bool
}

// Fabric is fabric name's handle, made at its first call and the same at
// every later one: its afm_leader series exists from then on.
func (m *Metrics) Fabric(name string) *Fabric {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.fabrics[name]; ok {
		return f
	}
	labels := prometheus.Labels{FabricLabel: name}
	f := &Fabric{name: name, m: m,
		applies:       m.applies.MustCurryWith(labels),
		applyDuration: m.applyDuration.MustCurryWith(labels),
		applyPhase:    m.applyPhase.MustCurryWith(labels),
		audit:         m.audit.fabric(name),
	}
	f.appliedRevision.Store(-1)
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "leader", ConstLabels: labels,
		Help: "1 while this process holds the fabric's applier lock (runs its OpenSM and applies), else 0.",
	}, func() float64 { return bool01(f.leaderTerm.Load() != 0) }))
	m.fabrics[name] = f
	return f
}

// Name is the fabric's name, its series' fabric label.
func (f *Fabric) Name() string { return f.name }

// Leading records that this process leads the fabric's term (0: it no longer
// leads).
func (f *Fabric) Leading(term int64) {
	f.leaderTerm.Store(term)
	f.appliedRevision.Store(-1)
	f.mu.Lock()
	f.lastApplyFailed = false
	f.mu.Unlock()
	f.audit.leading(term) // audit.go
}

// LeaderTerm is the term of the fabric this process leads, 0 when it does not.
func (f *Fabric) LeaderTerm() int64 { return f.leaderTerm.Load() }

// ApplyFinished counts an apply and its duration.
func (f *Fabric) ApplyFinished(outcome string, took time.Duration) {
	f.applies.WithLabelValues(outcome).Inc()
	f.applyDuration.WithLabelValues(outcome).Observe(took.Seconds())
	f.mu.Lock()
	f.lastApplyFailed = outcome != "applied"
	f.mu.Unlock()
}

// Applied records a successful apply of revision and the time of each phase.
// (The jobs it completed are not counted here: jobs held by a gate complete
// later, when it opens; afm_jobs counts them by status.)
func (f *Fabric) Applied(revision int64, _ int64, phases map[string]time.Duration) {
	f.appliedRevision.Store(revision)
	for phase, d := range phases {
		f.applyPhase.WithLabelValues(phase).Observe(d.Seconds())
	}
}

// LastApplyFailed says whether this process' last apply on the fabric had any
// outcome but applied; false before its first apply.
func (f *Fabric) LastApplyFailed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastApplyFailed
}

// DatabaseError counts a failed database operation.
func (m *Metrics) DatabaseError(operation string) {
	m.dbErrors.WithLabelValues(operation).Inc()
}

// RequestRefused counts a change its principal's quota refused: principal
// and reason take the few values the API's configuration gives them.
func (m *Metrics) RequestRefused(principal, reason string) {
	m.refused.WithLabelValues(principal, reason).Inc()
}

// HTTPRequest counts a request answered.
func (m *Metrics) HTTPRequest(method, route string, code int, took time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
	default:
		method = "other" // a label's values must stay few, whatever clients send
	}
	m.httpRequests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
	m.httpDuration.WithLabelValues(method, route).Observe(took.Seconds())
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
