package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload/tlstest"
)

// Operating the manager: metrics after real applies, readiness, HTTPS with
// certificate rotation, SIGHUP, and the least-privilege checks at start-up.

const metricsToken = "e2e-metrics-token"

// scrape reads url's metrics in Prometheus' text format, with the bearer token
// if not empty, and returns them by name.
func (m *manager) scrape(url, bearer string) map[string]*dto.MetricFamily {
	m.t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		m.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		m.t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		m.t.Fatalf("scrape %s: not Prometheus' text format: %v", url, err)
	}
	return families
}

// onDefault is the label of the default fabric's series (every series a
// fabric owns carries its fabric).
const onDefault = "fabric=default"

// sample is the value of name's series with exactly labels ("k=v" each); ok
// is false when there is no such series. A histogram's value is its count.
func sample(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, s := range f.GetMetric() {
		var got []string
		for _, l := range s.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		if strings.Join(got, ",") != strings.Join(labels, ",") {
			continue
		}
		switch {
		case s.Gauge != nil:
			return s.Gauge.GetValue(), true
		case s.Counter != nil:
			return s.Counter.GetValue(), true
		case s.Histogram != nil:
			return float64(s.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// readyz returns /readyz's status and body.
func (m *manager) readyz() (int, readyReport) {
	m.t.Helper()
	resp, err := m.client.Get(m.url + "/readyz")
	if err != nil {
		m.t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	var r readyReport
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		m.t.Fatalf("GET /readyz: body is not JSON: %v", err)
	}
	return resp.StatusCode, r
}

type readyReport struct {
	Status  string
	Role    string
	Reasons []string
	Fabrics map[string]string
}

// TestMetricsAfterApplies: a gate closed, then real applies on the simulated
// fabric, each seen in the metrics served on their own listener behind their
// token, parsed as Prometheus parses them. Readiness, request IDs and pprof's
// listener too.
func TestMetricsAfterApplies(t *testing.T) {
	metricsAddr, debugAddr := freeAddr(t), freeAddr(t)
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricOptions(2),
		settings{API: []string{"metrics_listen = " + metricsAddr, "metrics_token = " + metricsToken, "access_log = true",
			"debug_listen = " + debugAddr}})
	metricsURL := "http://" + metricsAddr + "/metrics"

	// Before --confirm-switches: the gate is closed, and the metrics say which.
	job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	m.waitDescription(job, "No expected switches")
	m.waitGateClosed(metricsURL, "no_expected_switches")
	if f := m.scrape(metricsURL, metricsToken); func() bool {
		age, ok := sample(f, "afm_job_oldest_age_seconds", onDefault, "status=Pending")
		run, _ := sample(f, "afm_job_oldest_age_seconds", onDefault, "status=Running")
		return !ok || max(age, run) <= 0
	}() {
		t.Errorf("a job waits at a closed gate, but no open job has an age: %v", f["afm_job_oldest_age_seconds"])
	}
	m.confirmSwitches()
	m.waitCompleted(job, nil)
	portJob := m.postPortWithRequestID(m.fabric.Host("H1").PortGUID, "req-e2e-0001")
	m.waitCompleted(portJob, nil)

	m.checkMetricsGuarded(metricsURL)

	var f map[string]*dto.MetricFamily
	waitFor(t, "the gates open in the metrics", func() bool {
		f = m.scrape(metricsURL, metricsToken)
		v, ok := sample(f, "afm_gates_closed", onDefault)
		return ok && v == 0
	})
	checkMetricsAfterApplies(t, f)
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if f[name] == nil {
			t.Errorf("%s missing: the runtime's and the process' collectors are not registered", name)
		}
	}

	if status, r := m.readyz(); status != http.StatusOK || r.Status != "ok" || r.Role != "leader" || len(r.Reasons) != 0 ||
		len(r.Fabrics) != 1 || r.Fabrics["default"] != "ready" {
		t.Errorf("/readyz = %d %+v; want 200, ok, leader, no reasons, the default fabric ready", status, r)
	}
	// The request's ID is in its access-log line.
	m.waitLog(`"msg":"http request"`, `"request_id":"req-e2e-0001"`, `"route":"Port"`, `"status":202`,
		`"job":`+strings.TrimPrefix(portJob, "app/jobs/"))
	m.checkPProfOnlyOn(debugAddr)
}

// waitGateClosed waits until the metrics say a gate of kind is closed.
func (m *manager) waitGateClosed(metricsURL, kind string) {
	m.t.Helper()
	waitFor(m.t, "afm_gate_closed{gate="+kind+"}", func() bool {
		f := m.scrape(metricsURL, metricsToken)
		for _, s := range f["afm_gate_closed"].GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "gate" && l.GetValue() == kind {
					return true
				}
			}
		}
		return false
	})
}

