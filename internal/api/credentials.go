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
	// PreviousTokens are accepted as Token is, during a rotation.
	PreviousTokens []string
	// PKeysUsername and PKeysPassword are what ib-kubernetes sends as HTTP
	// Basic auth; both empty refuses every request of the pkeys API.
	PKeysUsername, PKeysPassword string
	// PreviousPKeysPasswords are accepted as PKeysPassword is (with
	// PKeysUsername), during a rotation.
	PreviousPKeysPasswords []string
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
	// tokens are the current token's and the previous ones'.
	tokens [][sha256.Size]byte
	// pkeys is nil when the pkeys API refuses every request.
	pkeys *credentials
	// metrics is nil when /metrics needs no token (metricsOpen) or can
	// accept none.
	metrics     *[sha256.Size]byte
	metricsOpen bool
}

// credentials are the pkeys API's user name and the passwords it may come with.
type credentials struct {
	user      [sha256.Size]byte
	passwords [][sha256.Size]byte
}

func hashCredentials(c Credentials) *credentialHashes {
	h := &credentialHashes{metricsOpen: c.MetricsOpen}
	for _, t := range append([]string{c.Token}, c.PreviousTokens...) {
		h.tokens = append(h.tokens, sha256.Sum256([]byte("Basic "+t)))
	}
	if c.PKeysUsername != "" || c.PKeysPassword != "" {
		h.pkeys = &credentials{user: sha256.Sum256([]byte(c.PKeysUsername))}
		for _, p := range append([]string{c.PKeysPassword}, c.PreviousPKeysPasswords...) {
			h.pkeys.passwords = append(h.pkeys.passwords, sha256.Sum256([]byte(p)))
		}
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

// tokenOK says, in constant time, whether r carries networking-mlnx's token
// (the current one or a previous one).
func (h *credentialHashes) tokenOK(r *http.Request) bool {
	got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	return anyEqual(got, h.tokens) == 1
}

// anyEqual returns 1 if got equals one of want, 0 otherwise, comparing with
// every one whatever the earlier ones gave: how long it takes tells nothing
// of which one matched, if any.
func anyEqual(got [sha256.Size]byte, want [][sha256.Size]byte) int {
	ok := 0
	for _, w := range want {
		ok |= subtle.ConstantTimeCompare(got[:], w[:])
	}
	return ok
}

// pkeysOK says, in constant time, whether r carries the pkeys API's user name
// and password: both are compared whatever the first gives.
func (h *credentialHashes) pkeysOK(r *http.Request) bool {
	user, password, _ := r.BasicAuth()
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	want := h.pkeys
	if want == nil {
		// Hashed all the same: the answer takes as long either way.
		want = &credentials{passwords: make([][sha256.Size]byte, 1)}
	}
	okUser := subtle.ConstantTimeCompare(u[:], want.user[:])
	okPassword := anyEqual(p, want.passwords)
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
