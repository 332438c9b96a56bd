package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Options shape a soak run.
type Options struct {
	Engines  []string
	Ops      int           // operations per engine
	Duration time.Duration // or this long per engine, whichever ends first (0: no limit)
	Seed     uint64
	Faults   []string // fault kinds, see Faults
	// FaultRate is the percentage of rounds with a fault. The kinds are
	// dealt from a shuffled deck, so that every kind comes once in each
	// len(kinds) faults.
	FaultRate int
	// FirstFaults are dealt before the others, in the seed's order, from
	// the first deck, beside the hostile tenant's kinds, which always are
	// (isFirst): a run too short to go through a whole deck still meets
	// each of them on every engine.
	FirstFaults []string
	Hosts       int
	Switches    int
	Managers    int // managers on one database (server engines; SQLite always runs one)
	Binary      string
	WorkDir     string
	Out         io.Writer
	Verbose     bool // print every operation
	// Parallel runs the engines at once, each on its fabric, database and
	// managers of its own, instead of one after the other.
	Parallel bool
	// CollidingIDs draws two network IDs that share their first 27
	// characters, which the partition names keep.
	CollidingIDs bool
	// Kubernetes runs ib-kubernetes as a second client at once, through the
	// pkeys API, on hosts of its own.
	Kubernetes bool
	// Fabrics is how many simulated fabrics one manager runs: 1, or 2 (the
	// second its [fabric:storage], see fabrics.go).
	Fabrics int
}

// flags are the afm-soak flags that draw the same requests and faults on engine.
func (o Options) flags(engine string) string {
	faults := strings.Join(o.Faults, ",")
	if faults == "" {
		faults = "none"
	}
	f := fmt.Sprintf("--engines %s --seed %d --ops %d --faults %s --fault-rate %d --hosts %d --switches %d --managers %d",
		engine, o.Seed, o.Ops, faults, o.FaultRate, o.Hosts, o.Switches, o.Managers)
	f += fmt.Sprintf(" --colliding-ids=%v --kubernetes=%v", o.CollidingIDs, o.Kubernetes)
	if o.Fabrics > 1 {
		f += fmt.Sprintf(" --fabrics %d", o.Fabrics)
	}
	return f
}

// Result is one engine's run.
type Result struct {
	Engine                            string
	Ops, Faults, Checks, Violations   int
	Seed                              uint64
	Accepted, Refused, NotFound, Lost int
	EditFailures                      int            // jobs failed by a hand edit during their sweep
	PKeyFailures                      int            // jobs failed in a round whose host OpenSM could not program
	TenantFailures                    int            // jobs failed that touched a hostile tenant's faulted hosts
	Innocent, HeldTolerated           int            // innocent jobs completed under a tenant's fault; held, with a cause allowed
	LostJobs                          int            // jobs lost to a restore that answered 404
	KubeOps                           int            // of Ops, ib-kubernetes' changes
	ByFault                           map[string]int // faults by kind
}

func (r Result) String() string {
	return fmt.Sprintf("soak %s: %d operations, %d faults, %d checks, %d violations, seed %d",
		r.Engine, r.Ops, r.Faults, r.Checks, r.Violations, r.Seed)
}

// errStop ends an engine's run after a violation: the model no longer
// describes the manager, so what follows would prove nothing.
var errStop = errors.New("stopped at a violation")

