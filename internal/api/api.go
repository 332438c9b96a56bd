// Package api serves the part of UFM's REST API that networking-mlnx's
// mlnx_sdn_assist driver uses, the pkeys API ib-kubernetes uses (pkeys.go),
// health (/healthz, /readyz) and, unless it has a listener of its own,
// /metrics.
//
// Every request is validated, recorded in one transaction and answered at
// once: 202 with the job's path, or 400 when it can never be applied. The work
// itself is done later by the applier; the driver polls the job.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/escape"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/health"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// MaxBodyBytes bounds a request body; Neutron's bodies are a few KiB.
const MaxBodyBytes = 1 << 20

// Recorder is what the API needs of the store.
type Recorder interface {
	RecordNetwork(ctx context.Context, c store.NetworkChange) (store.Job, error)
	RemoveNetwork(ctx context.Context, r store.NetworkRemoval) (store.Job, error)
	RecordPort(ctx context.Context, c store.PortChange) (store.Job, error)
	RemovePort(ctx context.Context, r store.PortRemoval) (store.Job, error)
	GetJob(ctx context.Context, id int64) (store.Job, error)
}

// Options are the [api] settings and what the API reports on.
type Options struct {
	Prefix string // e.g. /ufmRestV3
	Domain string // e.g. cloudx
	Token  string
	// DBTimeout bounds a request's database work; 0: DefaultDBTimeout. A
	// request that reaches no database within it is answered 503.
	DBTimeout time.Duration
	// AccessLog logs every request at info level, not only refusals and
	// errors.
	AccessLog bool
	// Health answers /healthz and /readyz; nil: /healthz says ok while the
	// process serves, and /readyz is not served.
	Health Health
	// Metrics, when set, is served on /metrics, behind MetricsToken if that
	// is set; without it, to anyone only when MetricsOpen (see Credentials).
	Metrics      http.Handler
	MetricsToken string
	MetricsOpen  bool
	// Observer counts every request; nil: nobody does.
	Observer Observer
	// Quota bounds what networking-mlnx may store (quota.go); the zero
	// Quota bounds nothing.
	Quota Quota
	// PKeys are UFM's pkeys APIs: ib-kubernetes' of each fabric (the
	// default fabric's [ufm_pkeys], each further fabric's
	// [fabric:NAME:ufm_pkeys]) and each [ufm_pkeys:NAME] client's, each with
	// its own credentials and store view. A client's routes are served only
	// with its Store; clients sharing a prefix are told apart by their
	// credentials (principals.go), and the configuration refuses prefixes
	// that overlap without being equal.
	PKeys []PKeysOptions
}

// Health decides /healthz and /readyz (health.Checker).
type Health interface {
	Live() health.Report
	Ready(ctx context.Context) health.Report
}

// Observer is told of every request answered (metrics.Metrics), and of the
// database errors that made one fail.
type Observer interface {
	HTTPRequest(method, route string, code int, took time.Duration)
	DatabaseError(operation string)
}

// DefaultDBTimeout is Options.DBTimeout when it is not set: well inside
// networking-mlnx's request timeout, so that it gets the 503 and resends.
const DefaultDBTimeout = 5 * time.Second

// conflicting is the error of a change the database aborted, each time it was
// run, for conflicting with concurrent changes (other managers' on a Galera
// cluster).
const conflicting = "conflicting concurrent changes: the database aborted this change each time it was run " +
	"for conflicting with changes through other managers; nothing was recorded; send it again"

// unreachable is the error of a request the database could not serve.
const unreachable = "database unreachable: the request was neither recorded nor read; send it again later"

// principal is who created jobs through this API (UFM's CreatedBy).
const principal = "networking-mlnx"

// Server is the HTTP API.
type Server struct {
	opts    Options
	store   Recorder
	log     *slog.Logger
	handler http.Handler
	// own are the handlers of the fabrics' pkeys APIs on listeners of their
	// own, by fabric name.
	own map[string]http.Handler
	// creds are what requests are checked against; SetCredentials swaps
	// them.
	creds atomic.Pointer[credentialHashes]
	// usage is the principals' quota usage as last read (quota.go).
	usage usageCache
}