// postPortWithRequestID adds the host port guid to the network of
// network_create_vlan.json, sending requestID, and returns the job.
func (m *manager) postPortWithRequestID(guid fabric.GUID, requestID string) string {
	m.t.Helper()
	req, err := http.NewRequest("POST", m.url+"/ufmRestV3/cloudx/Port",
		strings.NewReader(portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(guid))))
	if err != nil {
		m.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+token)
	req.Header.Set("X-Request-ID", requestID)
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	var job string
	json.NewDecoder(resp.Body).Decode(&job)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Request-ID") != requestID {
		m.t.Fatalf("POST Port: %d, X-Request-ID %q; want 202 and the request's ID back", resp.StatusCode, resp.Header.Get("X-Request-ID"))
	}
	return job
}

// checkMetricsGuarded: the metrics are not on the API's listener, and want
// their token.
func (m *manager) checkMetricsGuarded(metricsURL string) {
	m.t.Helper()
	if resp, err := m.client.Get(m.url + "/metrics"); err != nil || resp.StatusCode == http.StatusOK {
		m.t.Errorf("GET /metrics on the API listener: %v %v; want it served only on metrics_listen", resp.StatusCode, err)
	}
	for _, bearer := range []string{"", "wrong-token-wrong-token"} {
		req, _ := http.NewRequest("GET", metricsURL, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if resp, err := m.client.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			m.t.Errorf("scrape with token %q: %v %v; want 401", bearer, resp.StatusCode, err)
		}
	}
}

// checkMetricsAfterApplies checks a scrape taken once the network's and the
// port's jobs completed and the gates opened.
func checkMetricsAfterApplies(t *testing.T, f map[string]*dto.MetricFamily) {
	t.Helper()
	type want struct {
		name   string
		labels []string
		check  func(float64) bool
		what   string
	}
	atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
	equal := func(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
	recorded, _ := sample(f, "afm_revision_recorded", onDefault)
	for _, w := range []want{
		{"afm_leader", []string{onDefault}, equal(1), "1"},
		{"afm_ready", []string{onDefault}, equal(1), "1"},
		{"afm_database_up", []string{onDefault}, equal(1), "1"},
		{"afm_opensm_up", []string{onDefault}, equal(1), "1"},
		{"afm_applies_total", []string{onDefault, "outcome=applied"}, atLeast(2), ">= 2 (the network, the port)"},
		{"afm_apply_duration_seconds", []string{onDefault, "outcome=applied"}, atLeast(2), ">= 2 observations"},
		{"afm_apply_phase_duration_seconds", []string{onDefault, "phase=render"}, atLeast(2), ">= 2 observations"},
		{"afm_apply_phase_duration_seconds", []string{onDefault, "phase=write"}, atLeast(2), ">= 2 observations"},
		{"afm_apply_phase_duration_seconds", []string{onDefault, "phase=sweep"}, atLeast(2), ">= 2 observations"},
		{"afm_apply_phase_duration_seconds", []string{onDefault, "phase=complete"}, atLeast(2), ">= 2 observations"},
		{"afm_jobs", []string{onDefault, "status=Completed"}, equal(2), "2"},
		{"afm_jobs", []string{onDefault, "status=Pending"}, equal(0), "0"},
		{"afm_job_oldest_age_seconds", []string{onDefault, "status=Pending"}, equal(0), "0 (none waits)"},
		{"afm_revision_applied", []string{onDefault}, equal(recorded), fmt.Sprintf("the recorded revision, %v", recorded)},
		{"afm_revision_recorded", []string{onDefault}, atLeast(2), ">= 2"},
		{"afm_last_apply_failed", []string{onDefault}, equal(0), "0"},
		{"afm_leader_term", []string{onDefault}, atLeast(1), ">= 1"},
		{"afm_enforcement_errors", []string{onDefault}, equal(0), "0"},
		{"afm_opensm_restarts_total", []string{onDefault}, equal(0), "0"},
		{"afm_http_requests_total", []string{"code=202", "method=POST", "route=Port"}, equal(1), "1"},
		{"afm_http_requests_total", []string{"code=202", "method=POST", "route=Network"}, equal(1), "1"},
		{"afm_http_requests_total", []string{"code=200", "method=GET", "route=app/jobs/:id"}, atLeast(2), ">= 2 polls"},
		{"afm_http_request_duration_seconds", []string{"method=POST", "route=Port"}, equal(1), "1 observation"},
	} {
		v, ok := sample(f, w.name, w.labels...)
		if !ok || !w.check(v) {
			t.Errorf("%s{%s} = %v (present: %v), want %s", w.name, strings.Join(w.labels, ","), v, ok, w.what)
		}
	}
}

// checkPProfOnlyOn: pprof is served on debug_listen only.
func (m *manager) checkPProfOnlyOn(debugAddr string) {
	m.t.Helper()
	if resp, err := m.client.Get("http://" + debugAddr + "/debug/pprof/cmdline"); err != nil || resp.StatusCode != http.StatusOK {
		m.t.Errorf("pprof on debug_listen: %v %v; want 200", resp, err)
	}
	if resp, err := m.client.Get(m.url + "/debug/pprof/cmdline"); err != nil || resp.StatusCode == http.StatusOK {
		m.t.Errorf("pprof on the API listener: %v %v; want it served only on debug_listen", resp, err)
	}
}

// fabricOptions is a fabric of hosts hosts behind one switch.
func fabricOptions(hosts int) fabricsim.Options { return fabricsim.Options{Hosts: hosts} }

// waitLog waits for a manager log line, at any level, that holds every part.
func (m *manager) waitLog(parts ...string) {
	m.t.Helper()
	waitUntil(m.t, "log line "+strings.Join(parts, " ... "), func() (bool, error) {
		var last string
		for line := range strings.Lines(m.log()) {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true, nil
			}
			last = line
		}
		return false, fmt.Errorf("the log ends with %q", last)
	})
}

