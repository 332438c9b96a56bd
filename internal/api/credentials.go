package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
)

// Credentials are the secrets requests are checked against: [api] token,
// [ufm_pkeys] username and password, [api] metrics_token. SetCredentials
// replaces them while the server serves (SIGHUP): an operator who revokes a
// leaked token expects the old one refused from then on.
type Credentials struct {
	// Token is what networking-mlnx sends as "Authorization: Basic <token>".
	Token string
	// PKeysUsername and PKeysPassword are what ib-kubernetes sends as HTTP
	// Basic auth; both empty refuses every request of the pkeys API.
	PKeysUsername, PKeysPassword string
	// MetricsToken is what a scraper sends as "Authorization: Bearer
	// <token>". Without one, /metrics is open when MetricsOpen says so (it
	// is served on loopback only) and refuses every scrape otherwise.
	MetricsToken string
	MetricsOpen  bool
}

// credentialHashes are Credentials as requests are checked against them:
// SHA-256 hashes, so that a constant-time comparison does not show the
// length of the secret either.
type credentialHashes struct {
	token [sha256.Size]byte
	// pkeys is nil when the pkeys API refuses every request.
	pkeys *credentials
	// metrics is nil when /metrics needs no token (metricsOpen) or can
	// accept none.
	metrics     *[sha256.Size]byte
	metricsOpen bool
}

type credentials struct{ user, password [sha256.Size]byte }

func hashCredentials(c Credentials) *credentialHashes {
	h := &credentialHashes{token: sha256.Sum256([]byte("Basic " + c.Token)), metricsOpen: c.MetricsOpen}
	if c.PKeysUsername != "" || c.PKeysPassword != "" {
		h.pkeys = &credentials{user: sha256.Sum256([]byte(c.PKeysUsername)), password: sha256.Sum256([]byte(c.PKeysPassword))}
	}
	if c.MetricsToken != "" {
		m := sha256.Sum256([]byte("Bearer " + c.MetricsToken))
		h.metrics = &m
	}
	return h
}

// SetCredentials makes every request from now on be checked against c. A
// request is checked against one set whole, the previous or c, whichever
// was in place when it arrived.
func (s *Server) SetCredentials(c Credentials) { s.creds.Store(hashCredentials(c)) }

// tokenOK says, in constant time, whether r carries networking-mlnx's token.
func (h *credentialHashes) tokenOK(r *http.Request) bool {
	got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
}

// pkeysOK says, in constant time, whether r carries the pkeys API's user name
// and password: both are compared whatever the first gives.
func (h *credentialHashes) pkeysOK(r *http.Request) bool {
	user, password, _ := r.BasicAuth()
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	want := h.pkeys
	if want == nil {
		// Hashed all the same: the answer takes as long either way.
		want = &credentials{}
	}
	okUser := subtle.ConstantTimeCompare(u[:], want.user[:])
	okPassword := subtle.ConstantTimeCompare(p[:], want.password[:])
	return h.pkeys != nil && okUser&okPassword == 1
}

// metricsAuth serves metrics to a scraper that sends the metrics token, or
// to anyone when /metrics is open; it refuses before anything is read, so
// that a refused scrape costs no database read.
func (s *Server) metricsAuth(metrics http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := s.creds.Load()
		switch {
		case h.metrics != nil:
			got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
			if subtle.ConstantTimeCompare(got[:], h.metrics[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
				writeError(w, http.StatusUnauthorized, "missing or wrong metrics token (Authorization: Bearer <[api] metrics_token>)")
				return
			}
		case !h.metricsOpen:
			writeError(w, http.StatusForbidden, "/metrics is served on an address other than loopback and [api] metrics_token "+
				"is not set: set it, and send it as Authorization: Bearer <metrics_token>")
			return
		}
		metrics.ServeHTTP(w, r)
	})
}

// MetricsHandler serves metrics as the API's /metrics does (see
// Credentials), for a listener of their own ([api] metrics_listen).
func (s *Server) MetricsHandler(metrics http.Handler) http.Handler { return s.metricsAuth(metrics) }