// Run runs the soak on each engine in turn.
func Run(ctx context.Context, o Options) ([]Result, error) {
	// The soak's own connections meet killed Galera nodes and restores: the
	// driver's log of their broken packets is noise here, their errors are
	// handled where they are returned.
	mysql.SetLogger(&mysql.NopLogger{})
	var srv *servers
	if slices.ContainsFunc(o.Engines, func(e string) bool { return e != config.EngineSQLite }) {
		var err error
		if srv, err = startServers(ctx, filepath.Join(o.WorkDir, "servers"), slices.Contains(o.Engines, engineGalera)); err != nil {
			return nil, err
		}
		defer srv.stop()
	}
	if !o.Parallel {
		var results []Result
		for _, engine := range o.Engines {
			r, err := runEngine(ctx, o, engine, srv)
			results = append(results, r)
			if err != nil && !errors.Is(err, errStop) {
				return results, fmt.Errorf("%s: %w", engine, err)
			}
		}
		return results, nil
	}
	// At once: every line goes out whole (a violation's report in one piece),
	// and an engine that cannot go on does not stop the others.
	o.Out = &lockedWriter{w: o.Out}
	results := make([]Result, len(o.Engines))
	errs := make([]error, len(o.Engines))
	var wg sync.WaitGroup
	for i, engine := range o.Engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = runEngine(ctx, o, engine, srv)
			if errs[i] != nil && !errors.Is(errs[i], errStop) {
				errs[i] = fmt.Errorf("%s: %w", engine, errs[i])
			} else {
				errs[i] = nil
			}
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// lockedWriter serializes the writes of engines run at once.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// job is an accepted request whose job the checker waits for.
type job struct {
	path    string
	op      op
	index   int  // the model's history index after the request
	changed bool // the request changed the partitions the model renders
	// same: the request left the model's networks and ports as they were.
	// The manager may answer it with its object's earlier job (a change that
	// changes nothing takes no job of its own), already given out.
	same  bool
	hosts []fabric.GUID
	// edited: a hand edit of the partitions file came in the job's round.
	// If OpenSM read the edited file in the job's sweep, the manager fails
	// the job (the driver sends it again) and applies once more: a failure
	// the model expects.
	edited bool
	// pkeyRound: a host OpenSM cannot program came in the job's round. The
	// sweep then ends with errors, and the manager may fail the jobs it
	// cannot prove, with the reason: a failure the model accepts.
	pkeyRound bool
	// underPKeyError: the request changed that host's table while OpenSM
	// could not program it: its job must not complete until healed.
	underPKeyError bool
	// otherFault names the other fabric's fault this job was sent under (two
	// fabrics): it must not keep the job from completing.
	otherFault string
	// tenantOwn: the request touched the hosts of the round's hostile
	// tenant's fault: the job may wait, or fail with a reason.
	tenantOwn bool
	// named are the GUIDs of the ports the request changed (before and
	// after), whether or not a table changed: a port bound to a host whose
	// table already held its network's key is still that host's tenant's.
	named []fabric.GUID
	// sent, smLog, smLogAt: when the request went out under a tenant's fault,
	// and where the leader's OpenSM log stood (heldInnocent); heldSeen: a
	// wait past the bound was seen and tolerated.
	sent     time.Time
	smLog    string
	smLogAt  int64
	heldSeen bool
}

// run is one engine's soak.
type run struct {
	o        Options
	engine   string
	rng      *rand.Rand
	route    *rand.Rand // which manager gets a request
	model    *Model
	gen      *generator
	fabric   *fabricsim.Fabric
	hosts    []fabric.GUID
	managers []*manager
	srv      *servers
	client   *http.Client
	res      Result
	history  []string
	tables   []Tables // the model's tables after each accepted request; [0] is the empty state
	parts    []string
	floor    int // the highest history index a Completed job proves applied
	// excluded hosts are not read until the fabric has converged again: their
	// links are down, or a fault (a hand edit, a new fabric) changed the
	// tables under the manager.
	excluded  map[fabric.GUID]string
	leaked    int // OpenSMs killed without detaching from ibsim
	faultKind []string
	deferred  []*manager // killed leaders, started again at the end of the round
	dir       string
	dbURL     string // the database, directly (the managers reach it through their proxies)
	deck      []string
	dealtOnce bool // the first deck, with the first kinds at its front (isFirst), was dealt
	firstLeft int  // the first kinds the first deck has still to deal
	owed      int  // faults forced while the first kinds were dealt, not yet paid back (placeFault)
	// jobOrder are the job paths given out, in order; jobOwner says for
	// which request each was: no id may answer for two changes.
	jobOrder []string
	jobOwner *jobOwners
	backup   *savedBackup
	lostJobs map[string]bool // given out after the backup a restore put back: must answer 404
	// completedAt is when each job path first read Completed: a request
	// that changed nothing is answered with the job that made it so, whose
	// completion may be older than the round's fault.
	completedAt map[string]time.Time
	pkeyFault   *pkeyFault   // the round's host OpenSM cannot program, if any
	tenant      *tenantFault // the round's hostile tenant's fault, if any
	masters     *masterWatch
	kube        *kubeClient // nil without --kubernetes
	kubeHosts   []fabric.GUID
	epoch       *atomic.Int64 // odd while a fault is in effect (see kubeClient); one for both fabrics
	// peer is the other fabric's run, in a run on two fabrics (fabrics.go):
	// it shares the managers, the database and the job ids, and has its own
	// fabric, model, checks and faults. storage says which one this is.
	peer    *run
	storage bool
	lanes   *rand.Rand // which fabric a round goes to
	// underOther counts the jobs that completed while the other fabric
	// had a fault.
	underOther int
	timing     string
	failed     bool // the run could not go on: its directory is kept
	stopped    bool // a violation the model cannot go on from
	converging time.Duration
	reading    time.Duration // reading pkey tables
	reads      int
}

func runEngine(ctx context.Context, o Options, engine string, srv *servers) (Result, error) {
	r := &run{o: o, engine: engine, rng: rand.New(rand.NewPCG(o.Seed, 0x50a4)), route: rand.New(rand.NewPCG(o.Seed, 1)),
		model: NewModel(), srv: srv,
		client: &http.Client{Timeout: 30 * time.Second}, excluded: map[fabric.GUID]string{},
		res: Result{Engine: engine, Seed: o.Seed, ByFault: map[string]int{}}, dir: filepath.Join(o.WorkDir, engine),
		jobOwner: &jobOwners{owner: map[string]string{}}, lostJobs: map[string]bool{}, epoch: new(atomic.Int64),
		completedAt: map[string]time.Time{}}
	for _, f := range o.Faults {
		if r.applies(f) {
			r.faultKind = append(r.faultKind, f)
		}
	}
	fmt.Fprintf(o.Out, "soak %s: seed %d, %d hosts, %d switches, %d manager(s), faults %s\n", engine, o.Seed,
		o.Hosts, o.Switches, r.managerCount(), strings.Join(r.faultKind, ","))
	began := time.Now()
	err := r.setup(ctx)
	setup := time.Since(began)
	if err == nil {
		if r.kube != nil {
			r.kube.start(ctx)
		}
		err = r.loop(ctx)
	}
	if r.kube != nil {
		r.kube.close()
		r.drainKube()
	}
	if err == nil && !r.stopped {
		err = r.converge(ctx, "the end of the run")
	}
	if p := r.peer; err == nil && p != nil && !r.stopped && !p.stopped {
		err = p.converge(ctx, "the end of the run")
	}
	if r.kube != nil {
		r.res.KubeOps = int(r.kube.ops.Load())
		r.res.Ops += r.res.KubeOps
		r.res.Checks += int(r.kube.checks.Load())
	}
	if r.peer != nil {
		r.endStorage(ctx)
	}
	r.timing = fmt.Sprintf("%s in all: %s to set up, %s converging after faults, %s reading %d pkey tables",
		time.Since(began).Round(100*time.Millisecond), setup.Round(100*time.Millisecond),
		r.converging.Round(100*time.Millisecond), r.reading.Round(100*time.Millisecond), r.reads)
	if r.res.Violations > 0 {
		r.report(ctx)
	}
	r.failed = err != nil && !errors.Is(err, errStop)
	r.teardown()
	if err != nil && !errors.Is(err, errStop) {
		fmt.Fprintf(o.Out, "soak %s: error: %v (work directory %s)\n", engine, err, r.dir)
	}
	var byFault []string
	for _, f := range Faults {
		if n := r.res.ByFault[f]; n > 0 {
			byFault = append(byFault, fmt.Sprintf("%s %d", f, n))
		}
	}
	fmt.Fprintf(o.Out, "  %s: %d accepted, %d refused, %d not found, %d sent again, %d jobs failed by a hand edit during their sweep, "+
		"%d by a host OpenSM could not program, %d touching a hostile tenant's faulted hosts (%d innocent jobs completed under it, %d held as allowed), %d lost to a restore answered 404, "+
		"%d Kubernetes changes; faults: %s; %s\n",
		engine, r.res.Accepted, r.res.Refused, r.res.NotFound, r.res.Lost, r.res.EditFailures, r.res.PKeyFailures, r.res.TenantFailures,
		r.res.Innocent, r.res.HeldTolerated, r.res.LostJobs, r.res.KubeOps,
		strings.Join(byFault, ", "), r.timing)
	fmt.Fprintln(o.Out, r.res)
	return r.res, err
}

// applies says whether a fault kind can happen on the run's engine and managers.
func (r *run) applies(f string) bool {
	if r.o.Fabrics > 1 && !twoFabricFaults(f) {
		return false
	}
	switch f {
	case faultRestartDB:
		// Galera's nodes are killed by galera-writers, one at a time.
		return r.engine == config.EnginePostgres || r.engine == config.EngineMySQL
	case faultKillLeader:
		return r.managerCount() > 1
	case faultDBLatency, faultDBPartition:
		return r.engine != config.EngineSQLite
	case faultGaleraWriters:
		return r.engine == engineGalera
	}
	return true
}

// managerCount is how many managers share the database: one on SQLite, at
// least one per node on Galera.
func (r *run) managerCount() int {
	switch r.engine {
	case config.EngineSQLite:
		return 1
	case engineGalera:
		return max(3, r.o.Managers)
	}
	return max(1, r.o.Managers)
}

func (r *run) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	r.history = append(r.history, line)
	if r.o.Verbose {
		fmt.Fprintf(r.o.Out, "  %s: %s\n", r.label(), line)
	}
}

