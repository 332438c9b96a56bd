package api

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Principals apart: ib-kubernetes ([ufm_pkeys], Basic auth under /ufmRest),
// nico (a token under /ufmRestV3, networking-mlnx's prefix, delete_empty,
// smconf) and slurm (Basic auth under /ufmRest, beside ib-kubernetes).
const (
	nicoToken     = "s3cret-nico-token-0123"
	slurmUser     = "slurm"
	slurmPassword = "s3cret-slurm-password"
)

// caller is who a request comes from: the Authorization header it sends.
type caller struct{ name, auth string }

var (
	asKubernetes = caller{"ib-kubernetes", basicAuth(ufmUser, ufmPassword)}
	asNICo       = caller{"nico", "Basic " + nicoToken}
	asSlurm      = caller{"slurm", basicAuth(slurmUser, slurmPassword)}
	asNeutron    = caller{"networking-mlnx", "Basic " + token}
)

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// principalsServer serves the three clients and networking-mlnx on one
// SQLite store, an applier completing their jobs when applied says so. nico's range also holds
// 0x1000-0x1fff, ib-kubernetes' (as after a configuration moved a range): a
// pkey in a client's range may still be another's.
func principalsServer(t *testing.T, applied bool) (*httptest.Server, *store.Store) {
	st := storetest.Open(t, "sqlite").WithRules(store.Rules{KubernetesRange: kubeRange,
		PKeysClients: map[string]store.PKeysClientRules{
			"nico":  {Range: fabric.PKeyRange{First: 0x1000, Last: 0x2fff}, DeleteEmpty: true},
			"slurm": {Range: fabric.PKeyRange{First: 0x3000, Last: 0x3fff}},
		}})
	common := PKeysOptions{ApplyTimeout: 20 * time.Second, PollInterval: 5 * time.Millisecond, Version: "test 1.0"}
	kube, nico, slurm := common, common, common
	kube.Store, kube.Prefix, kube.Username, kube.Password = st, "/ufmRest", ufmUser, ufmPassword
	nico.Store, nico.Client, nico.Section, nico.Prefix, nico.Token = st.PKeysClient("nico"), "nico", "[ufm_pkeys:nico]", "/ufmRestV3", nicoToken
	nico.SMConf = func(context.Context) (SMConf, error) {
		return SMConf{SubnetPrefix: "0xfe80000000000000", MKey: "0x00000000000000aa", SMKey: "0x00000000000000bb",
			SAKey: "0x00000000000000cc"}, nil
	}
	slurm.Store, slurm.Client, slurm.Section, slurm.Prefix = st.PKeysClient("slurm"), "slurm", "[ufm_pkeys:slurm]", "/ufmRest"
	slurm.Username, slurm.Password = slurmUser, slurmPassword
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, PKeys: []PKeysOptions{kube, nico, slurm}}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	if !applied {
		return srv, st
	}
	f := &pkeysFixture{fixture: &fixture{t: t, srv: srv, st: st, opts: opts}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.applier(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return srv, st
}

// send sends one request as p, and returns the status and body.
func send(t *testing.T, srv *httptest.Server, p caller, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", p.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// principalRequests are requests, in order, and what each must answer:
// each client's own changes succeed; every request across principals is
// refused, and one that reads another's pkey answers as for an unknown one.
var principalRequests = []struct {
	name         string
	as           caller
	method, path string
	body         string
	status       int
	want         string // a part of the answer
}{
	{"ib-kubernetes binds", asKubernetes, "POST", "/ufmRest/resources/pkeys", `{"pkey":"0x1001","guids":["` + podGUID1 + `"]}`, 200, `"applied":true`},
	{"nico binds with its token", asNICo, "POST", "/ufmRestV3/resources/pkeys", `{"pkey":"0x2001","guids":["` + podGUID2 + `"]}`, 200, `"applied":true`},
	{"slurm binds beside ib-kubernetes", asSlurm, "POST", "/ufmRest/resources/pkeys", `{"pkey":"0x3001","guids":["0200000000000040"]}`, 200, `"applied":true`},

	{"ib-kubernetes lists its own", asKubernetes, "GET", "/ufmRest/resources/pkeys", "", 200, `{"0x1001":`},
	{"nico lists its own", asNICo, "GET", "/ufmRestV3/resources/pkeys", "", 200, `{"0x2001":`},
	{"slurm lists its own", asSlurm, "GET", "/ufmRest/resources/pkeys", "", 200, `{"0x3001":`},
	{"nico reads ib-kubernetes' pkey as unknown", asNICo, "GET", "/ufmRestV3/resources/pkeys/0x1001", "", 200, `{}`},
	{"nico reads an unknown pkey", asNICo, "GET", "/ufmRestV3/resources/pkeys/0x1002", "", 200, `{}`},
	{"nico deletes ib-kubernetes' pkey", asNICo, "DELETE", "/ufmRestV3/resources/pkeys/0x1001", "", 404, "pkey 0x1001 is not a Kubernetes partition"},
	{"nico deletes an unknown pkey", asNICo, "DELETE", "/ufmRestV3/resources/pkeys/0x1002", "", 404, "pkey 0x1002 is not a Kubernetes partition"},
	{"nico removes ib-kubernetes' GUID", asNICo, "POST", "/ufmRestV3/actions/remove_guids_from_pkey", `{"pkey":"0x1001","guids":["` + podGUID1 + `"]}`, 200, "nothing to remove"},
	{"nico binds to ib-kubernetes' pkey", asNICo, "POST", "/ufmRestV3/resources/pkeys", `{"pkey":"0x1001","guids":["0200000000000041"]}`, 403, "another pkeys client's"},
	{"nico creates ib-kubernetes' pkey", asNICo, "POST", "/ufmRestV3/resources/pkeys/add", `{"pkey":"0x1001"}`, 403, "another pkeys client's"},
	{"nico binds slurm's GUID", asNICo, "POST", "/ufmRestV3/resources/pkeys", `{"pkey":"0x2002","guids":["0200000000000040"]}`, 403, "in a pkey of another pkeys client"},
	{"slurm binds to nico's pkey", asSlurm, "POST", "/ufmRest/resources/pkeys", `{"pkey":"0x2001","guids":["0200000000000041"]}`, 400, "outside [ufm_pkeys:slurm] pkey_range"},
	{"ib-kubernetes still holds its member", asKubernetes, "GET", "/ufmRest/resources/pkeys/0x1001?guids_data=true", "", 200, podGUID1},

	{"networking-mlnx's token on nico's prefix", asNeutron, "GET", "/ufmRestV3/resources/pkeys", "", 401, "missing or wrong credential"},
	{"networking-mlnx's token on /ufmRest", asNeutron, "GET", "/ufmRest/resources/pkeys", "", 401, "missing or wrong credential"},
	{"ib-kubernetes on nico's prefix", asKubernetes, "GET", "/ufmRestV3/resources/pkeys", "", 401, "[ufm_pkeys:nico]"},
	{"nico's token on /ufmRest", asNICo, "GET", "/ufmRest/resources/pkeys", "", 401, "missing or wrong credential"},
	{"nico's token on networking-mlnx's routes", asNICo, "DELETE", "/ufmRestV3/cloudx/Network/" + networkID, "", 401, "missing or wrong token"},
	{"slurm on networking-mlnx's routes", asSlurm, "DELETE", "/ufmRestV3/cloudx/Network/" + networkID, "", 401, "missing or wrong token"},
	{"nico on networking-mlnx's jobs", asNICo, "GET", "/ufmRestV3/jobs/{job}", "", 401, "missing or wrong token"},
	{"slurm reads ib-kubernetes' job", asSlurm, "GET", "/ufmRest/jobs/{job}", "", 404, "is not known"},
	{"ib-kubernetes reads its own job", asKubernetes, "GET", "/ufmRest/jobs/{job}", "", 200, `"Status":"Completed"`},
	{"networking-mlnx reads ib-kubernetes' job", asNeutron, "GET", "/ufmRestV3/jobs/{job}", "", 404, "is not known"},

	{"nico reads smconf", asNICo, "GET", "/ufmRestV3/app/smconf", "", 200, `"m_key":"0x00000000000000aa"`},
	{"slurm may not read smconf", asSlurm, "GET", "/ufmRest/app/smconf", "", 403, "[ufm_pkeys:slurm] may not read OpenSM's keys"},
	{"ib-kubernetes may not read smconf", asKubernetes, "GET", "/ufmRest/app/smconf", "", 403, "[ufm_pkeys] may not read OpenSM's keys"},
	{"nico reads the version", asNICo, "GET", "/ufmRestV3/app/ufm_version", "", 200, "test 1.0"},

	{"nico unbinds its last GUID", asNICo, "POST", "/ufmRestV3/actions/remove_guids_from_pkey", `{"pkey":"0x2001","guids":["` + podGUID2 + `"]}`, 200, "delete_empty"},
	{"nico's emptied pkey reads {}", asNICo, "GET", "/ufmRestV3/resources/pkeys/0x2001?guids_data=true", "", 200, `{}`},
	{"ib-kubernetes unbinds its last GUID", asKubernetes, "POST", "/ufmRest/actions/remove_guids_from_pkey", `{"pkey":"0x1001","guids":["` + podGUID1 + `"]}`, 200, `"applied":true`},
	{"ib-kubernetes keeps its empty pkey", asKubernetes, "GET", "/ufmRest/resources/pkeys/0x1001?guids_data=true", "", 200, `"guids":[]`},
}

// firstJob reads the job id of a change's answer.
var firstJob = regexp.MustCompile(`"ID":"([0-9]+)"`)

// TestPrincipalsApart sends principalRequests in order; {job} in a path is
// the job of the first (ib-kubernetes').
func TestPrincipalsApart(t *testing.T) {
	srv, _ := principalsServer(t, true)
	job := ""
	for _, r := range principalRequests {
		status, body := send(t, srv, r.as, r.method, strings.ReplaceAll(r.path, "{job}", job), r.body)
		if m := firstJob.FindStringSubmatch(body); job == "" && m != nil {
			job = m[1]
		}
		if status != r.status || !strings.Contains(body, r.want) {
			t.Errorf("%s: %s %s as %s: %d %s; want %d with %q", r.name, r.method, r.path, r.as.name, status, body, r.status, r.want)
		}
		if strings.Contains(body, "s3cret") {
			t.Errorf("%s: the answer shows a secret: %s", r.name, body)
		}
	}
}

// TestPrincipalsUnknownAndAnothersAlike: a read of another's pkey and of
// an unknown one answer byte for byte alike, bar the pkey itself.
func TestPrincipalsUnknownAndAnothersAlike(t *testing.T) {
	srv, _ := principalsServer(t, true)
	if status, body := send(t, srv, asKubernetes, "POST", "/ufmRest/resources/pkeys", `{"pkey":"0x1001","guids":["`+podGUID1+`"]}`); status != 200 {
		t.Fatalf("bind: %d %s", status, body)
	}
	for _, req := range []struct{ method, path string }{
		{"GET", "/ufmRestV3/resources/pkeys/%s?guids_data=true"}, {"DELETE", "/ufmRestV3/resources/pkeys/%s"}} {
		s1, another := send(t, srv, asNICo, req.method, strings.Replace(req.path, "%s", "0x1001", 1), "")
		s2, unknown := send(t, srv, asNICo, req.method, strings.Replace(req.path, "%s", "0x1002", 1), "")
		if s1 != s2 || strings.ReplaceAll(another, "0x1001", "0x1002") != unknown {
			t.Errorf("%s: another's %d %s, unknown %d %s", req.method, s1, another, s2, unknown)
		}
	}
}

// TestPrincipalsRotation: SIGHUP's SetCredentials gives nico a new token,
// the previous one still accepted, and the one before refused.
func TestPrincipalsRotation(t *testing.T) {
	srv, _ := principalsServer(t, false)
	apiSrv := srv.Config.Handler.(*Server)
	apiSrv.SetCredentials(Credentials{Token: token, PKeys: map[string]PKeysCredentials{
		"ufm_pkeys:nico": {Token: "s3cret-nico-token-next", PreviousTokens: []string{nicoToken}}}})
	for _, c := range []struct {
		as   caller
		want int
	}{{caller{"nico", "Basic s3cret-nico-token-next"}, 200}, {asNICo, 200},
		{caller{"nico", "Basic s3cret-nico-token-older"}, 401}, {asSlurm, 401}} {
		if status, body := send(t, srv, c.as, "GET", "/ufmRestV3/resources/pkeys", ""); status != c.want {
			t.Errorf("%s: %d %s, want %d", c.as.auth[:12], status, body, c.want)
		}
	}
}
