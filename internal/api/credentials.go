package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
)

// Credentials are the secrets requests are checked against: [api] token,
// each fabric's pkeys API's username and password ([ufm_pkeys],
// [fabric:NAME:ufm_pkeys]), [api] metrics_token. SetCredentials
// replaces them while the server serves (SIGHUP): an operator who revokes a
// leaked token expects the old one refused from then on.
type Credentials struct {
	// Token is what networking-mlnx sends as "Authorization: Basic <token>".
	Token string
	// PreviousTokens are accepted as Token is, during a rotation.
	PreviousTokens []string
	// PKeys are each pkeys client's credentials, by its principal
	// (PKeysOptions.Principal: the fabric's name for its [ufm_pkeys],
	// "ufm_pkeys:NAME" for a [ufm_pkeys:NAME] client): a client's credentials
	// open its routes only. A client without them refuses every request.
	PKeys map[string]PKeysCredentials
	// MetricsToken is what a scraper sends as "Authorization: Bearer
	// <token>". Without one, /metrics is open when MetricsOpen says so (it
	// is served on loopback only) and refuses every scrape otherwise.
	MetricsToken string
	MetricsOpen  bool
}

// PKeysCredentials are what one pkeys client sends: HTTP Basic auth, or
// UFM's token auth ("Authorization: Basic <token>"); all empty refuses every
// request of that client.
type PKeysCredentials struct {
	Username, Password string
	// PreviousPasswords are accepted as Password is (with Username), during a
	// rotation.
	PreviousPasswords []string
	// Token and PreviousTokens are UFM's token auth's, of a [ufm_pkeys:NAME]
	// client.
	Token          string
	PreviousTokens []string
}

// credentialHashes are Credentials as requests are checked against them:
// SHA-256 hashes, so that a constant-time comparison does not show the
// length of the secret either.
type credentialHashes struct {
	// tokens are the current token's and the previous ones'.
	tokens [][sha256.Size]byte
	// pkeys are each fabric's pkeys API's, by fabric name; a fabric without
	// an entry refuses every request.
	pkeys map[string]*credentials
	// metrics is nil when /metrics needs no token (metricsOpen) or can
	// accept none.
	metrics     *[sha256.Size]byte
	metricsOpen bool
}

// credentials are a pkeys client's user name and the passwords it may come
// with, and its tokens' Authorization headers.
type credentials struct {
	user      [sha256.Size]byte
	passwords [][sha256.Size]byte
	tokens    [][sha256.Size]byte
}

func hashCredentials(c Credentials) *credentialHashes {
	h := &credentialHashes{metricsOpen: c.MetricsOpen, pkeys: map[string]*credentials{}}
	for _, t := range append([]string{c.Token}, c.PreviousTokens...) {
		h.tokens = append(h.tokens, sha256.Sum256([]byte("Basic "+t)))
	}
	for principal, p := range c.PKeys {
		if p.Username == "" && p.Password == "" && p.Token == "" {
			continue
		}
		want := &credentials{user: sha256.Sum256([]byte(p.Username))}
		if p.Username != "" || p.Password != "" {
			for _, pw := range append([]string{p.Password}, p.PreviousPasswords...) {
				want.passwords = append(want.passwords, sha256.Sum256([]byte(pw)))
			}
		}
		if p.Token != "" {
			for _, t := range append([]string{p.Token}, p.PreviousTokens...) {
				want.tokens = append(want.tokens, sha256.Sum256([]byte("Basic "+t)))
			}
		}
		h.pkeys[principal] = want
	}
	if c.MetricsToken != "" {
		m := sha256.Sum256([]byte("Bearer " + c.MetricsToken))
		h.metrics = &m
	}
	return h
}

// firstCredentials are the credentials opts sets: its tokens and each
// fabric's pkeys API's username and password.
func firstCredentials(opts Options) Credentials {
	c := Credentials{Token: opts.Token, MetricsToken: opts.MetricsToken, MetricsOpen: opts.MetricsOpen,
		PKeys: make(map[string]PKeysCredentials, len(opts.PKeys))}
	for _, o := range opts.PKeys {
		c.PKeys[o.Principal()] = PKeysCredentials{Username: o.Username, Password: o.Password, Token: o.Token}
	}
	return c
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

// pkeysOK says, in constant time, whether r carries a credential of pkeys
// client principal: its user name and password (both compared whatever the
// first gives), or its token (compared whatever the Basic auth gives). Only
// principal's are compared: another client's credentials never open its
// routes.
func (h *credentialHashes) pkeysOK(r *http.Request, principal string) bool {
	user, password, _ := r.BasicAuth()
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	header := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	want, ok := h.pkeys[principal]
	if !ok {
		// Hashed all the same: the answer takes as long either way.
		want = &credentials{passwords: make([][sha256.Size]byte, 1)}
	}
	okUser := subtle.ConstantTimeCompare(u[:], want.user[:])
	okPassword := anyEqual(p, want.passwords)
	okToken := anyEqual(header, want.tokens)
	return ok && (okUser&okPassword)|okToken == 1
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