// TestReadyzFlipsWhenTheDatabaseStops: on PostgreSQL servers of its own (the
// shared ones serve other suites), /readyz answers 200, then 503 naming the
// database once the server is stopped, while /healthz stays 200: a database
// outage is no reason to restart the manager.
func TestReadyzFlipsWhenTheDatabaseStops(t *testing.T) {
	servers := startPrivateServers(t)
	m := startManager(t, servers.newDatabase(t, config.EnginePostgres), 1, "metrics_token = "+metricsToken)
	job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	m.waitCompleted(job, nil)
	if status, r := m.readyz(); status != http.StatusOK || r.Status != "ok" {
		t.Fatalf("/readyz with the database up = %d %+v; want 200 ok", status, r)
	}
	// The image's HEALTHCHECK.
	if out, err := m.tryOperator("--healthcheck"); err != nil || !strings.Contains(out, `"status":"ok"`) {
		t.Errorf("--healthcheck with the database up: %v: %s; want success and the report", err, out)
	}

	servers.stop(t)
	var r readyReport
	waitFor(t, "/readyz 503 naming the database", func() bool {
		var status int
		status, r = m.readyz()
		return status == http.StatusServiceUnavailable && r.Status == "fail" && containsPrefix(r.Reasons, "the database does not answer")
	})
	if !strings.HasPrefix(r.Fabrics["default"], "the database does not answer") {
		t.Errorf("/readyz's fabrics while the database is down = %q, want the default fabric's reason", r.Fabrics)
	}
	// /readyz answers anyone: the driver's error, which names the server's
	// address and the user, is in the log alone.
	if body, _ := json.Marshal(r); strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), "user=") {
		t.Errorf("/readyz while the database is down carries the driver's error: %s", body)
	}
	m.waitLog(`"msg":"readiness: the database does not answer"`, `"error":`)
	resp, err := m.client.Get(m.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz while the database is down: %v %v; want 200 (liveness)", resp.StatusCode, err)
	}
	if out, err := m.tryOperator("--healthcheck"); err == nil || !strings.Contains(out, "the database does not answer") {
		t.Errorf("--healthcheck with the database down: %v: %s; want a failure naming the database", err, out)
	}
	f := m.scrape(m.url+"/metrics", metricsToken)
	if v, ok := sample(f, "afm_ready", onDefault); !ok || v != 0 {
		t.Errorf("afm_ready = %v (present %v) while the database is down, want 0", v, ok)
	}
	if v, ok := sample(f, "afm_database_up", onDefault); !ok || v != 0 {
		t.Errorf("afm_database_up = %v (present %v) while the database is down, want 0", v, ok)
	}
	if _, ok := sample(f, "afm_jobs", onDefault, "status=Completed"); ok {
		t.Errorf("afm_jobs reported while the database is down")
	}
}