// New builds the API's handler. Options' Token, MetricsToken, MetricsOpen
// and each PKeys' Username and Password are its first Credentials.
func New(opts Options, rec Recorder, log *slog.Logger) *Server {
	s := &Server{opts: opts, store: rec, log: log}
	s.SetCredentials(firstCredentials(opts))
	r := s.newRouter()
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		msg := fmt.Sprintf("no such resource: %s %s", req.Method, req.URL.Path)
		if o, ok := pkeysPrefixOf(opts.PKeys, req.URL.Path); ok && !strings.HasPrefix(req.URL.Path, opts.Prefix+"/") {
			// UFM's own paths answer 404, as UFM does: ib-kubernetes reads
			// it as absent, and finds the pkeys API off when it is.
			if o.Store == nil {
				msg += fmt.Sprintf(" (the pkeys API is off: set %s username and password)", o.section())
			}
			writeError(w, http.StatusNotFound, msg)
			return
		}
		// 400, not 404: a 404 to a DELETE tells the driver the object is gone, and a
		// misconfigured URL must not make every DELETE look successful.
		writeError(w, http.StatusBadRequest, msg)
	})

	// Routes are named for metrics without the configured prefix and domain,
	// so that dashboards work whatever they are.
	base := opts.Prefix + "/" + opts.Domain
	taken := map[string]bool{} // method and path of each route so far
	handle := func(method, path, route string, h httprouter.Handle) {
		taken[method+" "+path] = true
		handleOn(r)(method, path, route, h)
	}
	// A change is checked against networking-mlnx's quota; a job poll is not.
	change := func(h handlerFunc) httprouter.Handle {
		return s.auth(s.limited(quotaCheck{quota: opts.Quota, createdBy: principal, principal: principal, section: "[api]"}, h))
	}
	handle(http.MethodPost, base+"/Network", "Network", change(recordHandler(decodeNetwork, s.recordNetwork, store.OpCreateNetwork)))
	handle(http.MethodPut, base+"/Network/:id", "Network/:id", change(recordHandler(decodeNetwork, s.recordNetwork, store.OpUpdateNetwork)))
	handle(http.MethodDelete, base+"/Network/:id", "Network/:id", change(s.deleteNetwork))
	handle(http.MethodPost, base+"/Port", "Port", change(recordHandler(decodePort, s.recordPort, store.OpAddPort)))
	handle(http.MethodPut, base+"/Port/:id", "Port/:id", change(recordHandler(decodePort, s.recordPort, store.OpUpdatePort)))
	handle(http.MethodDelete, base+"/Port/:id", "Port/:id", change(s.deletePort))
	handle(http.MethodGet, opts.Prefix+"/app/jobs/:id", "app/jobs/:id", s.auth(s.getJob))
	handle(http.MethodGet, opts.Prefix+"/jobs/:id", "jobs/:id", s.auth(s.getJob)) // UFM's native job path
	handle(http.MethodGet, "/healthz", "/healthz", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		if opts.Health == nil {
			writeJSON(w, http.StatusOK, health.Report{Status: "ok", Reasons: []string{}})
			return
		}
		writeReport(w, opts.Health.Live())
	})
	if opts.Health != nil {
		handle(http.MethodGet, "/readyz", "/readyz", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
			writeReport(w, opts.Health.Ready(req.Context()))
		})
	}
	if opts.Metrics != nil {
		metrics := s.metricsAuth(opts.Metrics)
		handle(http.MethodGet, "/metrics", "/metrics", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
			metrics.ServeHTTP(w, r)
		})
	}
	s.own = make(map[string]http.Handler)
	for _, o := range opts.PKeys {
		if o.OwnListener {
			s.own[o.fabric()] = s.ownPKeysHandler(o)
		}
	}
	s.servePKeys(opts.PKeys, handle, func(method, path string) bool { return taken[method+" "+path] })
	s.handler = s.wrap(r)
	return s
}

