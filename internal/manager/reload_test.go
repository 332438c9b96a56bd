package manager

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
)

// reloadConf is a configuration with the pkeys API on; %s are the token,
// the pkeys password and [opensm] check_interval.
const reloadConf = `[api]
token = %s
[ufm_pkeys]
username = ib-kubernetes
password = %s
pkey_range = 0x1000-0x1fff
[opensm]
check_interval = %s
`

// hangupServer serves the API as cfg configures it (each fabric's pkeys API
// too when cfg sets it, as the manager wires them), with the SIGHUP handler of
// the file at path, whose log it returns.
func hangupServer(t *testing.T, path string, cfg *config.Config) (*httptest.Server, *hangup, *bytes.Buffer) {
	t.Helper()
	st := openFabricsStore(t, cfg)
	pkeys, _, err := pkeysAPIs(cfg, st, 0, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	clients, _, err := pkeysClientAPIs(cfg, st, 0, testVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	pkeys = append(pkeys, clients...)
	srv := api.New(api.Options{Prefix: cfg.API.Prefix, Domain: cfg.API.Domain, Token: cfg.API.Token, PKeys: pkeys},
		st, slog.New(slog.DiscardHandler))
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	var logged bytes.Buffer
	return web, newHangup(path, cfg, nil, srv, slog.New(slog.NewJSONHandler(&logged, nil))), &logged
}

// tokenWorks says whether web takes token: the token's route answers 404 for
// a job id that cannot be once the token is accepted, 401 otherwise.
func tokenWorks(t *testing.T, web *httptest.Server, token string) bool {
	req, _ := http.NewRequest("GET", web.URL+"/ufmRestV3/app/jobs/none", nil)
	req.Header.Set("Authorization", "Basic "+token)
	return statusCode(t, req) == http.StatusNotFound
}

// TestSIGHUPAppliesCredentials: a SIGHUP after the token and the pkeys
// password changed makes the old ones fail and the new ones work at once;
// other changed keys are named as needing a restart; a file that is refused
// changes nothing. The log names keys, never a secret.
func TestSIGHUPAppliesCredentials(t *testing.T) {
	const (
		oldToken, newToken, refusedToken = "s3cret-old-token-0123", "s3cret-new-token-0123", "s3cret-refused-token-0123"
		oldPassword, newPassword         = "s3cret-old-password-0123", "s3cret-new-password-0123"
	)
	path := filepath.Join(t.TempDir(), "afm.conf")
	write := func(token, password, check string, extra ...string) {
		t.Helper()
		text := fmt.Sprintf(reloadConf, token, password, check) + strings.Join(extra, "\n")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(oldToken, oldPassword, "60")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	web, h, logged := hangupServer(t, path, cfg)
	tokenWorks := func(token string) bool { return tokenWorks(t, web, token) }
	// ufm_version answers 200 or 401.
	passwordWorks := func(password string) bool {
		req, _ := http.NewRequest("GET", web.URL+"/ufmRest/app/ufm_version", nil)
		req.SetBasicAuth("ib-kubernetes", password)
		return statusCode(t, req) == http.StatusOK
	}
	if !tokenWorks(oldToken) || !passwordWorks(oldPassword) {
		t.Fatal("the first credentials do not work")
	}

	write(newToken, newPassword, "30")
	h.reload()
	if tokenWorks(oldToken) || !tokenWorks(newToken) {
		t.Errorf("after SIGHUP: old token works %t, new token works %t; want false, true", tokenWorks(oldToken), tokenWorks(newToken))
	}
	if passwordWorks(oldPassword) || !passwordWorks(newPassword) {
		t.Errorf("after SIGHUP: old password works %t, new one works %t; want false, true",
			passwordWorks(oldPassword), passwordWorks(newPassword))
	}
	for _, want := range []string{`"reloaded":["[api] token","[ufm_pkeys] password"]`,
		`"changed_settings_needing_restart":["[opensm] check_interval"]`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logged.String())
		}
	}

	// A file that does not load, and one whose token is too short, change
	// nothing: the credentials of the last good SIGHUP stay.
	write(refusedToken, newPassword, "30", "[bogus]")
	h.reload()
	write("short", newPassword, "30")
	h.reload()
	if !tokenWorks(newToken) || tokenWorks(refusedToken) || tokenWorks("short") {
		t.Errorf("after refused files: new token works %t, refused ones %t %t; want true, false, false",
			tokenWorks(newToken), tokenWorks(refusedToken), tokenWorks("short"))
	}
	if n := strings.Count(logged.String(), "the configuration file is refused"); n != 2 {
		t.Errorf("%d refusals logged, want 2:\n%s", n, logged.String())
	}
	if strings.Contains(logged.String(), "s3cret") {
		t.Errorf("the log shows a secret:\n%s", logged.String())
	}
}

// TestSIGHUPRotatesTheTokenWithoutARefusedRequest follows the rotation the
// sample configuration describes: the new token set with the old one as
// previous_tokens (both accepted, so neutron-servers still on the old one
// are served), then previous_tokens removed (the old one refused).
func TestSIGHUPRotatesTheTokenWithoutARefusedRequest(t *testing.T) {
	const oldToken, newToken = "s3cret-old-token-0123", "s3cret-new-token-0123"
	path := filepath.Join(t.TempDir(), "afm.conf")
	write := func(token string, previous ...string) {
		t.Helper()
		text := "[api]\ntoken = " + token + "\n"
		if len(previous) > 0 {
			text += "previous_tokens = " + strings.Join(previous, ", ") + "\n"
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(oldToken)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	web, h, logged := hangupServer(t, path, cfg)
	tokenWorks := func(token string) bool { return tokenWorks(t, web, token) }

	write(newToken, oldToken)
	h.reload()
	if !tokenWorks(oldToken) || !tokenWorks(newToken) {
		t.Errorf("during the rotation: old token works %t, new one %t; want both", tokenWorks(oldToken), tokenWorks(newToken))
	}
	write(newToken)
	h.reload()
	if tokenWorks(oldToken) || !tokenWorks(newToken) {
		t.Errorf("after the rotation: old token works %t, new one %t; want false, true", tokenWorks(oldToken), tokenWorks(newToken))
	}
	for _, want := range []string{`"reloaded":["[api] token","[api] previous_tokens"]`, `"reloaded":["[api] previous_tokens"]`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logged.String())
		}
	}
	if strings.Contains(logged.String(), "s3cret") {
		t.Errorf("the log shows a secret:\n%s", logged.String())
	}
}

// TestSIGHUPPKeysCredentialsWithoutTheAPI: with the pkeys API off at start
// its routes are not served, so new credentials for it need a restart.
func TestSIGHUPPKeysCredentialsWithoutTheAPI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "afm.conf")
	if err := os.WriteFile(path, []byte("[api]\ntoken = s3cret-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	set := &recordingSetter{}
	var logged bytes.Buffer
	h := newHangup(path, cfg, nil, set, slog.New(slog.NewJSONHandler(&logged, nil)))
	conf := "[api]\ntoken = s3cret-token-0123456789\n[ufm_pkeys]\nusername = k8s\npassword = s3cret-password-0123456\npkey_range = 0x1000-0x1fff\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	h.reload()
	if set.calls != 0 {
		t.Errorf("credentials set %d times, want none", set.calls)
	}
	want := `"changed_settings_needing_restart":["[ufm_pkeys] username","[ufm_pkeys] password","[ufm_pkeys] pkey_range"]`
	if !strings.Contains(logged.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, logged.String())
	}
}

