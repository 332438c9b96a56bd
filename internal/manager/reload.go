package manager

import (
	"log/slog"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload"
)

// credentialSetter is the API as SIGHUP changes it (api.Server).
type credentialSetter interface {
	SetCredentials(api.Credentials)
}

// hangup is what SIGHUP does. The TLS certificate is read again, and so is
// the configuration file: its credentials ([api] token, previous_tokens and
// metrics_token, and each fabric's pkeys API's username, password and
// previous_passwords: [ufm_pkeys], [fabric:NAME:ufm_pkeys]; and each
// [ufm_pkeys:NAME] client's, its tokens too) take effect at once, so that a revoked secret stops working when the signal has been
// handled; every other changed key is named as needing a restart (the
// manager's other settings are fixed for its life, so that a half-edited file
// can never take effect). A file that does not load, or whose new token or
// password is too short, changes nothing. The log names keys, never values.
// It goes to standard error, which journald or Docker collect: there is no
// file to reopen.
type hangup struct {
	path string
	// running is what the manager runs with: the settings it started with,
	// and the credentials of the last SIGHUP that changed them.
	running *config.Config
	// pkeysServed names the fabrics whose pkeys API's routes are served:
	// their credentials change only then.
	pkeysServed map[string]bool
	certs       *tlsreload.Reloader
	api         credentialSetter
	log         *slog.Logger
}

func newHangup(path string, cfg *config.Config, certs *tlsreload.Reloader, api credentialSetter, log *slog.Logger) *hangup {
	served := map[string]bool{}
	for _, f := range cfg.Fabrics {
		served[f.Name] = f.UFMPKeys.Enabled()
	}
	return &hangup{path: path, running: cfg, pkeysServed: served, certs: certs, api: api, log: log}
}

// pkeysCredentialKeys are the keys of a pkeys API's section a SIGHUP applies
// (beside [api] token, previous_tokens and metrics_token).
var pkeysCredentialKeys = []string{"username", "password", "previous_passwords"}

// pkeysCredentialOf returns the fabric of cfg whose pkeys API's credential
// key is, as config.Diff names it ("[fabric:storage:ufm_pkeys] password").
func pkeysCredentialOf(cfg *config.Config, key string) (string, bool) {
	for _, f := range cfg.Fabrics {
		for _, k := range pkeysCredentialKeys {
			if key == f.UFMPKeysSection()+" "+k {
				return f.Name, true
			}
		}
	}
	return "", false
}

// apiCredentials are the API's credentials as cfg sets them. /metrics needs
// no token only on loopback (config.API.MetricsOpen).
func apiCredentials(cfg *config.Config) api.Credentials {
	c := api.Credentials{Token: cfg.API.Token, PreviousTokens: cfg.API.PreviousTokens,
		PKeys:        map[string]api.PKeysCredentials{},
		MetricsToken: cfg.API.MetricsToken, MetricsOpen: cfg.API.MetricsOpen()}
	for _, f := range cfg.Fabrics {
		u := f.UFMPKeys
		c.PKeys[f.Name] = api.PKeysCredentials{Username: u.Username, Password: u.Password, PreviousPasswords: u.PreviousPasswords}
	}
	for _, p := range cfg.PKeysClients {
		c.PKeys[api.PKeysOptions{Client: p.Name}.Principal()] = api.PKeysCredentials{Username: p.Username,
			Password: p.Password, PreviousPasswords: p.PreviousPasswords, Token: p.Token, PreviousTokens: p.PreviousTokens}
	}
	return c
}

func (h *hangup) reload() {
	reloaded := []string{}
	if h.certs != nil {
		if err := h.certs.Reload(); err != nil {
			h.log.Error("SIGHUP: the TLS certificate does not load; serving the previous one", "error", err)
		} else {
			reloaded = append(reloaded, "TLS certificate and key")
		}
	}
	needRestart := []string{}
	next, err := config.Load(h.path)
	if err == nil {
		err = next.CheckToken()
	}
	if err != nil {
		h.log.Error("SIGHUP: the configuration file is refused; the running configuration and credentials stay",
			"error", err)
	} else {
		var applied []string
		applied, needRestart = h.applyCredentials(next)
		reloaded = append(reloaded, applied...)
	}
	h.log.Info("SIGHUP received; the manager and OpenSM keep running", "reloaded", reloaded,
		"changed_settings_needing_restart", needRestart)
}

// applyCredentials gives the API next's credentials where they differ from
// the running ones, and returns the keys it applied and those that need a
// restart.
func (h *hangup) applyCredentials(next *config.Config) (applied, needRestart []string) {
	applied, needRestart = []string{}, []string{}
	now := *h.running
	// now's fabrics are changed below: not the running configuration's.
	now.Fabrics = slices.Clone(h.running.Fabrics)
	now.PKeysClients = slices.Clone(h.running.PKeysClients)
	for _, key := range config.Diff(h.running, next) {
		fabric, isPKeys := pkeysCredentialOf(h.running, key)
		if applyClientCredential(&now, next, key) {
			applied = append(applied, key)
			continue
		}
		switch {
		case key == "[api] token" || key == "[api] previous_tokens":
			now.API.Token, now.API.PreviousTokens = next.API.Token, next.API.PreviousTokens
			applied = append(applied, key)
		case key == "[api] metrics_token":
			now.API.MetricsToken = next.API.MetricsToken
			applied = append(applied, key)
		case !isPKeys || next.UFMPKeysOf(fabric) == nil:
			needRestart = append(needRestart, key)
		case !h.pkeysServed[fabric]:
			// Its routes are set up at start only.
			needRestart = append(needRestart, key)
		default:
			// All at once: without them every request of the fabric's pkeys
			// API is refused.
			to, from := now.UFMPKeysOf(fabric), next.UFMPKeysOf(fabric)
			to.Username, to.Password, to.PreviousPasswords = from.Username, from.Password, from.PreviousPasswords
			applied = append(applied, key)
		}
	}
	if len(applied) > 0 {
		h.api.SetCredentials(apiCredentials(&now))
		h.running = &now
	}
	return applied, needRestart
}

// clientCredentialKeys are the keys of a [ufm_pkeys:NAME] section a SIGHUP
// applies.
var clientCredentialKeys = []string{"username", "password", "previous_passwords", "token", "previous_tokens"}

// applyClientCredential gives now the credentials of the [ufm_pkeys:NAME]
// client whose credential key is, when that client is served (it is in now,
// set up at start) and still in next; false leaves key to need a restart.
// All of the client's credentials at once, as for [ufm_pkeys].
func applyClientCredential(now, next *config.Config, key string) bool {
	for i, p := range now.PKeysClients {
		if !slices.ContainsFunc(clientCredentialKeys, func(k string) bool { return key == p.Section()+" "+k }) {
			continue
		}
		j := slices.IndexFunc(next.PKeysClients, func(q config.PKeysClient) bool { return q.Name == p.Name })
		if j < 0 {
			return false
		}
		from := next.PKeysClients[j]
		to := &now.PKeysClients[i]
		to.Username, to.Password, to.PreviousPasswords = from.Username, from.Password, from.PreviousPasswords
		to.Token, to.PreviousTokens = from.Token, from.PreviousTokens
		return true
	}
	return false
}