// violation records a broken promise; the run stops after the check that
// found it.
func (r *run) violation(format string, args ...any) {
	r.finding(format, args...)
	r.stopped = true
}

// finding records a broken promise that leaves the model true (a wrong
// status code, a job id given twice, whose job is then not followed): it
// counts as a violation, and the run goes on, so that one run shows every
// such finding.
func (r *run) finding(format string, args ...any) {
	r.res.Violations++
	line := "VIOLATION: " + fmt.Sprintf(format, args...)
	r.history = append(r.history, line)
	fmt.Fprintf(r.o.Out, "  %s: %s\n", r.label(), line)
}

func (r *run) setup(ctx context.Context) error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	var err error
	r.fabric, err = fabricsim.Start(ctx, filepath.Join(r.dir, "fabric"), fabricsim.Options{Hosts: r.o.Hosts, Switches: r.o.Switches, SMs: r.managerCount()})
	if err != nil {
		return fmt.Errorf("start simulated fabric: %w", err)
	}
	for i, h := range r.fabric.Hosts {
		if r.o.Kubernetes && i >= len(r.fabric.Hosts)-kubeHostCount {
			r.kubeHosts = append(r.kubeHosts, h.PortGUID)
			continue
		}
		r.hosts = append(r.hosts, h.PortGUID)
	}
	r.gen = newGenerator(r.rng, r.model, r.hosts, r.o.CollidingIDs)
	r.tables = []Tables{r.model.Tables(r.hosts)}
	r.parts = []string{r.model.Partitions()}
	if r.engine == config.EngineSQLite {
		r.dbURL, err = (&servers{}).createDatabase(ctx, r.engine, r.dir, "")
	} else {
		r.dbURL, err = r.srv.createDatabase(ctx, r.engine, r.dir, fmt.Sprintf("afm_soak_%d", r.o.Seed%1_000_000))
	}
	if err != nil {
		return err
	}
	r.masters = watchMasters(r.dir, r.o.Fabrics > 1, false)
	var storage *fabricsim.Fabric
	if r.o.Fabrics > 1 {
		if err := r.startStorage(ctx); err != nil {
			return err
		}
		storage = r.peer.fabric
	}
	for i := range r.managerCount() {
		m := &manager{index: i, dir: filepath.Join(r.dir, fmt.Sprintf("manager%d", i)), binary: r.o.Binary}
		m.conf = filepath.Join(m.dir, "afm.conf")
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return err
		}
		r.managers = append(r.managers, m)
		dbURL, err := r.managerDB(m)
		if err != nil {
			return err
		}
		if err := m.writeConf(dbURL, r.fabric, storage, r.managerCount() > 1, r.o.Kubernetes); err != nil {
			return err
		}
		if err := m.start(ctx, r.client); err != nil {
			return err
		}
		if i == 0 {
			if err := m.confirmSwitches(ctx); err != nil {
				return err
			}
			if storage != nil {
				if err := m.confirmStorageSwitches(ctx); err != nil {
					return err
				}
			}
		}
	}
	if r.peer != nil {
		r.peer.managers = r.managers
	}
	if r.o.Kubernetes {
		var urls []string
		for _, m := range r.managers {
			urls = append(urls, m.url)
		}
		r.kube = newKubeClient(r.o.Seed, urls, r.kubeHosts, r.fabric, r.epoch, r.jobOwner)
	}
	return nil
}

