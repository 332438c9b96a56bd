package e2e

import (
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestSIGHUPRevokesCredentials: an operator who replaces a leaked [api]
// token or [ufm_pkeys] password and sends SIGHUP is done: the old ones are
// refused and the new ones work, without a restart; the log names the keys
// it applied and shows neither secret.
func TestSIGHUPRevokesCredentials(t *testing.T) {
	const (
		newToken    = "e2e-new-token-0123456789"
		newPassword = "e2e-new-ufm-password-0123456789"
	)
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricOptions(1), settings{UFMPKeys: []string{
		"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff",
	}})
	// The pkeys API's ufm_version answers 200 once the password is accepted.
	tokenStatus := m.tokenStatus
	passwordStatus := func(password string) int {
		resp, _ := (&ufmClient{m: m, user: ufmUser, password: password}).do("GET", "/ufmRest/app/ufm_version", "")
		return resp.StatusCode
	}
	if got := tokenStatus(token); got != http.StatusNotFound {
		t.Fatalf("the first token: %d, want 404", got)
	}
	if got := passwordStatus(ufmPassword); got != http.StatusOK {
		t.Fatalf("the first password: %d, want 200", got)
	}

	conf, err := os.ReadFile(m.conf)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.NewReplacer("token = "+token, "token = "+newToken, "password = "+ufmPassword, "password = "+newPassword).
		Replace(string(conf))
	if err := os.WriteFile(m.conf, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m.waitLog("SIGHUP received")

	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"the old token", tokenStatus(token), http.StatusUnauthorized},
		{"the new token", tokenStatus(newToken), http.StatusNotFound},
		{"the old password", passwordStatus(ufmPassword), http.StatusUnauthorized},
		{"the new password", passwordStatus(newPassword), http.StatusOK},
	} {
		if c.got != c.want {
			t.Errorf("after SIGHUP, %s: %d, want %d", c.what, c.got, c.want)
		}
	}
	if !strings.Contains(m.log(), `"reloaded":["[api] token","[ufm_pkeys] password"]`) {
		t.Errorf("the log does not name the credentials applied:\n%s", m.log())
	}
	for _, secret := range []string{token, newToken, ufmPassword, newPassword} {
		if strings.Contains(m.log(), secret) {
			t.Errorf("the log shows a secret (%d characters)", len(secret))
		}
	}
}

// TestTokenRotationServesEveryNeutronServer rotates the token as the sample
// configuration says, on a running manager: with the new token set and the old
// one in previous_tokens, a neutron-server still on the old token records a
// change that completes on the fabric, and one on the new token is served; once
// previous_tokens is removed, the old token is refused. The log shows neither.
func TestTokenRotationServesEveryNeutronServer(t *testing.T) {
	const newToken = "e2e-rotated-token-0123456789"
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricOptions(1), settings{})
	m.confirmSwitches() // jobs complete only then
	tokenStatus := m.tokenStatus
	conf, err := os.ReadFile(m.conf)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(tokenLines string, reloaded string) {
		t.Helper()
		edited := strings.Replace(string(conf), "token = "+token, tokenLines, 1)
		if err := os.WriteFile(m.conf, []byte(edited), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := m.proc.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		m.waitLog("SIGHUP received", reloaded)
	}

	rewrite("token = "+newToken+"\nprevious_tokens = "+token, `"reloaded":["[api] token","[api] previous_tokens"]`)
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil) // the old token
	if got := tokenStatus(newToken); got != http.StatusNotFound {
		t.Errorf("during the rotation, the new token: %d, want 404 (served)", got)
	}

	rewrite("token = "+newToken, `"reloaded":["[api] previous_tokens"]`)
	if got := tokenStatus(token); got != http.StatusUnauthorized {
		t.Errorf("after the rotation, the old token: %d, want 401", got)
	}
	if got := tokenStatus(newToken); got != http.StatusNotFound {
		t.Errorf("after the rotation, the new token: %d, want 404 (served)", got)
	}
	for _, secret := range []string{token, newToken} {
		if strings.Contains(m.log(), secret) {
			t.Errorf("the log shows a token (%d characters)", len(secret))
		}
	}
}

// TestSwitchGUIDRefused: a switch's GUID sent as a port's client-id
// (networking-mlnx) or as a pod's GUID (the pkeys API) is refused with 400,
// naming the switch, once OpenSM's subnet dump lists it: a tenant sets its
// port's client-id, and a switch in its partition is a path to the switch's
// management port. Nothing is recorded.
func TestSwitchGUIDRefused(t *testing.T) {
	db := storetest.NewDatabase(t, config.EngineSQLite)
	m := launchManager(t, db, fabricOptions(1), settings{UFMPKeys: []string{
		"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff", "apply_timeout = 60",
	}})
	m.confirmSwitches() // OpenSM has written its subnet dump
	sw := fabricsim.SwitchGUID(1)
	const net = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	revision, jobs := dbCounts(t, db)

	status, body := m.send("POST", "/cloudx/Port", portBody("port-switch", net, vendorClientID(sw)))
	if status != http.StatusBadRequest || !strings.Contains(body, "is switch "+sw.String()+"'s") {
		t.Errorf("a port with the switch's GUID: %d %s, want 400 naming the switch", status, body)
	}
	k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
	resp, answer := k.do("POST", "/ufmRest/resources/pkeys", `{"pkey": "0x1005", "guids": ["`+ufm(sw)+`"]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer, "is switch "+sw.String()+"'s") {
		t.Errorf("a pod GUID that is the switch's: %d %s, want 400 naming the switch", resp.StatusCode, answer)
	}
	// The refused changes recorded nothing; a host's GUID is still taken.
	if r, j := dbCounts(t, db); r != revision || j != jobs {
		t.Errorf("the refused changes left revision %d and %d jobs, want %d and %d", r, j, revision, jobs)
	}
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h1", net, vendorClientID(m.fabric.Host("H1").PortGUID))), nil)
}

// tokenStatus is how networking-mlnx's route answers a job that does not
// exist with token: 404 once the token is accepted, 401 otherwise.
func (m *manager) tokenStatus(token string) int {
	m.t.Helper()
	req, err := http.NewRequest("GET", m.url+"/ufmRestV3/app/jobs/999", nil)
	if err != nil {
		m.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+token)
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
