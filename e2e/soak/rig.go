package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/managerproc"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

const apiToken = "soak-token-0123456789"

// manager is one manager process on the rig's fabric and database.
type manager struct {
	index   int
	dir     string // its afm.conf, log and OpenSM config_dir live here
	conf    string
	url     string
	binary  string
	proc    *managerproc.Process
	running bool
	proxy   *proxy // between it and its database server; nil on SQLite
	node    int    // the Galera node its proxy leads to
}

func (m *manager) configDir() string { return filepath.Join(m.dir, "opensm") }
func (m *manager) logPath() string   { return filepath.Join(m.dir, "manager.log") }

// storageDir is the storage fabric's config_dir (two fabrics): its OpenSM
// runs there, with its partitions file and log.
func (m *manager) storageDir() string { return filepath.Join(m.dir, storageDirName) }

// start runs the manager and waits until it serves /healthz.
func (m *manager) start(ctx context.Context, client *http.Client) error {
	p, err := managerproc.Start(ctx, managerproc.Options{
		Binary: m.binary, Args: []string{"--config-file", m.conf, "--debug"}, Log: m.logPath(),
		Env: fabricsim.WithSbinPath(os.Environ()), Serving: managerproc.Answers(client, m.url+"/healthz"),
		Within: 60 * time.Second})
	if err != nil {
		return fmt.Errorf("manager %d: %w", m.index, err)
	}
	m.proc, m.running = p, true
	return nil
}

// kill sends SIGKILL and waits until the manager and its OpenSMs (one a
// fabric) are gone.
func (m *manager) kill() error {
	if !m.running {
		return nil
	}
	sms := []int{m.openSMPID()}
	if sm := m.openSMIn(m.storageDir()); sm != 0 && sm != sms[0] {
		sms = append(sms, sm)
	}
	m.proc.Kill()
	m.running = false
	for _, sm := range sms {
		if sm != 0 && !waitGone(sm, 30*time.Second) {
			return fmt.Errorf("OpenSM (pid %d) outlived its manager by 30 s", sm)
		}
	}
	return nil
}

// stop ends the manager with SIGTERM (SIGKILL after 20 s).
func (m *manager) stop() {
	if !m.running {
		return
	}
	m.proc.Signal(syscall.SIGTERM)
	select {
	case <-m.proc.Exited():
	case <-time.After(20 * time.Second):
		m.kill()
	}
	m.running = false
}

// openSMPID is the PID of the manager's OpenSM child, 0 when none runs.
func (m *manager) openSMPID() int { return m.openSMIn("") }

// openSMIn is the PID of the manager's OpenSM child that runs in configDir
// (each fabric's OpenSM runs in its config_dir; "": any), 0 when none runs.
func (m *manager) openSMIn(configDir string) int {
	if !m.running {
		return 0
	}
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(m.proc.Pid()), "task", "*", "children"))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			comm, _ := os.ReadFile(filepath.Join("/proc", c, "comm"))
			cwd, _ := os.Readlink(filepath.Join("/proc", c, "cwd"))
			if strings.TrimSpace(string(comm)) == "opensm" && (configDir == "" || cwd == configDir) {
				n, _ := strconv.Atoi(c)
				if processRuns(n) {
					return n
				}
			}
		}
	}
	return 0
}

