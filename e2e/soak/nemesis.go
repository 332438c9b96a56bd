package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The faults that reach the windows between a manager's steps: a slow or
// partitioned database, writers on several Galera nodes, a sweep longer than
// sweep_timeout, a host OpenSM cannot program, a database restored from a
// backup.
const (
	faultDBLatency     = "db-latency"     // a manager's database connections slowed, jittered, for a while
	faultDBPartition   = "db-partition"   // a manager's database connections black-holed (no reset), then healed
	faultGaleraWriters = "galera-writers" // kill -9 of a Galera node under managers writing through all three
	faultSlowSweep     = "slow-sweep"     // OpenSM stopped mid-sweep for longer than sweep_timeout
	faultPKeyErrors    = "pkey-errors"    // ibsim drops a host's P_KeyTable MADs: OpenSM cannot program it
	faultRestoreDB     = "restore-db"     // the database replaced by an earlier backup under the managers
)

// sweepTimeout is the managers' [opensm] sweep_timeout: short, so that the
// slow-sweep fault outlasts it within seconds (a sweep here takes tens of
// milliseconds; a timed-out wait fails no job, it applies again).
const sweepTimeout = 4 * time.Second

// dbLatency slows one manager's database (or, one time in three, every
// manager's) by 100 ms to 1.5 s a chunk, each way, with up to half as much
// again of jitter, for up to 6 s.
func (r *run) dbLatency() (string, chan error) {
	targets := r.someManagers()
	latency := time.Duration(100+r.rng.IntN(1400)) * time.Millisecond
	jitter := latency / 2
	d := r.duration(6000)
	for _, m := range targets {
		m.proxy.slow(latency, jitter)
	}
	return fmt.Sprintf("database of manager %s slowed by %s (+ up to %s) each way for %s", managerList(targets),
			latency, jitter, d), later(d, func() error {
			for _, m := range targets {
				m.proxy.slow(0, 0)
			}
			return nil
		})
}

// dbPartition black-holes the database of the leader (half the time) or of
// a manager drawn at random, for up to 8 s: longer than lease_timeout, so
// that a leader must give OpenSM up before another takes over.
func (r *run) dbPartition() (string, chan error) {
	m := r.leader()
	if r.rng.IntN(2) == 0 {
		m = pick(r.rng, r.managers)
	}
	d := r.duration(8000)
	m.proxy.partition(true)
	return fmt.Sprintf("database of manager %d black-holed for %s", m.index, d), later(d, func() error {
		m.proxy.partition(false)
		return nil
	})
}

// someManagers is one manager drawn at random, or one time in three all.
func (r *run) someManagers() []*manager {
	if len(r.managers) > 1 && r.rng.IntN(3) == 0 {
		return r.managers
	}
	return []*manager{pick(r.rng, r.managers)}
}

func managerList(ms []*manager) string {
	var s []string
	for _, m := range ms {
		s = append(s, strconv.Itoa(m.index))
	}
	return strings.Join(s, ", ")
}

// galeraWriters kills a Galera node with SIGKILL under the managers writing
// through all three, and starts it again after up to 3 s (it rejoins by IST
// or SST, which the end of the fault waits for).
func (r *run) galeraWriters(ctx context.Context) (string, chan error, error) {
	node := r.rng.IntN(3)
	d := r.duration(3000)
	if err := r.srv.killGaleraNode(node); err != nil {
		return "", nil, err
	}
	var on []string
	for _, m := range r.managers {
		if m.node == node {
			on = append(on, strconv.Itoa(m.index))
		}
	}
	return fmt.Sprintf("kill -9 of Galera node %d (under manager %s), started again after %s", node+1,
			strings.Join(on, ", "), d), later(d, func() error {
			return r.srv.startGaleraNode(context.WithoutCancel(ctx), node)
		}), nil
}