// TestSIGHUPReloadsFabricPKeysCredentials: a further fabric's pkeys password
// changes at once, as the default fabric's does, on its own prefix only: the
// default fabric's stays, and neither fabric's opens the other's. A rotation
// through previous_passwords works on it as on the default's. Other changed
// keys of the fabric need a restart; the log names keys, never secrets.
func TestSIGHUPReloadsFabricPKeysCredentials(t *testing.T) {
	const (
		compute                  = "s3cret-compute-password"
		oldStorage, newStorage   = "s3cret-old-storage-password", "s3cret-new-storage-password"
		computeUser, storageUser = "ib-kubernetes", "ib-kubernetes-storage"
	)
	path := filepath.Join(t.TempDir(), "afm.conf")
	writeConfText(t, path, fmt.Sprintf(fabricsConf, compute, "30", oldStorage))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	web, h, logged := hangupServer(t, path, cfg)
	type want struct {
		prefix, user, password string
		works                  bool
	}
	check := func(when string, cases []want) {
		t.Helper()
		for _, c := range cases {
			if got := pkeysWork(t, web.URL, c.prefix, c.user, c.password); got != c.works {
				t.Errorf("%s: %s with %s's password %q works %t, want %t", when, c.prefix, c.user, c.password, got, c.works)
			}
		}
	}

	writeConfText(t, path, fmt.Sprintf(fabricsConf, compute, "60", newStorage))
	h.reload()
	check("after SIGHUP", []want{
		{"/storage/ufmRest", storageUser, oldStorage, false},
		{"/storage/ufmRest", storageUser, newStorage, true},
		{"/ufmRest", computeUser, compute, true},
		{"/ufmRest", storageUser, newStorage, false},
		{"/storage/ufmRest", computeUser, compute, false},
	})
	for _, want := range []string{`"reloaded":["[fabric:storage:ufm_pkeys] password"]`,
		`"changed_settings_needing_restart":["[fabric:storage] check_interval"]`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logged.String())
		}
	}

	// A rotation: the old password beside the new one, then alone.
	writeConfText(t, path, fmt.Sprintf(fabricsConf, compute, "60", oldStorage)+"previous_passwords = "+newStorage+"\n")
	h.reload()
	check("during a rotation", []want{
		{"/storage/ufmRest", storageUser, oldStorage, true},
		{"/storage/ufmRest", storageUser, newStorage, true},
		{"/ufmRest", computeUser, newStorage, false},
	})
	writeConfText(t, path, fmt.Sprintf(fabricsConf, compute, "60", oldStorage))
	h.reload()
	check("after the rotation", []want{
		{"/storage/ufmRest", storageUser, oldStorage, true},
		{"/storage/ufmRest", storageUser, newStorage, false},
	})
	if !strings.Contains(logged.String(), `"reloaded":["[fabric:storage:ufm_pkeys] password","[fabric:storage:ufm_pkeys] previous_passwords"]`) {
		t.Errorf("the log lacks the rotation's keys:\n%s", logged.String())
	}
	if strings.Contains(logged.String(), "s3cret") {
		t.Errorf("the log shows a secret:\n%s", logged.String())
	}
}