// drainKube takes ib-kubernetes' history and violations into the run's.
func (r *run) drainKube() {
	if r.kube == nil {
		return
	}
	history, findings := r.kube.drain()
	for _, l := range history {
		r.logf("%s", l)
	}
	for _, f := range findings {
		r.res.Violations++
		fmt.Fprintf(r.o.Out, "  %s: VIOLATION: k8s %s\n", r.engine, f.line)
		r.stopped = r.stopped || f.stop
	}
}

// managerDB starts the manager's proxy to its database server (on Galera,
// to node index mod 3) and returns the URL the manager connects with.
func (r *run) managerDB(m *manager) (string, error) {
	if r.engine == config.EngineSQLite {
		return r.dbURL, nil
	}
	target := r.dbURL
	if r.engine == engineGalera {
		m.node = m.index % 3
		var err error
		if target, err = r.srv.nodeURL(r.dbURL, m.node); err != nil {
			return "", err
		}
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	if m.proxy, err = newProxy(u.Host); err != nil {
		return "", fmt.Errorf("database proxy of manager %d: %w", m.index, err)
	}
	u.Host = m.proxy.addr()
	return u.String(), nil
}

func (r *run) teardown() {
	// A run stopped at a violation leaves its round's fault as it was: a
	// tenant's OpenSM would outlive the run.
	if tf := r.tenant; tf != nil && tf.sm != nil {
		tf.sm.stop()
	}
	for _, m := range r.managers {
		m.stop()
		if m.proxy != nil {
			m.proxy.close()
		}
	}
	if r.masters != nil {
		r.masters.close()
	}
	if r.fabric != nil {
		r.fabric.Stop()
	}
	if p := r.peer; p != nil {
		p.masters.close()
		p.fabric.Stop()
	}
	if r.res.Violations == 0 && !r.failed {
		os.RemoveAll(r.dir)
	}
}

// report prints the seed, the history and the fabric's tables against the model.
func (r *run) report(ctx context.Context) {
	w := &bytes.Buffer{} // written out at once: other engines may be printing
	defer func() { r.o.Out.Write(w.Bytes()) }()
	path := filepath.Join(r.dir, "history.txt")
	os.WriteFile(path, []byte(strings.Join(r.history, "\n")+"\n"), 0o644)
	fmt.Fprintf(w, "soak %s: %d violation(s) with seed %d; the same requests and faults (their timing differs): %s\n",
		r.label(), r.res.Violations, r.o.Seed, r.o.flags(r.engine))
	h := r.history
	if len(h) > 300 {
		fmt.Fprintf(w, "  (the first %d history lines are in %s)\n", len(h)-300, path)
		h = h[len(h)-300:]
	}
	for _, l := range h {
		fmt.Fprintf(w, "  | %s\n", l)
	}
	fmt.Fprintf(w, "  model after the last request: %s\n", r.parts[len(r.parts)-1])
	if r.fabric != nil && len(r.hosts) > 0 {
		fmt.Fprintf(w, "  pkey tables now (host / the switch port facing it / the model's newest):\n")
		tables := r.readTables(ctx, r.hosts)
		for i, h := range r.hosts {
			t := tables[i]
			line := fmt.Sprintf("%s / %s / %s", hexKeys(t.keys), hexKeys(t.sw), hexKeys(r.tables[len(r.tables)-1][h]))
			if t.err != nil {
				line += fmt.Sprintf(" (%v)", t.err)
			}
			fmt.Fprintf(w, "    %-4s %s  %s\n", r.hostName(h), h, line)
		}
	}
	fmt.Fprintf(w, "  work directory (manager logs, OpenSM's log, the history): %s\n", r.dir)
}

func (r *run) loop(ctx context.Context) error {
	start := time.Now()
	nextProgress := 100
	for r.opsLeft() > 0 && (r.o.Duration == 0 || time.Since(start) < r.o.Duration) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.laneRound(ctx); err != nil {
			return err
		}
		if r.stopped || (r.peer != nil && r.peer.stopped) {
			return errStop
		}
		if r.res.Ops >= nextProgress {
			fmt.Fprintf(r.o.Out, "  %s: %d operations (%d accepted, %d refused, %d not found), %d faults, %d checks, %d violations, %s\n",
				r.engine, r.res.Ops, r.res.Accepted, r.res.Refused, r.res.NotFound, r.res.Faults, r.res.Checks,
				r.res.Violations, time.Since(start).Round(time.Second))
			nextProgress += 100
		}
	}
	return nil
}

// round sends a burst of requests, perhaps with a fault among them, waits for
// their jobs, checks the fabric at each first Completed, and after a fault
// waits for the fabric to converge on the model.
func (r *run) round(ctx context.Context) error {
	k := min(1+r.rng.IntN(4), r.opsLeft())
	faultAt, kind := r.placeFault(k)
	// A backup now and then, which a later restore-db puts back.
	if slices.Contains(r.faultKind, faultRestoreDB) && (r.backup == nil || r.rng.IntN(4) == 0) {
		if err := r.takeBackup(ctx); err != nil {
			return err
		}
	}
	defer r.reportMasters()
	defer r.drainKube()
	r.pkeyFault, r.tenant = nil, nil
	var f *fault
	var jobs []job
	for i := 0; i <= k; i++ {
		if i == faultAt {
			var err error
			if f, err = r.inject(ctx, kind); err != nil {
				return err
			}
			if r.peer != nil {
				if err := r.peer.during(ctx, f); err != nil || r.peer.stopped {
					return err
				}
			}
		}
		if i == k {
			break
		}
		j, err := r.request(ctx)
		if err != nil {
			return err
		}
		if r.stopped {
			return nil
		}
		if j != nil {
			jobs = append(jobs, *j)
		}
	}
	r.markRaces(jobs, f)
	for _, j := range jobs {
		if err := r.waitJob(ctx, j); err != nil {
			return err
		}
		if r.stopped {
			return nil
		}
	}
	if f == nil {
		return nil
	}
	return r.endFault(ctx, f)
}

