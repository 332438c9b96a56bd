package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// Three managers with [ha] ha = true on one simulated fabric, each OpenSM on
// an SM HCA of its own, on PostgreSQL, MariaDB and a three-node MariaDB Galera
// cluster (each manager on its own node). Faults: kill -9 of the leader, and
// SIGSTOP of the leader for longer than its lease while its OpenSM keeps
// running (the freeze, then what docs/ha.md tells the operator, then
// --unfreeze). Throughout, each OpenSM's state is sampled: never two masters.
// Every change ends Completed, none before its pkey is in the real table, and
// the time from the fault to the first completed job is reported.

// haLeaseTimeout is short, so that a failover costs seconds.
const haLeaseTimeout = 3 * time.Second

func TestHAThreeManagers(t *testing.T) {
	// PostgreSQL and MariaDB of the test's own, which it restarts.
	servers := startOutageServers(t)
	if t.Failed() {
		t.FailNow()
	}
	setups := []struct {
		name    string
		dbs     func(t *testing.T) []storetest.Database
		restart func(t *testing.T) // the database server, nil: not done
	}{
		{"postgres", func(t *testing.T) []storetest.Database {
			return same(servers.newDatabase(t, config.EnginePostgres, ""))
		}, func(t *testing.T) {
			servers.stopServer(t, config.EnginePostgres)
			servers.startServer(t, config.EnginePostgres)
		}},
		{"mysql", func(t *testing.T) []storetest.Database {
			return same(servers.newDatabase(t, config.EngineMySQL, ""))
		}, func(t *testing.T) {
			servers.stopServer(t, config.EngineMySQL)
			servers.startServer(t, config.EngineMySQL)
		}},
		{"galera", func(t *testing.T) []storetest.Database { return storetest.NewGaleraDatabase(t) }, nil},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			c := startHACluster(t, s.dbs(t))
			c.killLeader()
			c.stopLeaderLongerThanLease()
			c.cutLeaderFromDatabase()
			if s.restart != nil {
				c.restartDatabase(s.restart)
			}
			c.finish()
		})
	}
}

func same(db storetest.Database) []storetest.Database { return []storetest.Database{db, db, db} }

type haCluster struct {
	t        *testing.T
	fabric   *fabricsim.Fabric
	managers []*manager
	proxies  []*cutProxy // each manager's link to the database
	dbs      []storetest.Database
	sampler  *masterSampler
	jobs     []string
	hosts    []string // hosts whose port is in the network
	next     int      // the next host to add
	binary   string   // the managers' executable when launched; "": managerBinary
}

const haNetworkPKey = 0x8065 // network_create_vlan.json: VLAN 101, full members