// processRuns says whether pid is a live (not zombie) process.
func processRuns(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

func waitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for processRuns(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// leaseTimeout is the [ha] lease_timeout of several managers: short, so that
// a killed leader is replaced within seconds and failovers do not dominate the
// run's time (docs/soak.md).
const leaseTimeout = 3 * time.Second

// writeConf writes the manager's afm.conf. With several managers (ha), each
// runs its OpenSM on an SM HCA of its own (the k-th for manager k-1). With
// a storage fabric, it is the manager's [fabric:storage] too.
func (m *manager) writeConf(dbURL string, f, storage *fabricsim.Fabric, ha, kube bool) error {
	addr, err := fabricsim.FreeAddr()
	if err != nil {
		return err
	}
	m.url = "http://" + addr
	if err := m.writeEnv(f); err != nil {
		return err
	}
	_, guid := f.SMEnv(m.index + 1)
	conf := testenv.AFMConf{
		Listen: addr, Token: apiToken, API: []string{"physical_networks = " + ourPhysnet},
		Connection: dbURL, Database: []string{"poll_interval = 0.2"},
		ConfigDir: m.configDir(), EnvFile: m.envFile(),
		OpenSM: []string{"check_interval = 1", fmt.Sprintf("sweep_timeout = %g", sweepTimeout.Seconds())},
		GUID:   guid.String(),
	}
	if ha {
		conf.Sections = append(conf.Sections, testenv.Section{Name: "ha",
			Lines: []string{"ha = true", fmt.Sprintf("lease_timeout = %g", leaseTimeout.Seconds())}})
	}
	if kube {
		conf.Sections = append(conf.Sections, testenv.Section{Name: "ufm_pkeys",
			Lines: []string{"username = " + kubeUser, "password = " + kubePassword, "pkey_range = " + kubePKeyRange}})
	}
	if storage != nil {
		sections, err := m.storageConf(storage)
		if err != nil {
			return err
		}
		conf.Sections = append(conf.Sections, sections...)
	}
	return conf.Write(m.conf)
}

func (m *manager) envFile() string { return filepath.Join(m.dir, "opensm.env") }

// writeEnv writes the environment the manager's OpenSM attaches to the
// simulator with: its SM HCA, the fabric's socket (OpenSM reads the file at
// every start, so a simulator started again is written here again).
func (m *manager) writeEnv(f *fabricsim.Fabric) error {
	env, _ := f.SMEnv(m.index + 1)
	return os.WriteFile(m.envFile(), []byte(strings.Join(env, "\n")+"\n"), 0o644)
}

// confirmSwitches records the fabric's switches as expected, once OpenSM has
// written its first subnet dump (until then no job completes).
func (m *manager) confirmSwitches(ctx context.Context) error {
	return fabricsim.ConfirmSwitches(ctx, m.binary, m.conf, m.configDir())
}

// answer is a request's outcome as the driver sees it.
type answer struct {
	Status int
	Body   string
	Err    error // no answer at all
}

func (a answer) String() string {
	if a.Err != nil {
		return "no answer: " + a.Err.Error()
	}
	return fmt.Sprintf("%d %s", a.Status, strings.TrimSpace(a.Body))
}

// send makes a request as networking-mlnx does.
func send(ctx context.Context, client *http.Client, baseURL, method, path, body string) answer {
	req, err := http.NewRequestWithContext(ctx, method, baseURL+"/ufmRestV3"+path, strings.NewReader(body))
	if err != nil {
		return answer{Err: err}
	}
	req.Header.Set("Authorization", "Basic "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return answer{Err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Body: string(b)}
}

type jobStatus struct {
	ID, Status, Summary, Description string
}

func parseJobPath(body string) (string, error) {
	var job string
	if err := json.Unmarshal([]byte(body), &job); err != nil || !strings.HasPrefix(job, "app/jobs/") {
		return "", fmt.Errorf("body %q is not a job path", body)
	}
	return job, nil
}

// servers are a PostgreSQL and a MariaDB of the run's own, started with
// scripts/test-env.sh in a directory of the run: the database restart fault
// restarts them, and no other suite uses them.
type servers struct {
	dir                   string
	postgresURL, mysqlURL string
	galeraURLs            []string // node i+1's; empty unless started with a Galera cluster
}

// engineGalera is the soak's engine name for a three-node MariaDB Galera
// cluster (the manager's engine is mysql): managers spread over its nodes.
const engineGalera = "galera"

func startServers(ctx context.Context, dir string, galera bool) (*servers, error) {
	script, err := filepath.Abs(filepath.Join("scripts", "test-env.sh"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("scripts/test-env.sh: %w (run from the repository's root)", err)
	}
	s := &servers{dir: dir}
	args := []string{script, "start", dir}
	if !galera {
		args = append(args, "--no-galera") // seconds saved when no engine needs the cluster
	}
	out, err := exec.CommandContext(ctx, "bash", args...).CombinedOutput()
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("start database servers: %v: %s", err, out)
	}
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		s.stop()
		return nil, err
	}
	for _, l := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(l, "AFM_TEST_POSTGRES_URL="); ok {
			s.postgresURL = v
		}
		if v, ok := strings.CutPrefix(l, "AFM_TEST_MYSQL_URL="); ok {
			s.mysqlURL = v
		}
		if v, ok := strings.CutPrefix(l, "AFM_TEST_GALERA_URLS="); ok {
			s.galeraURLs = strings.Fields(strings.Trim(v, `"`))
		}
	}
	if galera && len(s.galeraURLs) != 3 {
		s.stop()
		return nil, fmt.Errorf("test-env.sh started no three-node Galera cluster (%q)", s.galeraURLs)
	}
	return s, nil
}

func (s *servers) stop() {
	if s == nil {
		return
	}
	script, _ := filepath.Abs(filepath.Join("scripts", "test-env.sh"))
	exec.Command("bash", script, "stop", s.dir).Run()
}

// createDatabase makes the engine's database for one run and returns its
// [database] connection URL (on Galera, node 1's: nodeURL gives the others).
func (s *servers) createDatabase(ctx context.Context, engine, dir, name string) (string, error) {
	switch engine {
	case engineGalera:
		return createOn(ctx, s.galeraURLs[0], name)
	case config.EngineSQLite:
		return "sqlite:///" + filepath.Join(dir, "afm.db"), nil
	case config.EnginePostgres:
		return createOn(ctx, s.postgresURL, name)
	case config.EngineMySQL:
		return createOn(ctx, s.mysqlURL, name)
	}
	return "", fmt.Errorf("unknown engine %q: want sqlite, postgres, mysql or galera", engine)
}

func createOn(ctx context.Context, serverURL, name string) (string, error) {
	db, err := testdb.Create(ctx, serverURL, name)
	return db.URL, err
}

// restart stops the engine's server (a fast shutdown: sessions are ended),
// waits down, and starts it again on the same port with the same data, with
// scripts/test-env.sh stop-server and start-server.
func (s *servers) restart(ctx context.Context, engine string, down time.Duration) error {
	server := map[string]string{config.EnginePostgres: "postgres", config.EngineMySQL: "mariadb"}[engine]
	if server == "" {
		return fmt.Errorf("no server to restart for %s", engine)
	}
	script, err := filepath.Abs(filepath.Join("scripts", "test-env.sh"))
	if err != nil {
		return err
	}
	for _, verb := range []string{"stop-server", "start-server"} {
		if verb == "start-server" {
			time.Sleep(down)
		}
		if out, err := exec.CommandContext(ctx, "bash", script, verb, s.dir, server).CombinedOutput(); err != nil {
			return fmt.Errorf("test-env.sh %s %s: %v: %s", verb, server, err, out)
		}
	}
	return nil
}