// placeFault draws whether the round of k requests has a fault, and where:
// the index of the request it comes before (k: after the last), or -1 for
// none, and its kind. While the first kinds are being dealt (firstPending)
// every round has one; each of those the rate did not draw is paid back by
// the next round it draws, so that a run has the rate's count of faults
// (each hostile fault holds for about 16 s: CI's soak time stays about
// what it was).
func (r *run) placeFault(k int) (at int, kind string) {
	if len(r.faultKind) == 0 {
		return -1, ""
	}
	drawn := r.rng.IntN(100) < r.o.FaultRate
	switch {
	case r.o.FaultRate > 0 && r.firstPending():
		if !drawn {
			r.owed++ // forced: a later round the rate draws goes without
		}
	case !drawn:
		return -1, ""
	case r.owed > 0:
		r.owed-- // an earlier forced fault took this one's place
		return -1, ""
	}
	at, kind = r.rng.IntN(k+1), r.deal()
	switch kind {
	case faultPKeyErrors, faultDropSets, faultCloneGUID, faultTenantSM:
		at = 0 // before the requests: their sweeps meet the host OpenSM cannot program, or the tenant's fault
	case faultRestoreDB:
		at = k // after the requests: their jobs, polled after it, are lost
	}
	return at, kind
}

// markRaces marks the round's jobs that may race fault f (nil: none) or the
// hostile tenant: the checks at their Completed allow for it.
func (r *run) markRaces(jobs []job, f *fault) {
	for i := range jobs {
		// A job sent after the edit can race it too: a SIGHUP'd sweep that
		// reads the edited file may log its errors after the offset the
		// job's apply noted.
		jobs[i].edited = f != nil && f.name == faultEditPartition
		jobs[i].pkeyRound = f != nil && f.name == faultPKeyErrors
		jobs[i].tenantOwn = r.tenant != nil && r.tenant.touches(jobs[i])
	}
}

// endFault starts the managers the fault left stopped, ends the fault and
// waits for the fabric, and the other fabric if any, to converge on the model.
func (r *run) endFault(ctx context.Context, f *fault) error {
	for _, m := range r.deferred {
		if err := m.start(ctx, r.client); err != nil {
			return err
		}
	}
	r.deferred = nil
	if err := f.end(ctx); err != nil {
		return fmt.Errorf("end of fault %s: %w", f.name, err)
	}
	r.endTenant()
	if err := r.converge(ctx, "fault "+f.name); err != nil || r.peer == nil || r.stopped {
		return err
	}
	return r.peer.converge(ctx, "fault "+f.name+" on the other fabric")
}

// request sends the next request, with the driver's retries when no answer
// comes, and checks the answer against the model.
func (r *run) request(ctx context.Context) (*job, error) {
	o := r.gen.next()
	r.res.Ops++
	want := o.expect
	sent := time.Now()
	a, lost, answered := r.sendRetrying(ctx, o)
	if !answered {
		return nil, nil
	}
	r.logf("#%d %s -> %s (model: %d %s)", r.res.Ops, o, a, want.Status, want.Why)
	status := a.Status
	if lost && o.Method == "DELETE" && status == 404 && want.Status == 202 {
		status = 202 // an earlier attempt did it
	}
	if status != want.Status {
		r.violation("#%d %s: answered %d, the model expects %d (%s); body %s", r.res.Ops, o, a.Status, want.Status,
			want.Why, o.Body)
		return nil, nil
	}
	switch status {
	case 400:
		r.res.Refused++
		return nil, nil
	case 404:
		r.res.NotFound++
		return nil, nil
	}
	r.res.Accepted++
	j, err := r.applyToModel(o, want)
	if err != nil {
		return nil, err
	}
	r.markSent(j, sent)
	if a.Status == 404 { // the lost attempt's job is unknown
		return nil, nil
	}
	return r.claimJob(o, a, j), nil
}

