package e2e

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/managerproc"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload/tlstest"
)

// managerBinary is built once by TestMain.
var managerBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "afm-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	managerBinary = filepath.Join(dir, "alternative-fabric-manager")
	build := exec.Command("go", "build", "-o", managerBinary, "../cmd/alternative-fabric-manager")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the manager:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const token = "e2e-token-0123456789"

// manager is one running manager process, driving a real OpenSM on a simulated fabric.
type manager struct {
	t      *testing.T
	fabric *fabricsim.Fabric
	dir    string
	url    string
	conf   string
	proc   *managerproc.Process
	client *http.Client
	debug  bool // start with --debug (the apply steps are logged)
	// binary is the manager's executable, which its operator commands
	// (tryOperator) run too: managerBinary unless settings.Binary says otherwise.
	binary string
	// The API's certificate and key with settings.CA; "" for plain HTTP.
	certFile, keyFile string
	// debugAddr is the manager's debug_listen (pprof), where a request that
	// times out reads what every goroutine was doing; "" without one.
	debugAddr string
}

// startManager starts ibsim, writes afm.conf for the database, runs the
// manager until the test ends, and confirms the fabric's switches once OpenSM
// has swept, so that jobs complete. apiLines are extra [api] settings.
func startManager(t *testing.T, db storetest.Database, hosts int, apiLines ...string) *manager {
	t.Helper()
	m := launchManager(t, db, fabricsim.Options{Hosts: hosts}, settings{API: apiLines})
	m.confirmSwitches()
	return m
}

// settings are afm.conf lines a test adds to the harness's.
type settings struct {
	API        []string // [api]
	OpenSM     []string // [opensm]
	OpenSMConf []string // [opensm_conf]
	Log        []string // [log]
	UFMPKeys   []string // [ufm_pkeys]
	Database   []string // [database]
	// Binary, when set, is the manager's executable instead of this tree's
	// (a previous release's, in the upgrade test).
	Binary string
	// CA, when set, issues the API's certificate: the manager serves HTTPS and
	// the harness's client trusts only this CA, as networking-mlnx does with
	// [sdn] cert_verify = True and cert_path.
	CA *tlstest.CA
	// Fabric, when set, is the simulated fabric to run on instead of a new
	// one; BeforeStart runs once afm.conf is written, before the manager
	// starts (the switch-over test adopts the running fabric's partitions).
	Fabric      *fabricsim.Fabric
	BeforeStart func(m *manager)
}

// launchManager is startManager without confirming the switches.
func launchManager(t *testing.T, db storetest.Database, o fabricsim.Options, extra settings) *manager {
	t.Helper()
	f := extra.Fabric
	if f == nil {
		f = fabricsim.StartT(t, o)
	}
	m := newManager(t, f, extra.Binary)
	dir := m.dir
	if extra.CA != nil {
		m.certFile, m.keyFile = filepath.Join(dir, "api-cert.pem"), filepath.Join(dir, "api-key.pem")
		extra.CA.WritePair(m.certFile, m.keyFile)
		extra.API = append(extra.API, "tls_cert_file = "+m.certFile, "tls_key_file = "+m.keyFile)
		m.url = "https://" + strings.TrimPrefix(m.url, "http://")
		m.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: extra.CA.Pool()}}
	}
	if !containsPrefix(extra.API, "debug_listen") {
		m.debugAddr = freeAddr(t)
		extra.API = append(extra.API, "debug_listen = "+m.debugAddr)
	}
	conf := testenv.AFMConf{
		Listen: strings.TrimPrefix(strings.TrimPrefix(m.url, "http://"), "https://"), Token: token, API: extra.API,
		Connection: db.URL, Database: append([]string{"poll_interval = 0.2"}, extra.Database...),
		ConfigDir: filepath.Join(dir, "opensm"), EnvFile: f.EnvFile(),
		OpenSM: append([]string{"check_interval = 2", "sweep_timeout = 20"}, extra.OpenSM...),
		GUID:   f.SMGUID.String(), OpenSMConf: extra.OpenSMConf,
		Sections: []testenv.Section{{Name: "log", Lines: extra.Log}, {Name: "ufm_pkeys", Lines: extra.UFMPKeys}},
	}
	m.writeConf(conf.String())
	if extra.BeforeStart != nil {
		extra.BeforeStart(m)
	}
	m.startUntilCleanup()
	return m
}

