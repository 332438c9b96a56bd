package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
)

// The fault kinds.
const (
	faultKillManager   = "kill-manager"    // kill -9 of the manager (and with it OpenSM), then a restart
	faultStopOpenSM    = "stop-opensm"     // SIGSTOP of OpenSM, SIGCONT a little later
	faultKillOpenSM    = "kill-opensm"     // kill -9 of OpenSM: the manager must start it again
	faultLink          = "link"            // a host's or a switch's links down in ibsim, up a little later
	faultEditPartition = "edit-partitions" // a hand edit of the partitions file, sometimes with a SIGHUP
	faultRestartDB     = "restart-db"      // the database server stopped and started again (server engines)
	faultKillLeader    = "kill-leader"     // kill -9 of the applying manager among several, restarted later
)

// Faults are every fault kind; CIFaults, the default, leaves out the leader
// kill among several managers, which --faults all turns on (make test runs it
// in a run of its own, with three managers), and the hostile tenant's faults
// (TenantFaults). A kind that cannot happen on an
// engine is left out there (restart-db and the database proxy's on SQLite,
// galera-writers off Galera).
var (
	Faults = []string{faultKillManager, faultStopOpenSM, faultKillOpenSM, faultLink, faultEditPartition, faultRestartDB,
		faultKillLeader, faultDBLatency, faultDBPartition, faultGaleraWriters, faultSlowSweep, faultPKeyErrors, faultRestoreDB,
		faultDropSets, faultCloneGUID, faultTenantSM}
	CIFaults = []string{faultKillManager, faultStopOpenSM, faultKillOpenSM, faultLink, faultEditPartition, faultRestartDB,
		faultDBLatency, faultDBPartition, faultGaleraWriters, faultSlowSweep, faultPKeyErrors, faultRestoreDB}
)

// DefaultFaultRate is the percentage of rounds with a fault.
const DefaultFaultRate = 30

// ibsim frees a client's slot only when it detaches cleanly, which a killed
// OpenSM never does, and it serves about 10 (OpenSM and the checker's
// readers among them): the simulator is started again (while no OpenSM runs)
// before it runs out.
const maxLeaked = 5

// fault is an injected fault; end undoes what is still in effect (a SIGCONT,
// a link up, a leader's restart) and waits for it.
type fault struct {
	name string
	done chan error // nil: nothing left to undo
}