// slowSweep stops the leader's OpenSM in the middle of a heavy sweep (it
// sends OpenSM a SIGHUP and stops it as soon as the sweep writes to its log)
// for longer than sweep_timeout: the manager must follow the sweep, not
// lose the jobs, and complete them once it ends.
func (r *run) slowSweep(ctx context.Context) (string, chan error) {
	leader := r.leader()
	pid := r.openSM(leader)
	if pid == 0 {
		return "OpenSM not running: nothing stopped", nil
	}
	logPath := filepath.Join(r.smDir(leader), "opensm.log")
	var from int64
	if fi, err := os.Stat(logPath); err == nil {
		from = fi.Size()
	}
	syscall.Kill(pid, syscall.SIGHUP)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if fi, err := os.Stat(logPath); err == nil && fi.Size() > from {
			break
		}
		time.Sleep(time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	d := sweepTimeout + r.duration(3000)
	return fmt.Sprintf("SIGHUP, then SIGSTOP mid-sweep to OpenSM (pid %d) for %s (sweep_timeout %s)", pid, d, sweepTimeout),
		later(d, func() error { syscall.Kill(pid, syscall.SIGCONT); return nil })
}

// pkeyFault is a host whose P_KeyTable MADs ibsim drops: OpenSM cannot
// program it until healed.
type pkeyFault struct {
	host   fabric.GUID
	active atomic.Bool // false once the heal is under way
}

// pkeyErrors makes ibsim drop every P_KeyTable MAD to a host (OpenSM logs
// ERR 3113 and its sweep ends with errors) for up to 4 s, then heals it
// (OpenSM programs it at its next sweep). Until the fabric converged the
// host is not read: the checker's own reads of the table are dropped too.
func (r *run) pkeyErrors(ctx context.Context) (string, chan error, error) {
	h := pick(r.rng, r.fabric.Hosts)
	// Mostly a host in a partition: the round's requests are likelier to
	// move or remove its port than to bind a port to a host drawn at random.
	if held := r.heldHosts(); len(held) > 0 && r.rng.IntN(3) > 0 {
		h = r.fabric.Host(r.hostName(pick(r.rng, held)))
	}
	pf := &pkeyFault{host: h.PortGUID}
	cmd := fmt.Sprintf(`Error "%s"[1] 100 22`, h.Name)
	if _, err := r.fabric.Sim(ctx, cmd); err != nil {
		return "", nil, fmt.Errorf("ibsim %s: %w", cmd, err)
	}
	pf.active.Store(true)
	r.pkeyFault = pf
	r.excluded[h.PortGUID] = "P_KeyTable MADs dropped"
	d := r.duration(4000)
	f := r.fabric
	return fmt.Sprintf("ibsim drops %s's P_KeyTable MADs for %s", h.Name, d), later(d, func() error {
		pf.active.Store(false)
		_, err := f.Sim(context.WithoutCancel(ctx), fmt.Sprintf(`Error "%s"[1] 0`, h.Name))
		return err
	}), nil
}

// heldHosts are the driver's hosts whose table holds a network's key.
func (r *run) heldHosts() []fabric.GUID {
	var held []fabric.GUID
	newest := r.tables[len(r.tables)-1]
	for _, h := range r.hosts {
		if len(newest[h]) > 1 {
			held = append(held, h)
		}
	}
	return held
}

// takeBackup reads the database as an operator's backup would, with the
// model's state at that moment (the driver's memory of what it sent is not
// the database's, and stays).
func (r *run) takeBackup(ctx context.Context) error {
	if r.kube != nil {
		// No Kubernetes change in flight: its model is the backup's.
		r.kube.gate.Lock()
		defer r.kube.gate.Unlock()
	}
	b, err := takeBackup(ctx, r.dbURL)
	if err != nil {
		return fmt.Errorf("back the database up: %w", err)
	}
	r.backup = &savedBackup{db: b, model: r.model.snapshot(), index: len(r.tables) - 1, jobs: len(r.jobOrder)}
	if r.kube != nil {
		r.backup.kube = r.kube.snapshot()
	}
	r.logf("BACKUP of the database after request %d (%d jobs given out so far)", r.backup.index, len(r.jobOrder))
	return nil
}

// savedBackup is a backup with what the model held when it was taken.
type savedBackup struct {
	db    *backup
	model modelState
	index int // the history index it holds
	jobs  int // how many job ids had been given out
	kube  map[uint16]map[fabric.GUID]bool
}

// restoreDB puts the latest backup back while the managers run. The model
// goes back to the backup's state; every job given out after it is lost, and
// must answer 404 (networking-mlnx then sends the change again), never
// another change's job.
func (r *run) restoreDB(ctx context.Context) (string, error) {
	if r.backup == nil {
		if err := r.takeBackup(ctx); err != nil {
			return "", err
		}
	}
	b := r.backup
	if r.kube != nil {
		r.kube.gate.Lock()
		defer r.kube.gate.Unlock()
	}
	// The managers write meanwhile: a restore that loses a conflict (a
	// deadlock, a Galera certification failure) is tried again, as an
	// operator would, for up to a minute. On Galera any commit through
	// another node (an apply's row, a heartbeat every second) aborts the
	// restore's large transaction at its certification, so there, as an
	// operator restoring a cluster keeps its writers out, the managers'
	// connections are held (black-holed, as db-partition does) while the
	// restore runs: their writes arrive once it is done.
	var err error
	wait := 100 * time.Millisecond
	for attempt, deadline := 1, time.Now().Add(time.Minute); ; attempt++ {
		hold := r.engine == engineGalera
		if hold {
			r.holdDatabase(true)
		}
		err = b.db.restore(ctx, r.dbURL)
		if hold {
			r.holdDatabase(false)
		}
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		r.logf("restore attempt %d: %v; trying again", attempt, err)
		time.Sleep(wait/2 + rand.N(wait))
		wait = min(2*wait, 2*time.Second)
	}
	if err != nil {
		return "", fmt.Errorf("restore the database: %w", err)
	}
	lost := 0
	for _, p := range r.jobOrder[b.jobs:] {
		if !r.lostJobs[p] {
			r.lostJobs[p] = true
			lost++
		}
	}
	r.model.restore(b.model)
	if r.kube != nil {
		r.kube.members = b.kube
		b.kube = r.kube.snapshot() // the model's copy changes from here on
	}
	r.tables = append(r.tables, r.model.Tables(r.hosts))
	r.parts = append(r.parts, r.model.Partitions())
	for _, h := range r.hosts {
		r.excluded[h] = "database restored"
	}
	return fmt.Sprintf("database restored from the backup after request %d: %d job(s) given out since are lost",
		b.index, lost), nil
}

// holdDatabase black-holes (true) or heals every manager's database proxy.
func (r *run) holdDatabase(on bool) {
	for _, m := range r.managers {
		if m.proxy != nil {
			m.proxy.partition(on)
		}
	}
}

// masterWatch samples the engine's OpenSM processes: two running at once,
// seen in three samples in a row, are two masters on one fabric.
type masterWatch struct {
	dir string // an OpenSM of this engine's has its config under it
	// split, storage: on two fabrics, only the storage fabric's OpenSMs
	// (storage) or only the default fabric's are watched.
	split, storage bool
	stop           chan struct{}
	done           chan struct{}
	mu             sync.Mutex
	seen           []string // what was seen, for the run to report as violations
}

// watchMasters watches the OpenSMs under dir; on two fabrics (split), only
// the storage fabric's (storage) or only the default fabric's: one OpenSM
// each is not two masters.
func watchMasters(dir string, split, storage bool) *masterWatch {
	w := &masterWatch{dir: dir + "/", split: split, storage: storage, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *masterWatch) loop() {
	defer close(w.done)
	var last string
	streak := 0
	for {
		select {
		case <-w.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		pids := w.openSMs()
		if len(pids) < 2 {
			streak, last = 0, ""
			continue
		}
		key := strings.Join(pids, ",")
		if key == last {
			streak++
		} else {
			streak, last = 1, key
		}
		if streak == 3 {
			w.mu.Lock()
			w.seen = append(w.seen, fmt.Sprintf("%s: OpenSM processes %s ran at once for 300 ms", time.Now().Format(time.TimeOnly), key))
			w.mu.Unlock()
		}
	}
}

// openSMs are the live OpenSM processes whose command line names a file
// under the engine's directory.
func (w *masterWatch) openSMs() []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) != "opensm" {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if w.split && strings.Contains(string(cmdline), storageDirName) != w.storage {
			continue
		}
		if strings.Contains(string(cmdline), w.dir) && processRuns(pid) {
			out = append(out, e.Name())
		}
	}
	return out
}

// findings returns what was seen since the last call.
func (w *masterWatch) findings() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen
	w.seen = nil
	return s
}

func (w *masterWatch) close() {
	close(w.stop)
	<-w.done
}