// newManager is the harness's manager of fabric f, in a directory of its own,
// with its API on a free address: binary, or this tree's when "". Nothing is
// written or started yet.
func newManager(t *testing.T, f *fabricsim.Fabric, binary string) *manager {
	dir := t.TempDir()
	return &manager{t: t, fabric: f, dir: dir, conf: filepath.Join(dir, "afm.conf"), binary: cmp.Or(binary, managerBinary),
		url: "http://" + freeAddr(t), client: &http.Client{Timeout: 10 * time.Second}}
}

// writeConf writes conf as the manager's afm.conf.
func (m *manager) writeConf(conf string) {
	m.t.Helper()
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		m.t.Fatal(err)
	}
}

// startUntilCleanup starts the manager and stops it when the test ends.
func (m *manager) startUntilCleanup() {
	m.t.Helper()
	m.start()
	m.t.Cleanup(m.stop)
}

func (m *manager) start() {
	m.t.Helper()
	args := []string{"--config-file", m.conf}
	if m.debug {
		args = append(args, "--debug")
	}
	p, err := managerproc.Start(context.Background(), managerproc.Options{
		Binary: m.binary, Args: args, Log: filepath.Join(m.dir, "manager.log"),
		Serving: managerproc.Answers(m.client, m.url+"/healthz"), Within: 30 * time.Second})
	if err != nil {
		m.t.Fatalf("%v:\n%s", err, m.log())
	}
	m.proc = p
}

func (m *manager) stop() {
	if m.proc == nil {
		return
	}
	m.proc.Stop(20 * time.Second)
	if m.t.Failed() {
		m.t.Logf("manager log:\n%s", m.log())
	}
}

// goroutines is what the manager's goroutines are doing, read from its pprof,
// for a request that got no answer: where it waits, or that the whole process
// was stalled (pprof does not answer either).
func (m *manager) goroutines() string {
	if m.debugAddr == "" {
		return ""
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + m.debugAddr + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return fmt.Sprintf("\nthe manager's pprof did not answer either (%v)", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return "\nthe manager's goroutines:\n" + string(b)
}

func (m *manager) log() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "manager.log"))
	return string(b)
}

// send makes a request as networking-mlnx does; it returns the status and body.
func (m *manager) send(method, path, body string) (int, string) {
	m.t.Helper()
	req, err := http.NewRequest(method, m.url+"/ufmRestV3"+path, strings.NewReader(body))
	if err != nil {
		m.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatalf("%s %s: %v%s", method, path, err, m.goroutines())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// accept sends a change and returns the job path of its 202.
func (m *manager) accept(method, path, body string) string {
	m.t.Helper()
	status, answer := m.send(method, path, body)
	if status != http.StatusAccepted {
		m.t.Fatalf("%s %s: status %d, want 202: %s", method, path, status, answer)
	}
	var job string
	if err := json.Unmarshal([]byte(answer), &job); err != nil || !strings.HasPrefix(job, "app/jobs/") {
		m.t.Fatalf("%s %s: body %q is not a job path", method, path, answer)
	}
	return job
}

type jobStatus struct {
	ID, Status, Summary, Description string
}

// waitCompleted polls the job as networking-mlnx does (but much faster) and
// calls atCompletion the moment the job first reads Completed.
// job reads a job as networking-mlnx does.
func (m *manager) job(job string) jobStatus {
	m.t.Helper()
	status, body := m.send("GET", "/"+job, "")
	if status != http.StatusOK {
		m.t.Fatalf("GET %s: %d %s", job, status, body)
	}
	var j jobStatus
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		m.t.Fatalf("GET %s: %v: %s", job, err, body)
	}
	return j
}

func (m *manager) waitCompleted(job string, atCompletion func()) jobStatus {
	m.t.Helper()
	var j jobStatus
	testenv.Await(m.t, "job "+job+" Completed", 60*time.Second, 5*time.Millisecond, func() (bool, error) {
		j = m.job(job)
		switch j.Status {
		case "Completed":
			return true, nil
		case "Pending", "Running":
		default:
			m.t.Fatalf("job %s: status %q: %+v", job, j.Status, j)
		}
		return false, fmt.Errorf("%+v", j)
	})
	if atCompletion != nil {
		atCompletion()
	}
	return j
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func fixture(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
