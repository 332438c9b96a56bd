package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// cutDuration is how long the link to the database stays cut: longer than a
// minute, past OpenSM's M_Key lease and every deadline of the manager.
const cutDuration = 65 * time.Second

// TestDatabaseOutage runs one manager (no [ha]) on the simulated fabric
// against database servers of the test's own, and takes its database away:
// the server restarted under it, its sessions terminated, and the link to the
// database cut for longer than a minute (black-holed by a proxy, then
// restored). Each time OpenSM never stops (its PID, sampled throughout, stays
// the same), changes sent during the outage answer 503 with a JSON error
// saying the database is unreachable, a port change sent after the outage
// completes with its pkey in the host's real pkey table, and everything
// accepted before the outage completes too.
//
// The restart and the terminated sessions share one pair of servers, the cut
// another, so that the four runs (two engines, two pairs) go at once: the cut,
// over a minute, is the suite's wall time.
func TestDatabaseOutage(t *testing.T) {
	var servers [2]*outageServers
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); servers[i] = startOutageServers(t) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// t.Run from goroutines rather than t.Parallel: -parallel (the number of
	// cores) would run the cuts after the others.
	run := func(name string, f func(t *testing.T)) {
		wg.Add(1)
		go func() { defer wg.Done(); t.Run(name, f) }()
	}
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		run(engine+"/restart-and-terminate", func(t *testing.T) {
			s := servers[0]
			db := s.newDatabase(t, engine, "")
			m := startManager(t, db, 6)
			o := newOutageRun(t, m)
			o.survive("restart", "H1", "H2", "H3", true, true, func(during func()) {
				s.stopServer(t, engine)
				during()
				s.startServer(t, engine)
			})
			o.survive("terminate", "H4", "H5", "H6", false, true, func(during func()) {
				s.terminateSessions(t, engine, db)
				during()
			})
			o.finish(db)
		})
		run(engine+"/cut", func(t *testing.T) {
			s := servers[1]
			proxy := newCutProxy(t, s.address(engine))
			db := s.newDatabase(t, engine, proxy.addr())
			m := startManager(t, db, 3)
			o := newOutageRun(t, m)
			o.survive("cut", "H1", "H2", "H3", true, false, func(during func()) {
				proxy.cut()
				cutAt := time.Now()
				during()
				time.Sleep(time.Until(cutAt.Add(cutDuration / 2)))
				during() // well past every deadline
				time.Sleep(time.Until(cutAt.Add(cutDuration)))
				proxy.restore()
			})
			o.finish(db)
		})
	}
	wg.Wait()
}

// outageRun is one manager taken through outages, with one VLAN network whose
// ports the cases add.
type outageRun struct {
	t       *testing.T
	m       *manager
	sampler *openSMSampler
	jobs    []string // every job accepted, all Completed in the end
	members []string // hosts whose port is in the network
}

const (
	outageNetwork = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73" // network_create_vlan.json: VLAN 101
	outagePKey    = 0x8065
)