// TestHTTPSWithCertificateRotation: the API over HTTPS with a test CA, as
// networking-mlnx drives it with cert_verify; a rotated certificate is served
// without a restart, both when the files change and at once on SIGHUP.
func TestHTTPSWithCertificateRotation(t *testing.T) {
	ca := tlstest.NewCA(t)
	mt := launchTLS(t, ca)
	job := mt.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	mt.waitCompleted(job, nil)
	h1 := mt.fabric.Host("H1").PortGUID
	job = mt.accept("POST", "/cloudx/Port", portBody("8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", netID, vendorClientID(h1)))
	mt.waitCompleted(job, nil)
	if got := mt.pkeys(h1); !containsPKey(got, 0x8065) {
		t.Fatalf("over HTTPS: H1's pkeys %s lack 0x8065", hex(got))
	}
	if out, err := mt.tryOperator("--healthcheck"); err != nil {
		t.Errorf("--healthcheck over HTTPS: %v: %s", err, out)
	}

	// Plain HTTP and a client that does not trust the CA are refused.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + strings.TrimPrefix(mt.url, "https://") + "/healthz"); err == nil && resp.StatusCode == http.StatusOK {
		t.Error("plain HTTP served on the HTTPS listener")
	}
	if _, err := (&http.Client{Timeout: 5 * time.Second}).Get(mt.url + "/healthz"); err == nil {
		t.Error("a client that does not trust the test CA was served")
	}

	first := mt.servedSerial()
	second := ca.WritePair(mt.certFile, mt.keyFile)
	waitFor(t, "the rotated certificate served", func() bool { return mt.servedSerial() == second })
	if first == second {
		t.Fatal("the test CA issued the same serial twice")
	}
	third := ca.WritePair(mt.certFile, mt.keyFile)
	mt.proc.Signal(syscall.SIGHUP)
	mt.waitLog("SIGHUP received", "TLS certificate and key")
	if got := mt.servedSerial(); got != third {
		t.Errorf("after SIGHUP: serial %d served, want %d", got, third)
	}
	job = mt.accept("DELETE", "/cloudx/Port/8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94", "")
	mt.waitCompleted(job, nil)
}

// launchTLS starts a manager serving HTTPS with a certificate from ca.
func launchTLS(t *testing.T, ca *tlstest.CA) *manager {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricOptions(2), settings{CA: ca})
	m.confirmSwitches()
	return m
}

// servedSerial is the serial number of the certificate a new TLS connection
// gets.
func (m *manager) servedSerial() int64 {
	m.t.Helper()
	tr := m.client.Transport.(*http.Transport)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(m.url, "https://"), tr.TLSClientConfig.Clone())
	if err != nil {
		m.t.Fatalf("TLS handshake: %v", err)
	}
	defer conn.Close()
	state := conn.ConnectionState()
	if state.Version < tls.VersionTLS12 {
		m.t.Errorf("TLS version %x negotiated, want 1.2 or newer", state.Version)
	}
	return state.PeerCertificates[0].SerialNumber.Int64()
}

func containsPKey(pkeys []uint16, p uint16) bool {
	for _, k := range pkeys {
		if k == p {
			return true
		}
	}
	return false
}