func startHACluster(t *testing.T, dbs []storetest.Database) *haCluster {
	f := fabricsim.StartT(t, fabricsim.Options{Hosts: 6, SMs: 3})
	c := &haCluster{t: t, fabric: f, dbs: dbs}
	for k := 1; k <= 3; k++ {
		c.managers = append(c.managers, c.launch(k, dbs[k-1]))
	}
	c.makeLeader(c.managers[0]) // the SIGSTOP case wants it leading
	c.sampler = c.sampleMasters()
	leader := c.leader()
	leader.confirmSwitches()
	c.jobs = append(c.jobs, leader.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")))
	leader.waitCompleted(c.jobs[0], nil)
	c.addPort(leader, "before any fault")
	return c
}

// launch starts manager k with its OpenSM on SM HCA k.
func (c *haCluster) launch(k int, db storetest.Database) *manager {
	t := c.t
	// The proxy listens before the manager's API address is picked: picked
	// first (and released until the manager binds it), the port could be
	// handed to the proxy, and the manager would fail to start.
	u := must(url.Parse(db.URL))
	proxy := newCutProxy(t, u.Host)
	c.proxies = append(c.proxies, proxy)
	u.Host = proxy.addr()
	m := newManager(t, c.fabric, c.binary)
	dir := m.dir
	env, guid := c.fabric.SMEnv(k)
	envFile := filepath.Join(dir, "opensm.env")
	if err := os.WriteFile(envFile, []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A standby OpenSM takes over from a master gone silent after
	// sminfo_polling_timeout x polling_retry_number: a second here. Manager
	// 1's OpenSM has the highest priority: a master hands over to a higher
	// SM, so a new leader's OpenSM goes STANDBY (the freeze) only while
	// manager 1's is master; with equal priorities the lower GUID wins.
	priority := 1
	if k == 1 {
		priority = 10
	}
	conf := testenv.AFMConf{
		Listen: strings.TrimPrefix(m.url, "http://"), Token: token,
		Connection: u.String(), Database: []string{"poll_interval = 0.2"},
		ConfigDir: filepath.Join(dir, "opensm"), EnvFile: envFile, OpenSM: []string{"check_interval = 2", "sweep_timeout = 10"},
		GUID: guid.String(), OpenSMConf: []string{"sminfo_polling_timeout = 500", "polling_retry_number = 2", fmt.Sprintf("sm_priority = %d", priority)},
		Sections: []testenv.Section{{Name: "ha", Lines: []string{"ha = true", fmt.Sprintf("lease_timeout = %g", haLeaseTimeout.Seconds())}}},
	}
	m.writeConf(conf.String())
	m.startUntilCleanup()
	return m
}

// leaseStatus is --status --json's lease.
type leaseStatus struct {
	Holder          string `json:"holder"`
	Term            int64  `json:"term"`
	Freeze          string `json:"freeze"`
	Check           string `json:"check"`
	UnfreezePending bool   `json:"unfreeze_pending"`
	PreviousHolder  string `json:"previous_holder"`
	PreviousExpired bool   `json:"previous_expired"`
}

func (m *manager) lease() leaseStatus {
	m.t.Helper()
	out := m.operator("--status", "--json")
	var s struct {
		Lease  *leaseStatus `json:"lease"`
		Driver *struct {
			State string `json:"state"`
		} `json:"driver"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Lease == nil {
		m.t.Fatalf("--status --json: %v, no lease in:\n%s", err, out)
	}
	return *s.Lease
}

// makeLeader makes m the leader: the others stop (releasing the lease if
// they hold it), m, the only candidate left, takes it, and they start again
// as followers.
func (c *haCluster) makeLeader(m *manager) {
	c.t.Helper()
	if c.leader() == m {
		return
	}
	var stopped []*manager
	for _, o := range c.live() {
		if o != m {
			o.stop()
			stopped = append(stopped, o)
		}
	}
	waitFor(c.t, "the wanted manager leading", func() bool { return m.lease().Holder == m.holderName() })
	for _, o := range stopped {
		o.start()
	}
}

// holderName is how the lease names manager m ("<host> pid <pid>").
func (m *manager) holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", host, m.proc.Pid())
}

// leader waits for a live manager to hold the lease and returns it.
func (c *haCluster) leader() *manager {
	c.t.Helper()
	var found *manager
	waitFor(c.t, "a manager holding the lease", func() bool {
		l := c.live()[0].lease()
		for _, m := range c.live() {
			if l.Holder == m.holderName() {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// live are the managers running (not killed, not stopped).
func (c *haCluster) live() []*manager {
	var ms []*manager
	for _, m := range c.managers {
		select {
		case <-m.proc.Exited():
			continue
		default:
		}
		if processStopped(m.proc.Pid()) {
			continue
		}
		ms = append(ms, m)
	}
	return ms
}

func processStopped(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'T' || s[i+2] == 't')
}

// addPort puts the next host's port in the network through m, and checks the
// job completes only once the pkey is in the host's real table. It returns
// the time the job first read Completed.
func (c *haCluster) addPort(m *manager, when string) time.Time {
	c.t.Helper()
	job := c.acceptPort(m)
	return c.waitPort(m, job, when)
}

func (c *haCluster) acceptPort(m *manager) string {
	c.t.Helper()
	c.next++
	host := fmt.Sprintf("H%d", c.next)
	job := m.accept("POST", "/cloudx/Port",
		portBody("port-"+host, outageNetwork, vendorClientID(c.fabric.Host(host).PortGUID)))
	c.jobs = append(c.jobs, job)
	c.hosts = append(c.hosts, host)
	return job
}

func (c *haCluster) waitPort(m *manager, job, when string) time.Time {
	c.t.Helper()
	host := c.hosts[len(c.hosts)-1]
	guid := c.fabric.Host(host).PortGUID
	var at time.Time
	m.waitCompleted(job, func() {
		at = time.Now()
		if got := m.pkeys(guid); !slices.Contains(got, haNetworkPKey) {
			c.t.Fatalf("%s: the port of %s read Completed while its pkey table is %s, without 0x%04x",
				when, host, hex(got), haNetworkPKey)
		}
	})
	return at
}

// killLeader: kill -9 of the leader takes its OpenSM with it; another manager
// takes over once the lease expired, and needs no one.
func (c *haCluster) killLeader() {
	t := c.t
	old := c.leader()
	fault := time.Now()
	old.kill()
	survivor := c.live()[0]
	job := c.acceptPort(survivor)
	done := c.waitPort(survivor, job, "after kill -9 of the leader")
	t.Logf("kill -9 of the leader: first job Completed %s after the fault (lease_timeout %s)",
		done.Sub(fault).Round(time.Millisecond), haLeaseTimeout)
	l := c.leader().lease()
	if l.Freeze != "" {
		t.Errorf("after kill -9 of the leader: frozen (%q); an expired lease alone is no freeze", l.Freeze)
	}
	if l.PreviousHolder != old.holderName() || !l.PreviousExpired {
		t.Errorf("after kill -9: previous holder %q, expired %v; want %q, true", l.PreviousHolder, l.PreviousExpired, old.holderName())
	}
	old.start() // back as a follower
}

// stopLeaderLongerThanLease: a SIGSTOPped leader keeps its OpenSM master on
// the fabric. The new leader's OpenSM goes STANDBY: the freeze names the old
// leader; jobs wait. The operator does what docs/ha.md says (stops the named
// manager, which takes its OpenSM down) and runs --unfreeze.
func (c *haCluster) stopLeaderLongerThanLease() {
	t := c.t
	old := c.managers[0]
	c.makeLeader(old)
	// Its OpenSM must be master on the fabric when it hangs.
	waitFor(t, "the leader's OpenSM master", func() bool { return c.sampler.master(0) })
	fault := time.Now()
	if err := old.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			old.proc.Signal(syscall.SIGCONT)
		}
	}()
	var frozen leaseStatus
	var next *manager
	waitFor(t, "a freeze naming the stopped leader", func() bool {
		for _, m := range c.live() {
			frozen = m.lease()
			if frozen.Freeze != "" && frozen.Holder != "" {
				next = m
				return true
			}
		}
		return false
	})
	if frozen.Check != old.holderName() {
		t.Errorf("the freeze names %q to check; want the stopped leader %q", frozen.Check, old.holderName())
	}
	if frozen.Holder == old.holderName() {
		t.Fatalf("the stopped leader still holds the lease: %+v", frozen)
	}
	job := c.acceptPort(next)
	if j := next.waitDescription(job, "Frozen"); j.Status == "Completed" {
		t.Fatalf("a job completed during the freeze: %+v", j)
	}
	// docs/ha.md: stop the manager --status names (kill -9 of a hung one),
	// which takes its OpenSM with it; then --unfreeze.
	old.kill()
	stopped = false
	out := next.operator("--unfreeze")
	if !strings.Contains(out, "unfreeze requested") {
		t.Errorf("--unfreeze printed %q", out)
	}
	if l := next.lease(); l.Freeze != "" && !l.UnfreezePending {
		t.Errorf("after --unfreeze, still frozen without the unfreeze pending: %+v", l)
	}
	done := c.waitPort(next, job, "after the unfreeze")
	t.Logf("SIGSTOP of the leader: first job Completed %s after the fault, the freeze and --unfreeze included",
		done.Sub(fault).Round(time.Millisecond))
	if l := next.lease(); l.Freeze != "" || l.UnfreezePending {
		t.Errorf("after the job completed: %+v; want no freeze, nothing pending", l)
	}
	old.start()
}

// cutLeaderFromDatabase black-holes the leader's link to the database: it
// cannot renew, so it stops its OpenSM before its lease can expire, and
// another manager takes over once it has.
func (c *haCluster) cutLeaderFromDatabase() {
	t := c.t
	old := c.leader()
	proxy := c.proxies[slices.Index(c.managers, old)]
	fault := time.Now()
	proxy.cut()
	var next *manager
	waitFor(t, "another manager leading", func() bool {
		for _, m := range c.live() {
			if m != old && m.lease().Holder == m.holderName() {
				next = m
				return true
			}
		}
		return false
	})
	if pid := old.openSMPID0(); pid != 0 {
		t.Errorf("the leader cut from the database still runs its OpenSM (pid %d) after another took over", pid)
	}
	job := c.acceptPort(next)
	done := c.waitPort(next, job, "after the leader's database link was cut")
	t.Logf("leader cut from the database: first job Completed %s after the fault (lease_timeout %s)",
		done.Sub(fault).Round(time.Millisecond), haLeaseTimeout)
	proxy.restore()
	if l := next.lease(); l.Freeze != "" {
		t.Errorf("frozen after a cut link (%q): the cut leader stopped its OpenSM itself", l.Freeze)
	}
}

// restartDatabase stops the database server and starts it again: every
// manager loses it (and every session it had); the leader stops its OpenSM before its lease can expire,
// and once the server is back a manager takes the lease and applies.
func (c *haCluster) restartDatabase(restart func(t *testing.T)) {
	t := c.t
	fault := time.Now()
	restart(t)
	t.Logf("database server restarted in %s", time.Since(fault).Round(time.Millisecond))
	// The server is up again: the first change sent is accepted, though every
	// session of every manager's pool was ended by the restart.
	job := c.acceptPort(c.live()[0])
	leader := c.leader()
	done := c.waitPort(leader, job, "after the database restart")
	t.Logf("database restart: first job Completed %s after the fault (lease_timeout %s)",
		done.Sub(fault).Round(time.Millisecond), haLeaseTimeout)
}

func (c *haCluster) finish() {
	t := c.t
	leader := c.leader()
	for _, j := range c.jobs {
		leader.waitCompleted(j, nil) // every accepted change ends Completed
	}
	for _, h := range c.hosts {
		if got := leader.pkeys(c.fabric.Host(h).PortGUID); !slices.Contains(got, haNetworkPKey) {
			t.Errorf("%s's pkey table is %s, without 0x%04x", h, hex(got), haNetworkPKey)
		}
	}
	samples, masters := c.sampler.stop()
	if len(c.sampler.twoMasters) > 0 {
		t.Errorf("two masters on the fabric at %d of %d samples, first: %s", len(c.sampler.twoMasters), samples,
			c.sampler.twoMasters[0])
	}
	if masters == 0 {
		t.Errorf("no sample saw a master in %d samples: the sampler sees nothing", samples)
	}
	t.Logf("%d samples of the three OpenSMs' states, %d with a master, never two", samples, masters)
	checkCompletedAfterApply(t, c.dbs[0])
}

// masterSampler samples every OpenSM's SM state every 20 ms: an OpenSM is
// master from its "Entering MASTER state" line until another state line, and
// until its process is gone (a new process starts DISCOVERING).
type masterSampler struct {
	c          *haCluster
	mu         sync.Mutex
	logs       []smLog
	done       chan struct{}
	finished   chan struct{}
	samples    int
	withMaster int
	twoMasters []string
}

type smLog struct {
	offset int64
	pid    int
	state  string
}

var (
	smStateLine   = regexp.MustCompile(`-> Entering ([A-Z]+) state\n`)
	smVersionLine = regexp.MustCompile(`-> OpenSM \d`)
)

func (c *haCluster) sampleMasters() *masterSampler {
	s := &masterSampler{c: c, done: make(chan struct{}), finished: make(chan struct{}), logs: make([]smLog, len(c.managers))}
	logs, mu := s.logs, &s.mu
	go func() {
		defer close(s.finished)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			mu.Lock()
			var masters []string
			for i, m := range c.managers {
				if st := logs[i].read(m); st == "MASTER" {
					masters = append(masters, fmt.Sprintf("manager %d (OpenSM pid %d)", i+1, logs[i].pid))
				}
			}
			s.samples++
			if len(masters) > 0 {
				s.withMaster++
			}
			if len(masters) > 1 {
				s.twoMasters = append(s.twoMasters, time.Now().Format("15:04:05.000")+": "+strings.Join(masters, ", "))
			}
			mu.Unlock()
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// read follows the manager's OpenSM log and returns its state now.
func (l *smLog) read(m *manager) string {
	pid := 0
	select {
	case <-m.proc.Exited():
	default:
		pid = m.openSMPID0()
	}
	if pid == 0 || !processRuns(pid) {
		l.pid, l.state = 0, ""
		return ""
	}
	b, err := os.ReadFile(filepath.Join(m.dir, "opensm", "opensm.log"))
	if err != nil {
		return ""
	}
	if int64(len(b)) < l.offset {
		l.offset = 0
	}
	chunk := b[l.offset:]
	if end := bytes.LastIndexByte(chunk, '\n'); end >= 0 {
		chunk = chunk[:end+1]
	} else {
		chunk = nil
	}
	l.offset += int64(len(chunk))
	if pid != l.pid {
		l.state = "DISCOVERING" // a new OpenSM is not master before it says so
	}
	l.pid = pid
	for _, line := range bytes.SplitAfter(chunk, []byte("\n")) {
		switch {
		case smVersionLine.Match(line):
			l.state = "DISCOVERING"
		default:
			if mm := smStateLine.FindSubmatch(line); mm != nil {
				l.state = string(mm[1])
			}
		}
	}
	return l.state
}

// master says whether manager i's OpenSM was master at the last sample.
func (s *masterSampler) master(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs[i].state == "MASTER"
}

func (s *masterSampler) stop() (samples, withMaster int) {
	close(s.done)
	<-s.finished
	return s.samples, s.withMaster
}