// TestSIGHUPFabricPKeysCredentialsWithoutItsAPI: a fabric whose pkeys API is
// off at start serves no route, so credentials given to it need a restart,
// whatever the default fabric's API does.
func TestSIGHUPFabricPKeysCredentialsWithoutItsAPI(t *testing.T) {
	const compute = "s3cret-compute-password"
	path := filepath.Join(t.TempDir(), "afm.conf")
	withoutStorageAPI, _, _ := strings.Cut(fabricsConf, "[fabric:storage:ufm_pkeys]")
	writeConfText(t, path, fmt.Sprintf(withoutStorageAPI, compute, "30"))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	set := &recordingSetter{}
	var logged bytes.Buffer
	h := newHangup(path, cfg, nil, set, slog.New(slog.NewJSONHandler(&logged, nil)))
	writeConfText(t, path, fmt.Sprintf(fabricsConf, compute, "30", "s3cret-storage-password"))
	h.reload()
	if set.calls != 0 {
		t.Errorf("credentials set %d times, want none", set.calls)
	}
	want := `"changed_settings_needing_restart":["[fabric:storage:ufm_pkeys] username","[fabric:storage:ufm_pkeys] password",` +
		`"[fabric:storage:ufm_pkeys] prefix","[fabric:storage:ufm_pkeys] pkey_range"]`
	if !strings.Contains(logged.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, logged.String())
	}
}

// recordingSetter is a fake API that counts SetCredentials.
type recordingSetter struct{ calls int }

func (r *recordingSetter) SetCredentials(api.Credentials) { r.calls++ }

func statusCode(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