// newRouter is a router that answers as the API does: never a redirect (a
// 301 turns the driver's POSTs into GETs), 405 and a panic in JSON.
func (s *Server) newRouter() *httprouter.Router {
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", req.Method, req.URL.Path))
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		s.logger(req).Error("panic serving request", "method", req.Method, "path", req.URL.Path, "panic", fmt.Sprint(v))
		writeError(w, http.StatusInternalServerError, "internal error")
	}
	return r
}

// handleOn registers a route on r, naming it route for the access log and
// the metrics.
func handleOn(r *httprouter.Router) func(method, path, route string, h httprouter.Handle) {
	return func(method, path, route string, h httprouter.Handle) {
		r.Handle(method, path, func(w http.ResponseWriter, req *http.Request, ps httprouter.Params) {
			if info := infoOf(req); info != nil {
				info.route = route
			}
			h(w, req, ps)
		})
	}
}

// wrap gives a router the request id, the slashes' collapse and the access
// log every request of the manager's listeners has.
func (s *Server) wrap(r *httprouter.Router) http.Handler {
	return requestInfo(collapseSlashes(s.accessLog(r)))
}

// ownPKeysHandler serves one fabric's pkeys API alone, for its own
// listener: its routes, and 404 on every other path, as UFM answers one
// it does not have (ib-kubernetes reads it as absent). Nothing else of the
// API is served there: networking-mlnx's token opens nothing on it.
func (s *Server) ownPKeysHandler(o PKeysOptions) http.Handler {
	r := s.newRouter()
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		msg := fmt.Sprintf("no such resource: %s %s", req.Method, req.URL.Path)
		if o.Store == nil {
			msg += fmt.Sprintf(" (the pkeys API is off: set %s username and password)", o.section())
		}
		writeError(w, http.StatusNotFound, msg)
	})
	if o.Store != nil {
		newPKeysAPI(s, o).routes(handleOn(r))
	}
	return s.wrap(r)
}

// PKeysHandler is the handler of fabric's own pkeys listener (its
// PKeysOptions' OwnListener), nil when it has none.
func (s *Server) PKeysHandler(fabric string) http.Handler { return s.own[fabric] }

// writeReport answers a health check: 200 when ok, else 503, with the
// reasons either way.
func writeReport(w http.ResponseWriter, r health.Report) {
	status := http.StatusOK
	if !r.OK() {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, r)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// handlerFunc returns what to answer, or an error that says which status.
type handlerFunc func(r *http.Request, ps httprouter.Params) (status int, body any, err error)

// httpError carries a status and a message for the client.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// auth checks "Authorization: Basic <token>" in constant time (the hashes make the
// comparison independent of the header's length too), then runs h.
func (s *Server) auth(h handlerFunc) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if !s.creds.Load().tokenOK(r) {
			writeError(w, http.StatusUnauthorized, "missing or wrong token (Authorization: Basic <token>)")
			return
		}
		timeout := s.opts.DBTimeout
		if timeout <= 0 {
			timeout = DefaultDBTimeout
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		status, body, err := h(r.WithContext(ctx), ps)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if j, ok := body.(acceptedJob); ok {
			if info := infoOf(r); info != nil {
				info.job = j.ID
			}
			s.accepted(w, store.Job(j))
			return
		}
		writeJSON(w, status, body)
	}
}