func newOutageRun(t *testing.T, m *manager) *outageRun {
	o := &outageRun{t: t, m: m}
	o.jobs = append(o.jobs, m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")))
	m.waitCompleted(o.jobs[0], nil)
	o.sampler = m.sampleOpenSM()
	return o
}

// survive takes the database away with outage and checks the manager through
// it. completed's port is added and completed before the outage, pending's
// just before it (its job may still be open when the outage starts), after's
// during the outage (refused) and again after it. outage calls during while
// the database is away; with window false the outage is an instant (killed
// sessions) and the manager may have reconnected by then, so during accepts
// either answer, 503 or 202. With serverClosed the server itself ended the
// manager's sessions (a restart, terminated sessions): once it is back, the
// first change sent must be accepted, since the server told every session it
// was closing and no idle connection may cost a request; through a cut link
// the manager learns of dead connections only from their deadlines, and a
// refused change is resent, as networking-mlnx does.
func (o *outageRun) survive(name, completed, pending, after string, window, serverClosed bool, outage func(during func())) {
	t, m := o.t, o.m
	t.Logf("%s: start", name)
	started := time.Now()
	before := m.accept("POST", "/cloudx/Port", o.port(completed))
	m.waitCompleted(before, nil)
	o.jobs = append(o.jobs, before, m.accept("POST", "/cloudx/Port", o.port(pending)))
	o.members = append(o.members, completed, pending)

	var accepted string // the after port's job, if the manager took it during an instant outage
	outage(func() {
		for _, req := range []struct{ method, path, body string }{
			{"POST", "/cloudx/Port", o.port(after)},
			{"GET", "/" + before, ""},
		} {
			status, body := m.send(req.method, req.path, req.body)
			if !window && status == http.StatusAccepted && req.method == "POST" {
				accepted = jobPath(t, body)
				continue
			}
			if !window && status == http.StatusOK && req.method == "GET" {
				continue
			}
			wantUnreachable(t, name, req.method+" "+req.path, status, body)
		}
		if !window {
			return
		}
		// --status cannot read the database, and says so first; its error
		// then shows the driver, and nothing about OpenSM comes before.
		out, err := m.tryOperator("--status")
		want := "OpenSM driver: running since "
		if pid := m.openSMPID0(); err == nil || out != "" || !strings.Contains(err.Error(), want) ||
			strings.Index(err.Error(), want) < strings.Index(err.Error(), "is unreachable") ||
			!strings.Contains(err.Error(), fmt.Sprintf("pid %d", pid)) {
			t.Errorf("%s: --status during the outage: %v\n%s\nwant it to fail saying the database is unreachable, then %q with OpenSM's pid %d",
				name, err, out, want, pid)
		}
	})
	t.Logf("%s: database back after %s", name, time.Since(started).Round(time.Millisecond))

	job := accepted
	if job == "" && serverClosed {
		status, answer := m.send("POST", "/cloudx/Port", o.port(after))
		if status == http.StatusAccepted {
			job = jobPath(t, answer)
		} else {
			t.Errorf("%s: the first change sent once the server was back: %d %s; want 202 on a fresh connection",
				name, status, answer)
		}
	}
	if job == "" {
		// As networking-mlnx does: resend a refused change until it is accepted.
		job = o.acceptEventually(name, o.port(after))
	}
	o.jobs = append(o.jobs, job)
	o.members = append(o.members, after)
	guid := m.fabric.Host(after).PortGUID
	m.waitCompleted(job, func() {
		if got := m.pkeys(guid); !slices.Contains(got, outagePKey) {
			t.Fatalf("%s: the port change after the outage read Completed while %s's pkey table is %s, without 0x%04x",
				name, after, hex(got), outagePKey)
		}
	})
	t.Logf("%s: a change sent after the outage completed %s after the outage began", name,
		time.Since(started).Round(time.Millisecond))
	for _, j := range o.jobs {
		m.waitCompleted(j, nil) // nothing accepted before the outage is lost
	}
	for _, h := range o.members {
		if got := m.pkeys(m.fabric.Host(h).PortGUID); !slices.Contains(got, outagePKey) {
			t.Errorf("%s: %s's pkey table is %s, without 0x%04x", name, h, hex(got), outagePKey)
		}
	}
}

// finish checks what the whole run must show: one OpenSM throughout, and no
// job Completed without an apply proven by OpenSM's log.
func (o *outageRun) finish(db storetest.Database) {
	pids, missing := o.sampler.stop()
	if len(pids) != 1 || missing > 0 {
		o.t.Errorf("OpenSM did not run throughout as one process: PIDs %v, %d samples with none", pids, missing)
	}
	o.t.Logf("OpenSM PID %v in all %d samples", pids, o.sampler.samples)
	checkCompletedAfterApply(o.t, db)
}

func (o *outageRun) port(host string) string {
	return portBody("port-"+host, outageNetwork, vendorClientID(o.m.fabric.Host(host).PortGUID))
}

// acceptEventually sends a change until it is accepted, taking only 503s (the
// manager reconnecting) meanwhile.
func (o *outageRun) acceptEventually(name, body string) string {
	var job string
	testenv.Await(o.t, name+": the change accepted after the outage", time.Minute, 200*time.Millisecond, func() (bool, error) {
		status, answer := o.m.send("POST", "/cloudx/Port", body)
		if status == http.StatusAccepted {
			job = jobPath(o.t, answer)
			return true, nil
		}
		wantUnreachable(o.t, name, "POST after the outage", status, answer)
		return false, fmt.Errorf("%d %s", status, answer)
	})
	return job
}

func jobPath(t *testing.T, body string) string {
	t.Helper()
	var job string
	if err := json.Unmarshal([]byte(body), &job); err != nil || !strings.HasPrefix(job, "app/jobs/") {
		t.Fatalf("body %q is not a job path", body)
	}
	return job
}

// wantUnreachable: 503, and a JSON error that says the database is unreachable.
func wantUnreachable(t *testing.T, name, what string, status int, body string) {
	t.Helper()
	var e struct{ Error string }
	if status != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil ||
		!strings.HasPrefix(e.Error, "database unreachable") {
		t.Fatalf("%s: %s during the outage: %d %s; want 503 with a JSON error saying the database is unreachable",
			name, what, status, body)
	}
}

// openSMSampler reads the manager's OpenSM child PID every 100 ms.
type openSMSampler struct {
	done     chan struct{}
	finished chan struct{}
	pids     []int
	missing  int
	samples  int
}

func (m *manager) sampleOpenSM() *openSMSampler {
	m.openSMPID() // running before sampling starts
	s := &openSMSampler{done: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(s.finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			pid := m.openSMPID0()
			s.samples++
			switch {
			case pid == 0:
				s.missing++
			case !slices.Contains(s.pids, pid):
				s.pids = append(s.pids, pid)
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the PIDs seen and the samples with none.
func (s *openSMSampler) stop() ([]int, int) {
	close(s.done)
	<-s.finished
	return s.pids, s.missing
}

// outageServers is a PostgreSQL and a MariaDB started for one test (by
// scripts/test-env.sh, in a directory of its own), which it may stop, start
// and whose sessions it may kill: never the servers other suites share.
type outageServers struct {
	dir      string
	postgres string // admin URLs, as [database] connection takes them
	mysql    string
}

const testEnvScript = "../scripts/test-env.sh"

func startOutageServers(t *testing.T) *outageServers {
	dir, err := os.MkdirTemp("", "afm-e2e-outage-")
	if err != nil {
		t.Error(err)
		return nil
	}
	s := &outageServers{dir: dir}
	t.Cleanup(func() {
		s.script("stop")
		os.RemoveAll(dir)
	})
	if err := s.script("start", "--no-galera"); err != nil {
		t.Error(err)
		return nil
	}
	f, err := os.Open(filepath.Join(dir, "env"))
	if err != nil {
		t.Error(err)
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "AFM_TEST_POSTGRES_URL":
			s.postgres = v
		case "AFM_TEST_MYSQL_URL":
			s.mysql = v
		}
	}
	if s.postgres == "" || s.mysql == "" {
		t.Errorf("%s/env lacks the servers' URLs", dir)
	}
	return s
}

func (s *outageServers) script(args ...string) error {
	cmd := exec.Command("bash", append([]string{testEnvScript, args[0], s.dir}, args[1:]...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("test-env.sh %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (s *outageServers) adminURL(engine string) string {
	if engine == config.EnginePostgres {
		return s.postgres
	}
	return s.mysql
}

// address is the server's host:port.
func (s *outageServers) address(engine string) string {
	return must(url.Parse(s.adminURL(engine))).Host
}

func scriptName(engine string) string {
	if engine == config.EnginePostgres {
		return "postgres"
	}
	return "mariadb"
}

func (s *outageServers) stopServer(t *testing.T, engine string) {
	if err := s.script("stop-server", scriptName(engine)); err != nil {
		t.Fatal(err)
	}
}

func (s *outageServers) startServer(t *testing.T, engine string) {
	if err := s.script("start-server", scriptName(engine)); err != nil {
		t.Fatal(err)
	}
}

// newDatabase creates a database on the server; via, if set, is the host:port
// the manager reaches the server at (a proxy).
func (s *outageServers) newDatabase(t *testing.T, engine, via string) storetest.Database {
	t.Helper()
	name := fmt.Sprintf("afm_outage_%d", time.Now().UnixNano())
	admin := s.adminURL(engine)
	if _, err := testdb.Create(t.Context(), admin, name); err != nil {
		t.Fatal(err)
	}
	server := admin
	if via != "" {
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = via
		server = u.String()
	}
	db, err := testdb.On(server, name)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// terminateSessions ends every session of db's database on the server (as
// the manager's own user may: pg_terminate_backend, KILL), and says how many.
func (s *outageServers) terminateSessions(t *testing.T, engine string, db storetest.Database) {
	n := storetest.EndSessions(t, engine, s.adminURL(engine), db.Name())
	if n == 0 {
		t.Fatal("no session of the manager to terminate")
	}
	t.Logf("terminated %d sessions of %s", n, db.Name())
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// cutProxy forwards TCP connections to a database server until cut: then it
// black-holes them (bytes are read and dropped, nothing is answered, and new
// connections are accepted and never served), as a cut link does. restore
// resets the manager's side of every connection it saw, as the manager's
// kernel does once the link is back (the manager gave up on them), and
// forwards again. The server's side of those connections stays open and
// silent, as after a real cut, where the server learns nothing until it sends:
// a session left holding the applier lock must be ended by the server itself.
type cutProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu       sync.Mutex
	isCut    bool
	clients  []net.Conn // the manager's side
	servers  []net.Conn // the server's side
	stranded map[net.Conn]bool
	closed   bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, target: target, stranded: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed = true
		conns := append(p.clients, p.servers...)
		p.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(&p.clients, c) {
			continue // cut: held, never served
		}
		go func() {
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			p.track(&p.servers, up)
			go p.pipe(c, up, up)
			go p.pipe(up, c, up)
		}()
	}
}

// track records c in list, and says whether the link is up.
func (p *cutProxy) track(list *[]net.Conn, c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	*list = append(*list, c)
	return !p.isCut
}

// pipe copies src to dst while the link is up; server is the pair's server
// side, left open once the pair is stranded by a restore.
func (p *cutProxy) pipe(src, dst, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		cut, stranded := p.isCut, p.stranded[server]
		p.mu.Unlock()
		switch {
		case err != nil && (cut || stranded):
			return // the other side learns nothing: the link is down, or was
		case err != nil:
			src.Close()
			dst.Close()
			return
		case cut || stranded:
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			src.Close()
			dst.Close()
			return
		}
	}
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	p.isCut = true
	p.mu.Unlock()
	p.t.Logf("link to the database cut")
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	clients := p.clients
	for _, s := range p.servers {
		p.stranded[s] = true
	}
	p.clients, p.isCut = nil, false
	p.mu.Unlock()
	for _, c := range clients {
		c.Close()
	}
	p.t.Logf("link to the database restored")
}