// TestSIGHUPSurvived: a SIGHUP (a closed terminal, systemctl reload) leaves
// the manager and its OpenSM running, says what it re-read and which changed
// settings need a restart, and jobs keep completing. OpenSM runs in a process
// group of its own, so a hangup of the manager's never reaches it. The log is
// in the text format here, as [log] format = text writes it.
func TestSIGHUPSurvived(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricOptions(1), settings{Log: []string{"format = text"}})
	m.confirmSwitches()
	job := m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json"))
	m.waitCompleted(job, nil)
	smPID := m.openSMPID()
	managerPGID, err := syscall.Getpgid(m.proc.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if pgid, err := syscall.Getpgid(smPID); err != nil || pgid == managerPGID {
		t.Errorf("OpenSM's process group %d (%v) is the manager's %d: a hangup would reach it", pgid, err, managerPGID)
	}

	// An edit that needs a restart is reported, not applied.
	conf, err := os.ReadFile(m.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.conf, []byte(strings.Replace(string(conf), "check_interval = 2", "check_interval = 3", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := m.proc.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.waitLog("SIGHUP received", "[opensm] check_interval")
	select {
	case <-m.proc.Exited():
		t.Fatalf("the manager exited on SIGHUP:\n%s", m.log())
	default:
	}
	if got := m.openSMPID(); got != smPID {
		t.Errorf("OpenSM's pid went from %d to %d after SIGHUP: it was restarted", smPID, got)
	}
	job = m.accept("DELETE", "/cloudx/Network/"+netID, "")
	m.waitCompleted(job, nil)
	// Durations are readable in the text format ("took=12.3ms"), not nanoseconds.
	if !strings.Contains(m.log(), "level=INFO msg=\"partitions applied\"") || !strings.Contains(m.log(), "s render=") {
		t.Errorf("the text log lacks a readable \"partitions applied\" line:\n%s", m.log())
	}

	// SIGTERM, by contrast, stops the manager cleanly, and OpenSM with it. (The
	// wait only keeps a hung manager from hanging the test.)
	if err := m.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.proc.Exited():
	case <-time.After(time.Minute):
		t.Fatalf("the manager did not stop on SIGTERM:\n%s", m.log())
	}
	if code := m.proc.ExitCode(); code != 0 {
		t.Errorf("the manager exited %d on SIGTERM, want 0", code)
	}
	if processRuns(smPID) {
		t.Errorf("OpenSM (%d) still runs after the manager stopped", smPID)
	}
	if !strings.Contains(m.log(), "msg=\"OpenSM stopped\"") {
		t.Errorf("the log does not say OpenSM stopped:\n%s", m.log())
	}
}

// TestLeastPrivilege: a short token is refused at start-up with advice, and
// the SQLite database, config_dir and opensm.conf are private to the
// manager's user.
func TestLeastPrivilege(t *testing.T) {
	t.Run("ShortTokenRefused", func(t *testing.T) {
		dir := t.TempDir()
		conf := filepath.Join(dir, "afm.conf")
		text := testenv.AFMConf{Listen: freeAddr(t), Token: "short-token",
			Connection: "sqlite:///" + filepath.Join(dir, "afm.db"), ConfigDir: filepath.Join(dir, "opensm")}
		if err := text.Write(conf); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(managerBinary, "--config-file", conf).CombinedOutput()
		if code := exitCode(err); code != 1 {
			t.Fatalf("exit code %d (%v), want 1:\n%s", code, err, out)
		}
		for _, want := range []string{"[api] token is 11 characters long", "at least 16", "openssl rand -hex 32"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(string(out), "short-token") {
			t.Errorf("the refusal shows the token:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(dir, "afm.db")); err == nil {
			t.Error("the database was created although the manager refused to start")
		}
	})
	t.Run("FileModes", func(t *testing.T) {
		db := storetest.NewDatabase(t, config.EngineSQLite)
		m := startManager(t, db, 1)
		configDir := filepath.Join(m.dir, "opensm")
		for path, want := range map[string]fs.FileMode{
			db.DSN:                                  0o600,
			configDir:                               0o700 | fs.ModeDir,
			filepath.Join(configDir, "opensm.conf"): 0o600,
		} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Error(err)
				continue
			}
			if got := fi.Mode() & (fs.ModePerm | fs.ModeDir); got != want {
				t.Errorf("%s has mode %v, want %v", path, got, want)
			}
		}
		// SQLite's journal files take the database's mode.
		for _, suffix := range []string{"-wal", "-shm"} {
			if fi, err := os.Stat(db.DSN + suffix); err == nil && fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s%s has mode %v, readable by others", db.DSN, suffix, fi.Mode().Perm())
			}
		}
	})
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// privateServers are PostgreSQL and MariaDB servers of one test, which it may
// stop.
type privateServers struct {
	dir string
	env map[string]string
}

// startPrivateServers starts servers with scripts/test-env.sh, stopped when
// the test ends.
func startPrivateServers(t *testing.T) *privateServers {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "afm-e2e-ops-")
	if err != nil {
		t.Fatal(err)
	}
	s := &privateServers{dir: dir, env: map[string]string{}}
	t.Cleanup(func() {
		s.stop(t)
		os.RemoveAll(dir)
	})
	if out, err := exec.Command("bash", "../scripts/test-env.sh", "start", dir, "--no-galera").CombinedOutput(); err != nil {
		t.Fatalf("test-env.sh start: %v:\n%s", err, out)
	}
	f, err := os.Open(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		s.env[k] = v
	}
	return s
}

func (s *privateServers) stop(t *testing.T) {
	if out, err := exec.Command("bash", "../scripts/test-env.sh", "stop", s.dir).CombinedOutput(); err != nil {
		t.Errorf("test-env.sh stop: %v:\n%s", err, out)
	}
}

// newDatabase makes a database on the private server of engine.
func (s *privateServers) newDatabase(t *testing.T, engine string) storetest.Database {
	t.Helper()
	key := "AFM_TEST_POSTGRES_URL"
	if engine == config.EngineMySQL {
		key = "AFM_TEST_MYSQL_URL"
	}
	t.Setenv(key, s.env[key])
	return storetest.NewDatabase(t, engine)
}