// fail answers a request whose handler failed: with the status an httpError
// carries, 400 for a refusal, 409 for a change of a network whose physical
// network is now configured for another fabric, 503 when the database is unreachable or kept
// aborting the change for conflicts, 500 otherwise.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var qe *quotaError
	var rej *store.RejectedError
	var moved *store.PhysnetMovedError
	switch {
	case errors.As(err, &qe):
		w.Header().Set("Retry-After", retryAfter(qe.retry))
		writeError(w, qe.status, qe.msg)
	case errors.As(err, &he):
		if he.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1") // a slot frees when a request ends
		}
		writeError(w, he.status, he.msg)
	case errors.As(err, &rej):
		if rej.Held != "" {
			// The answer names no other owner's object; the operator's log does.
			s.logger(r).Debug("request refused: held by another owner", "method", r.Method, "path", r.URL.Path,
				"held_by", rej.Held)
		}
		writeError(w, http.StatusBadRequest, rej.Reason)
	case errors.As(err, new(*store.ForbiddenError)):
		// Another principal's: nothing is recorded.
		writeError(w, http.StatusForbidden, err.Error())
	case errors.As(err, &moved):
		// Not the request's fault: the configuration moved its physnet to
		// another fabric after its network was recorded. Nothing is
		// recorded; the same request succeeds once an operator has run
		// --move-physnet.
		s.logger(r).Warn("request refused: its physical network is configured for another fabric",
			"method", r.Method, "path", r.URL.Path, "physical_network", moved.Physnet,
			"recorded_fabric", moved.Recorded, "configured_fabric", moved.Configured)
		writeError(w, http.StatusConflict, moved.Error())
	case errors.As(err, new(*store.ConflictError)):
		// The database aborted the change for conflicting with concurrent
		// ones, each time the store ran it again: nothing is recorded, and
		// it can be sent again as it is.
		s.logger(r).Warn("request failed: conflicting concurrent changes", "method", r.Method, "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, conflicting)
	case store.IsUnavailable(err):
		// Not the client's fault and not recorded: networking-mlnx (or
		// ib-kubernetes) resends, and the manager reconnects by itself.
		s.log.Error("request failed: database unreachable", "method", r.Method, "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, unreachable)
	default:
		s.logger(r).Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		if s.opts.Observer != nil {
			s.opts.Observer.DatabaseError("api")
		}
		writeError(w, http.StatusInternalServerError, "internal error; see the manager's log")
	}
}

// accepted answers a recorded change: 202, the job's path as a JSON string (the
// driver stores at most 36 characters), and a Location header for clients that
// read it.
func (s *Server) accepted(w http.ResponseWriter, j store.Job) {
	path := fmt.Sprintf("app/jobs/%d", j.ID)
	w.Header().Set("Location", s.opts.Prefix+"/"+path)
	writeJSON(w, http.StatusAccepted, path)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	// An answer quotes tenants' texts (node descriptions, names in a
	// refusal) that clients log and people curl: DEL, the C1 controls and
	// U+202E go as JSON escapes, which encoding/json leaves raw.
	b = escape.JSON(b)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// collapseSlashes turns "//" into "/" before routing: networking-mlnx keeps a
// trailing slash of its configured URL, so every path it sends may hold one.
func collapseSlashes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "//") {
			p := r.URL.Path
			for strings.Contains(p, "//") {
				p = strings.ReplaceAll(p, "//", "/")
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = p, ""
			r = r2
		}
		next.ServeHTTP(w, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// accessLog logs every request at debug level (job polls are many), or at info
// level with [api] access_log, and every refusal or error at info/warn level;
// and counts it for metrics.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		took := time.Since(start)
		level := slog.LevelDebug
		if s.opts.AccessLog {
			level = slog.LevelInfo
		}
		switch {
		case rec.status >= 500:
			level = slog.LevelWarn
		case rec.status >= 400 && rec.status != http.StatusNotFound:
			level = slog.LevelInfo
		}
		route := "unmatched"
		if info := infoOf(r); info != nil && info.route != "" {
			route = info.route
		}
		attrs := []any{"method", r.Method, "path", r.URL.Path, "route", route,
			"status", rec.status, "duration", took, "remote", r.RemoteAddr}
		if info := infoOf(r); info != nil && info.fabric != "" {
			attrs = append(attrs, "fabric", info.fabric) // a pkeys API's: routes are named alike on every fabric
		}
		if info := infoOf(r); info != nil && info.job != 0 {
			attrs = append(attrs, "job", info.job) // the job the change was recorded as
		}
		s.logger(r).Log(r.Context(), level, "http request", attrs...)
		if s.opts.Observer != nil {
			s.opts.Observer.HTTPRequest(r.Method, route, rec.status, took)
		}
	})
}