func (f *fault) end(ctx context.Context) error {
	if f.done == nil {
		return nil
	}
	select {
	case err := <-f.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// later runs undo after d, in the background; end waits for it.
func later(d time.Duration, undo func() error) chan error {
	done := make(chan error, 1)
	go func() { time.Sleep(d); done <- undo() }()
	return done
}

func (r *run) duration(maxMS int) time.Duration {
	return time.Duration(50+r.rng.IntN(maxMS)) * time.Millisecond
}

// deal is the next fault kind from a deck of every kind, shuffled with the
// seed and dealt again when empty: every kind comes once in each
// len(kinds) faults, so that even a short run meets each. The first deck
// deals the run's first kinds (isFirst) before the others.
func (r *run) deal() string {
	if len(r.deck) == 0 {
		r.deck = r.shuffled()
	}
	kind := r.deck[0]
	r.deck = r.deck[1:]
	if r.firstLeft > 0 {
		r.firstLeft--
	}
	return kind
}

// shuffled is a new deck: the first deck's first kinds at its front, each
// part shuffled with the seed.
func (r *run) shuffled() []string {
	var first, rest []string
	for _, k := range r.faultKind {
		if !r.dealtOnce && r.isFirst(k) {
			first = append(first, k)
		} else {
			rest = append(rest, k)
		}
	}
	r.dealtOnce, r.firstLeft = true, len(first)
	for _, part := range [][]string{first, rest} {
		r.rng.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
	}
	return append(first, rest...)
}

// isFirst says whether the first deck deals kind before the others: the
// hostile tenant's kinds (TenantFaults) whenever they are listed, and the
// run's Options.FirstFaults. A hostile kind dealt in its turn met PostgreSQL
// and MariaDB in no run of 40 operations on seed 1.
func (r *run) isFirst(kind string) bool {
	return slices.Contains(TenantFaults, kind) || slices.Contains(r.o.FirstFaults, kind)
}

// firstPending says whether a first kind is still to be dealt: until none
// is, every round has a fault (placeFault), so that each comes on every
// engine in its first rounds, whatever the seed (at the rate's 30 % a run
// of 40 operations, about 16 rounds, had fewer than three faults on about
// one seed in ten).
func (r *run) firstPending() bool {
	if !r.dealtOnce {
		return slices.ContainsFunc(r.faultKind, r.isFirst)
	}
	return r.firstLeft > 0
}

// inject starts a fault of the kind dealt.
func (r *run) inject(ctx context.Context, kind string) (*fault, error) {
	if (kind == faultKillOpenSM || kind == faultKillLeader) && r.leaked+1 >= maxLeaked {
		kind = faultKillManager // which restarts the simulator
	}
	r.res.Faults++
	r.res.ByFault[kind]++
	// ib-kubernetes' hosts are an innocent tenant's under another tenant's
	// host's fault: its applied answers are checked meanwhile.
	if r.epoch.Load()%2 == 0 && kind != faultDropSets && kind != faultCloneGUID {
		r.epoch.Add(1) // until the fabric converged (see kubeClient)
	}
	f := &fault{name: kind}
	what, err := r.startFault(ctx, f)
	r.logf("FAULT %d (%s): %s", r.res.Faults, kind, what)
	if r.o.Verbose || r.res.Faults%10 == 1 {
		fmt.Fprintf(r.o.Out, "  %s: fault %d: %s\n", r.label(), r.res.Faults, what)
	}
	if err != nil {
		return nil, fmt.Errorf("fault %s: %w", kind, err)
	}
	return f, nil
}

// startFault does what fault f's kind does to the rig, sets f.done when the
// fault is undone later, and says what it did.
func (r *run) startFault(ctx context.Context, f *fault) (what string, err error) {
	leader := r.leader()
	switch f.name {
	case faultKillManager:
		what, err = r.killManagers(ctx)
	case faultStopOpenSM:
		what, f.done = r.stopOpenSM(leader)
	case faultKillOpenSM:
		what = r.killOpenSM(ctx, leader)
	case faultLink:
		what, f.done, err = r.linkDown(ctx)
	case faultEditPartition:
		what, err = r.editPartitions(leader)
	case faultRestartDB:
		d := r.duration(3000)
		what = fmt.Sprintf("%s server stopped for %s and started again", r.engine, d)
		err = r.srv.restart(ctx, r.engine, d)
	case faultKillLeader:
		what, err = r.killLeader(ctx, leader)
	case faultDBLatency:
		what, f.done = r.dbLatency()
	case faultDBPartition:
		what, f.done = r.dbPartition()
	case faultGaleraWriters:
		what, f.done, err = r.galeraWriters(ctx)
	case faultSlowSweep:
		what, f.done = r.slowSweep(ctx)
	case faultPKeyErrors:
		what, f.done, err = r.pkeyErrors(ctx)
	case faultRestoreDB:
		what, err = r.restoreDB(ctx)
	case faultDropSets:
		what, f.done, err = r.dropSets(ctx)
	case faultCloneGUID:
		what, f.done, err = r.cloneGUID(ctx)
	case faultTenantSM:
		what, f.done, err = r.tenantSMFault(ctx)
	}
	return what, err
}

// stopOpenSM stops the leader's OpenSM with SIGSTOP for a while: done
// continues it.
func (r *run) stopOpenSM(leader *manager) (what string, done chan error) {
	pid := r.openSM(leader)
	if pid == 0 {
		return "OpenSM not running: nothing stopped", nil
	}
	d := r.duration(3000)
	syscall.Kill(pid, syscall.SIGSTOP)
	return fmt.Sprintf("SIGSTOP to OpenSM (pid %d) for %s", pid, d),
		later(d, func() error { syscall.Kill(pid, syscall.SIGCONT); return nil })
}

// killOpenSM kills the leader's OpenSM with -9, once it is attached to the
// simulator; the supervisor starts another.
func (r *run) killOpenSM(ctx context.Context, leader *manager) string {
	pid := r.openSM(leader)
	if pid == 0 {
		return "OpenSM not running: nothing killed"
	}
	r.waitAttached(ctx, pid)
	syscall.Kill(pid, syscall.SIGKILL)
	r.leaked++
	return fmt.Sprintf("kill -9 of OpenSM (pid %d)", pid)
}

// killLeader kills the leading manager with -9. It is started again once the
// round's jobs are done: another manager must complete them.
func (r *run) killLeader(ctx context.Context, leader *manager) (string, error) {
	r.waitAttached(ctx, r.openSM(leader))
	if err := leader.kill(); err != nil {
		return "", err
	}
	r.leaked++
	r.deferred = append(r.deferred, leader)
	return fmt.Sprintf("kill -9 of the leader, manager %d; started again after the round's jobs", leader.index), nil
}

// waitAttached waits until the OpenSM with this pid is attached to the
// simulator (ibsim's console lists it), up to maxAttach. ibsim answers a new
// client by connecting to the client's socket, and panics, ending the whole
// simulated fabric, when that client died in between: an OpenSM killed in
// the milliseconds of its attach would take the fabric with it, which no
// real fabric does. Killed any time after, it only leaves its slot behind.
func (r *run) waitAttached(ctx context.Context, pid int) {
	if pid == 0 {
		return
	}
	deadline := time.Now().Add(maxAttach)
	want := fmt.Sprintf(" pid %d ", pid)
	for processRuns(pid) && time.Now().Before(deadline) && ctx.Err() == nil {
		if list, err := r.fabric.Sim(ctx, "Attached"); err == nil && strings.Contains(list, want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// maxAttach bounds the wait for an OpenSM to attach to the simulator.
const maxAttach = 10 * time.Second

// leader is the manager that runs OpenSM (the applier), or the first running one.
func (r *run) leader() *manager {
	for _, m := range r.managers {
		if r.openSM(m) != 0 {
			return m
		}
	}
	return r.liveManager()
}

// killManagers kills every manager with SIGKILL, starts the simulator again
// when killed OpenSMs have used up its client slots (the hosts then come back
// with empty tables, which the restarted managers' first apply must fill),
// and starts the managers again.
func (r *run) killManagers(ctx context.Context) (string, error) {
	var killed []string
	for _, m := range r.managers {
		if m.running {
			for _, x := range r.fabrics() {
				if pid := x.openSM(m); pid != 0 {
					x.waitAttached(ctx, pid)
					x.leaked++
				}
			}
			if err := m.kill(); err != nil {
				return "", err
			}
			killed = append(killed, fmt.Sprint(m.index))
		}
	}
	what := "kill -9 of manager " + strings.Join(killed, ", ")
	if d := r.duration(500); r.rng.IntN(2) == 0 {
		time.Sleep(d)
		what += fmt.Sprintf(", down %s", d)
	}
	for _, x := range r.fabrics() {
		if x.leaked >= maxLeaked {
			if err := x.restartFabric(ctx); err != nil {
				return "", err
			}
			sim := "simulator"
			if x.peer != nil {
				sim = x.label() + "'s simulator"
			}
			what += ", " + sim + " started again (empty pkey tables)"
		}
	}
	for _, m := range r.managers {
		if err := m.start(ctx, r.client); err != nil {
			return "", err
		}
	}
	r.deferred = nil
	return what + ", restarted", nil
}

// restartFabric starts the simulated fabric again in its directory: the same
// hosts, a new ibsim socket in the env file OpenSM reads at every start.
func (r *run) restartFabric(ctx context.Context) error {
	if err := r.fabric.Stop(); err != nil {
		return fmt.Errorf("stop simulated fabric: %w", err)
	}
	f, err := fabricsim.Start(ctx, r.fabric.Dir, fabricsim.Options{Hosts: r.o.Hosts, Switches: r.o.Switches, SMs: r.managerCount()})
	if err != nil {
		return fmt.Errorf("start simulated fabric again: %w", err)
	}
	for _, m := range r.managers {
		if err := r.writeSMEnv(m, f); err != nil {
			return err
		}
	}
	r.fabric = f
	if r.kube != nil {
		r.kube.fabric.Store(f)
	}
	r.leaked = 0
	for _, h := range r.hosts {
		r.excluded[h] = "new simulator"
	}
	return nil
}

// linkDown takes a host's links, or the second switch's, down, and up again
// after a while. The hosts behind are not read until the fabric converged.
func (r *run) linkDown(ctx context.Context) (string, chan error, error) {
	node := r.fabric.Hosts[r.rng.IntN(len(r.fabric.Hosts))].Name
	if r.o.Switches > 1 && r.rng.IntN(3) == 0 {
		node = fmt.Sprintf("S%d", r.o.Switches)
	}
	for _, h := range r.fabric.Hosts {
		if h.Name == node || h.Switch == node {
			r.excluded[h.PortGUID] = "links down"
		}
	}
	if err := r.fabric.Unlink(ctx, node); err != nil {
		return "", nil, err
	}
	d := r.duration(3000)
	f := r.fabric
	return fmt.Sprintf("links of %s down for %s", node, d), later(d, func() error {
		return f.Relink(context.WithoutCancel(ctx), node)
	}), nil
}

// editPartitions edits the leader's partitions file by hand, as an operator
// might: a host added to a partition, the file emptied or removed; and
// sometimes sends OpenSM a SIGHUP, so that the edit takes effect until the
// manager repairs it.
func (r *run) editPartitions(leader *manager) (string, error) {
	path := filepath.Join(r.smDir(leader), "partitions.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read partitions file: %w", err)
	}
	var what string
	switch r.rng.IntN(4) {
	case 0:
		if err := os.Remove(path); err != nil {
			return "", err
		}
		what = "partitions file removed"
	case 1:
		if err := os.WriteFile(path, []byte("Default=0x7fff, ipoib : ALL=full ;\n"), 0o644); err != nil {
			return "", err
		}
		what = "partitions file replaced by an ALL=full default partition"
	default:
		guid := pick(r.rng, r.hosts)
		text := string(b)
		i := strings.LastIndex(text, " ;")
		if i < 0 {
			return "", fmt.Errorf("partitions file without a statement: %q", text)
		}
		text = text[:i] + fmt.Sprintf(",\n    %s=full", guid) + text[i:]
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return "", err
		}
		what = fmt.Sprintf("%s added to the last partition of the file", r.hostName(guid))
	}
	for _, h := range r.hosts {
		r.excluded[h] = "hand edit"
	}
	if pid := r.openSM(leader); pid != 0 && r.rng.IntN(2) == 0 {
		syscall.Kill(pid, syscall.SIGHUP)
		what += ", SIGHUP to OpenSM"
	}
	return what, nil
}