// sendRetrying sends o as networking-mlnx does: again, to a live manager,
// while no answer or a server error comes. lost says an attempt went
// unanswered; answered is false after 20 tries (a violation, recorded).
func (r *run) sendRetrying(ctx context.Context, o op) (a answer, lost, answered bool) {
	for attempt := 0; ; attempt++ {
		m := r.liveManager()
		a = send(ctx, r.client, m.url, o.Method, o.Path, o.Body)
		if a.Err == nil && a.Status < 500 {
			return a, lost, true
		}
		if a.Err == nil && a.Status == 500 {
			r.finding("#%d %s: answered %s: networking-mlnx counts a 500 against its retry_count (an unreachable "+
				"database answers 503; a conflict the database resolved is retried inside the manager)", r.res.Ops, o, a)
		}
		// No answer, or a server error: the driver sends the request again.
		// The change may or may not have been recorded (all our requests are
		// idempotent, but a repeated DELETE of a recorded object reads 404).
		lost = true
		r.res.Lost++
		r.logf("#%d %s -> %s; sending again", r.res.Ops, o, a)
		if attempt == 20 {
			r.violation("#%d %s: no answer after 20 tries: %s", r.res.Ops, o, a)
			return a, lost, false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// applyToModel applies the accepted change to the model and returns its job
// as the checks see it: the hosts whose tables it changed, the port GUIDs it
// names, whether it changed the partitions and waits for a host OpenSM
// cannot program now.
func (r *run) applyToModel(o op, want Expect) (*job, error) {
	before := r.tables[len(r.tables)-1]
	beforeParts := r.parts[len(r.parts)-1]
	beforeState := r.model.snapshot()
	beforePorts := beforeState.ports
	want.Apply()
	if err := r.model.check(); err != nil {
		return nil, err
	}
	after := r.model.Tables(r.hosts)
	r.tables = append(r.tables, after)
	r.parts = append(r.parts, r.model.Partitions())
	j := &job{op: o, index: len(r.tables) - 1, changed: r.parts[len(r.parts)-1] != beforeParts}
	for _, h := range r.hosts {
		if !slices.Equal(before[h], after[h]) {
			j.hosts = append(j.hosts, h)
		}
	}
	afterState := r.model.snapshot()
	j.same = reflect.DeepEqual(r.model.recorded(beforeState), r.model.recorded(afterState))
	afterPorts := afterState.ports
	j.named = portGUIDsChanged(beforePorts, afterPorts)
	for _, g := range requestPortGUIDs(o.Path, beforePorts, afterPorts) {
		if !slices.Contains(j.named, g) {
			j.named = append(j.named, g)
		}
	}
	j.underPKeyError = r.needsErroredHost(j, after)
	return j, nil
}

// claimJob gives j the job path of the 202 answer a, or returns nil (a
// violation or a finding, recorded) when a names none or one already given
// for another change.
func (r *run) claimJob(o op, a answer, j *job) *job {
	path, err := parseJobPath(a.Body)
	if err != nil {
		r.violation("#%d %s: 202 with %v", r.res.Ops, o, err)
		return nil
	}
	j.path = path
	// No job id may answer for two changes: networking-mlnx would read
	// another change's outcome as its own. A request that changed nothing
	// may be answered with the job that made it so: it keeps its place in
	// jobOrder, where it was first given out.
	if owner, twice := r.jobOwner.claim(path, fmt.Sprintf("#%d %s", r.res.Ops, o)); twice {
		if j.same {
			r.logf("#%d %s changed nothing: answered with job %s of %s", r.res.Ops, o, path, owner)
			return j
		}
		r.finding("#%d %s: given job %s, which was already given to %s", r.res.Ops, o, path, owner)
		return nil
	}
	r.jobOrder = append(r.jobOrder, path)
	return j
}

// needsErroredHost says whether OpenSM must program the host it cannot
// program now for the job to complete: the request changed its table, and
// the fabric cannot already hold the new one (no state between the floor
// and this request had it).
func (r *run) needsErroredHost(j *job, after Tables) bool {
	pf := r.pkeyFault
	return pf != nil && pf.active.Load() && slices.Contains(j.hosts, pf.host) &&
		!r.matchesAny(pf.host, after[pf.host], r.floor, j.index-1)
}

// liveManager is a running manager, drawn at random: from a source of its
// own, since how often it is called depends on timing, and the seed's
// sequence must not.
func (r *run) liveManager() *manager {
	var live []*manager
	for _, m := range r.managers {
		if m.running {
			live = append(live, m)
		}
	}
	return pick(r.route, live)
}

// waitJob polls the job as the driver does, but fast, and checks the fabric
// the moment it first reads Completed. The polls back off from 5 ms to
// maxJobPoll: a job takes a sweep, hundreds of milliseconds, and every poll
// costs the manager and its database the processor OpenSM and the simulator
// need to sweep.
func (r *run) waitJob(ctx context.Context, j job) error {
	deadline := time.Now().Add(120 * time.Second)
	wait := 5 * time.Millisecond
	var open time.Time // the last poll that read the job not Completed
	for {
		m := r.liveManager()
		polled := time.Now()
		a := send(ctx, r.client, m.url, "GET", "/"+j.path, "")
		if r.lostJobs[j.path] {
			if done := r.lostJob(j, a); done {
				return nil
			}
		} else if a.Err == nil && a.Status == 200 {
			var s jobStatus
			if err := jsonUnmarshal(a.Body, &s); err != nil {
				return fmt.Errorf("job %s: %v: %s", j.path, err, a.Body)
			}
			switch s.Status {
			case "Completed":
				r.readCompleted(ctx, j, s, open, polled)
				return nil
			case "Pending", "Running":
				open = polled
				if r.heldInnocent(&j, s) {
					return nil
				}
			case "Failed":
				if j.edited && strings.HasPrefix(s.Summary, "OpenSM did not apply the partitions file with this change") {
					r.res.EditFailures++
					r.logf("job %s Failed, as a hand edit during its sweep explains: %s", j.path, s.Summary)
					return nil
				}
				if j.pkeyRound && strings.TrimSpace(s.Summary) != "" {
					r.res.PKeyFailures++
					r.logf("job %s Failed in a round with a host OpenSM could not program (touches it: %v): %s", j.path,
						slices.Contains(j.hosts, r.pkeyFault.host), s.Summary)
					return nil
				}
				if j.tenantOwn && strings.TrimSpace(s.Summary) != "" {
					r.res.TenantFailures++
					r.logf("job %s Failed, touching the hosts of the tenant's fault %s: %s", j.path, r.tenant.kind, s.Summary)
					return nil
				}
				fallthrough
			default:
				r.violation("job %s of %s: %s: %s (%s); the model expects Completed%s", j.path, j.op, s.Status,
					s.Summary, firstLine(s.Description), r.innocentUnder(j))
				return nil
			}
		}
		if time.Now().After(deadline) {
			sim := ""
			if !r.fabric.IbsimRunning() {
				sim = "; the simulator is not running (see fabric/ibsim.log)"
			}
			r.violation("job %s of %s: not Completed after 120 s (last read: %s)%s%s%s", j.path, j.op, a, sim, j.otherFault,
				r.innocentUnder(j))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, maxJobPoll)
	}
}

// readCompleted checks a job the poll at polled read Completed, open being
// the last poll that read it not Completed (zero when none did).
func (r *run) readCompleted(ctx context.Context, j job, s jobStatus, open, polled time.Time) {
	if pf := r.pkeyFault; j.underPKeyError && pf.active.Load() {
		r.violation("job %s of %s: Completed while OpenSM could not program %s, whose table it changed (%s)",
			j.path, j.op, r.hostName(pf.host), s.Summary)
		return
	}
	if r.completedUnderTenantSM(j, s, open) {
		return
	}
	if _, seen := r.completedAt[j.path]; !seen {
		r.completedAt[j.path] = polled
	}
	if r.innocentUnder(j) != "" {
		r.res.Innocent++
	}
	r.completed(ctx, j, s)
}

// jobOwners are the job ids given out to either client, and for which
// change: no id may answer for two.
type jobOwners struct {
	mu    sync.Mutex
	owner map[string]string
}

// claim records path as owner's; when another change had it, it returns
// that change and true.
func (j *jobOwners) claim(path, owner string) (string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if before, twice := j.owner[path]; twice {
		return before, true
	}
	j.owner[path] = owner
	return "", false
}

// lostJob checks a poll of a job given out after the backup a restore put
// back: it must answer 404 (the driver then sends the change again), never
// a job (that id now names another change, or a change the database no
// longer holds). It says whether the wait is over.
func (r *run) lostJob(j job, a answer) bool {
	switch {
	case a.Err != nil || a.Status >= 500:
		return false
	case a.Status == 404:
		r.res.LostJobs++
		r.logf("job %s of %s, lost to the restore, answers 404", j.path, j.op)
		return true
	}
	r.finding("job %s of %s was given out after the backup the database was restored from; it answers %s instead of 404",
		j.path, j.op, a)
	return true
}

// reportMasters turns the master watch's findings into violations.
func (r *run) reportMasters() {
	for _, f := range r.masters.findings() {
		r.violation("two masters: %s", f)
	}
}

// maxJobPoll is the longest wait between two polls of a job.
const maxJobPoll = 40 * time.Millisecond

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// completed checks the fabric at a job's first Completed: every host whose
// table the request changed, and now and then all hosts, must hold what the
// model holds at some history index from the floor (the newest request a
// Completed job proves applied) to the newest request.
func (r *run) completed(ctx context.Context, j job, s jobStatus) {
	if j.changed {
		r.floor = max(r.floor, j.index)
	}
	hosts := j.hosts
	if r.rng.IntN(5) == 0 {
		hosts = r.hosts
	}
	if !j.changed && len(hosts) != len(r.hosts) {
		r.logf("job %s Completed: %s", j.path, s.Summary)
		return
	}
	bad := r.checkHosts(ctx, j, hosts, r.floor, len(r.tables)-1, "job "+j.path+" of "+j.op.String()+" Completed")
	r.logf("job %s Completed (%s): %d hosts read, %d wrong", j.path, s.Summary, len(hosts), bad)
}

// checkHosts reads the hosts' tables and compares each with the model's at
// history indexes lo..hi, and the job's places with what its request made
// of them (checkPlaces); it returns how many were wrong.
func (r *run) checkHosts(ctx context.Context, j job, hosts []fabric.GUID, lo, hi int, when string) int {
	bad := 0
	var read []fabric.GUID
	for _, h := range hosts {
		if _, out := r.excluded[h]; !out {
			read = append(read, h)
		}
	}
	tables := r.readTables(ctx, read)
	if ctx.Err() != nil {
		return 0 // interrupted: the reads prove nothing
	}
	for i, h := range read {
		r.res.Checks += 2
		if err := tables[i].err; err != nil {
			r.violation("%s: cannot read %s's pkey tables: %v", when, r.hostName(h), err)
			bad++
			continue
		}
		bad += r.checkPlaces(j, h, tables[i], hi, when)
		for _, side := range []struct {
			name string
			keys []uint16
		}{{"", tables[i].keys}, {"the switch port facing ", tables[i].sw}} {
			if !r.matchesAny(h, side.keys, lo, hi) {
				bad++
				r.violation("%s: %s%s (%s) holds %s; the model holds %s (after request %d; any of %d..%d would do)", when,
					side.name, r.hostName(h), h, hexKeys(side.keys), hexKeys(r.tables[hi][h]), hi, lo, hi)
			}
		}
	}
	return bad
}

func (r *run) matchesAny(h fabric.GUID, got []uint16, lo, hi int) bool {
	for i := lo; i <= hi; i++ {
		if slices.Equal(got, r.tables[i][h]) {
			return true
		}
	}
	return false
}

// readers is how many pkey tables are read at once: ibsim serves about 10
// clients, OpenSM and the slots killed OpenSMs leave behind included.
const readers = 3

// tableRead is a host's pkey table and that of the switch port facing it
// (where OpenSM puts the keys the switch enforces), sorted.
type tableRead struct {
	keys, sw []uint16
	err      error
}

// readTables reads the hosts' tables, a few at a time.
func (r *run) readTables(ctx context.Context, hosts []fabric.GUID) []tableRead {
	began := time.Now()
	defer func() { r.reading += time.Since(began); r.reads += len(hosts) }()
	out := make([]tableRead, len(hosts))
	next := make(chan int)
	done := make(chan struct{})
	for range min(readers, len(hosts)) {
		go func() {
			for i := range next {
				out[i] = r.readTable(ctx, hosts[i])
			}
			done <- struct{}{}
		}()
	}
	for i := range hosts {
		next <- i
	}
	close(next)
	for range min(readers, len(hosts)) {
		<-done
	}
	return out
}

// readTable reads a host's tables; a query that fails (a MAD lost on a busy
// machine) is tried again twice before the failure counts.
func (r *run) readTable(ctx context.Context, h fabric.GUID) tableRead {
	var t tableRead
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if t = r.readTableOnce(ctx, h); t.err == nil || ctx.Err() != nil {
			break
		}
	}
	return t
}

func (r *run) readTableOnce(ctx context.Context, h fabric.GUID) tableRead {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var t tableRead
	if t.keys, t.err = r.fabric.PKeys(ctx, h); t.err != nil {
		return t
	}
	if t.sw, t.err = r.fabric.SwitchPKeys(ctx, h); t.err != nil {
		t.err = fmt.Errorf("the switch port facing it: %w", t.err)
		return t
	}
	slices.Sort(t.keys)
	slices.Sort(t.sw)
	return t
}

func (r *run) hostName(h fabric.GUID) string {
	for _, x := range r.fabric.Hosts {
		if x.PortGUID == h {
			return x.Name
		}
	}
	return h.String()
}

// converge waits, after a fault, until every host holds the model's newest
// tables and the leader's partitions file holds the model's partitions:
// the manager must repair what the fault did. Then no host is excluded.
func (r *run) converge(ctx context.Context, after string) error {
	began := time.Now()
	defer func() { r.converging += time.Since(began) }()
	hi := len(r.tables) - 1
	want := r.tables[hi]
	wantParts := r.parts[hi]
	pending := slices.Clone(r.hosts)
	if r.kube != nil {
		// ib-kubernetes waits meanwhile: its model stands still.
		r.kube.gate.Lock()
		defer r.kube.gate.Unlock()
		want = maps.Clone(want)
		for _, h := range r.kubeHosts {
			want[h] = r.kube.table(h)
		}
		pending = append(pending, r.kubeHosts...)
		wantParts = mergeParts(wantParts, r.kube.partitions())
	}
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for {
		var still []fabric.GUID
		tables := r.readTables(ctx, pending)
		for i, h := range pending {
			t := tables[i]
			if t.err == nil && slices.Equal(t.keys, want[h]) && slices.Equal(t.sw, want[h]) {
				r.res.Checks += 2
				continue
			}
			last = fmt.Sprintf("%s holds %s, the switch port facing it %s (error: %v); the model %s", r.hostName(h),
				hexKeys(t.keys), hexKeys(t.sw), t.err, hexKeys(want[h]))
			still = append(still, h)
		}
		pending = still
		fileErr := r.checkFile(wantParts)
		if len(pending) == 0 && fileErr == nil {
			r.res.Checks++
			break
		}
		if fileErr != nil {
			last = fileErr.Error()
		}
		if err := ctx.Err(); err != nil {
			return err // interrupted: the reads prove nothing
		}
		if time.Now().After(deadline) {
			r.violation("after %s: the fabric did not converge on the model within 90 s: %s", after, last)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	clear(r.excluded)
	if r.epoch.Load()%2 == 1 {
		r.epoch.Add(1) // the fault is over
	}
	r.logf("converged after %s: %d hosts and the partitions file hold the model's state", after, len(r.hosts))
	return nil
}

// checkFile compares the partitions file of the manager that runs OpenSM
// with the model's partitions; with several managers, only one may run it.
func (r *run) checkFile(want string) error {
	var m *manager
	var running []string
	for _, x := range r.managers {
		if r.openSM(x) != 0 {
			m = x
			running = append(running, fmt.Sprint(x.index))
		}
	}
	if m == nil {
		return errors.New("no manager runs OpenSM")
	}
	// Only the lease holder may run OpenSM: a second master would apply
	// partitions of its own. (A leader that lost its lease stops its OpenSM
	// before another may take over, so the fabric converges on one.)
	if len(running) > 1 {
		return fmt.Errorf("managers %s each run OpenSM", strings.Join(running, ", "))
	}
	b, err := os.ReadFile(filepath.Join(r.smDir(m), "partitions.conf"))
	if err != nil {
		return err
	}
	got, err := partitionsOf(string(b))
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("partitions file of manager %d holds %s; the model %s", m.index, got, want)
	}
	return nil
}

// partitionsOf reads a partitions file the built-in template wrote into the
// model's short form (the default partition left out).
func partitionsOf(file string) (string, error) {
	members := map[string][]string{}
	var keys []string
	var body strings.Builder
	for _, l := range strings.Split(file, "\n") {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		body.WriteString(l)
		body.WriteByte(' ')
	}
	for _, stmt := range strings.Split(body.String(), ";") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		head, list, ok := strings.Cut(stmt, ":")
		if !ok {
			return "", fmt.Errorf("partitions file: statement %q has no ':'", stmt)
		}
		_, def, _ := strings.Cut(head, "=")
		pkey, _, _ := strings.Cut(def, ",")
		pkey = strings.TrimSpace(pkey)
		if pkey == "0x7fff" {
			continue
		}
		if _, twice := members[pkey]; twice {
			return "", fmt.Errorf("partitions file: pkey %s in two statements", pkey)
		}
		keys = append(keys, pkey)
		members[pkey] = nil
		for _, item := range strings.Split(list, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			guid, membership, _ := strings.Cut(item, "=")
			if membership != "full" {
				return "", fmt.Errorf("partitions file: member %q of %s is not full", item, pkey)
			}
			g, err := fabric.ParseGUID(guid)
			if err != nil {
				return "", fmt.Errorf("partitions file: %w", err)
			}
			members[pkey] = append(members[pkey], g.String())
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		slices.Sort(members[k])
		fmt.Fprintf(&b, "%s:%s;", k, strings.Join(members[k], ","))
	}
	return b.String(), nil
}
