package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// A run on two fabrics (--fabrics 2): one manager runs the default fabric
// ([opensm], physnet ibnet) and a second one, [fabric:storage] (physnet
// storage), each a simulator of its own with the same host GUIDs. Each fabric
// is a run of its own (its fabric, model, generator, checks, faults and
// history); the storage fabric's run is the default one's peer and shares its
// managers, database, job ids and ib-kubernetes' epoch. A round goes to one
// fabric, drawn from the seed; its fault (an OpenSM fault on that fabric
// only, a database fault under both) comes with a burst of the other fabric's
// requests, whose jobs must complete meanwhile: one fabric's fault never
// holds the other's jobs. After the fault both fabrics must converge, each on
// its own model.

const (
	storageFabric  = "storage" // the second fabric's [fabric:NAME]
	storagePhysnet = "storage" // its physical_networks
	storageDirName = "opensm-storage"
)

// notOnTwoFabrics are the fault kinds a run on two fabrics leaves out: they
// need several managers or Galera, or put the database back, both fabrics'
// models at once, which the per-fabric runs do not follow yet; the hostile
// tenant's are checked on one fabric (a tenant's OpenSM would be a second
// OpenSM to the storage fabric's master watch).
var notOnTwoFabrics = []string{faultKillLeader, faultRestoreDB, faultGaleraWriters, faultDropSets, faultCloneGUID, faultTenantSM}

// fabrics are the runs of every fabric: r alone, or the default's and the storage's.
func (r *run) fabrics() []*run {
	switch {
	case r.peer == nil:
		return []*run{r}
	case r.storage:
		return []*run{r.peer, r}
	}
	return []*run{r, r.peer}
}

// writeSMEnv writes the env file manager m's OpenSM of the run's fabric
// attaches to the simulator f with.
func (r *run) writeSMEnv(m *manager, f *fabricsim.Fabric) error {
	if !r.storage {
		return m.writeEnv(f)
	}
	_, err := m.storageConf(f)
	return err
}

// label names the run in its lines: the engine, and on two fabrics the fabric.
func (r *run) label() string {
	switch {
	case r.peer == nil:
		return r.engine
	case r.storage:
		return r.engine + " fabric " + storageFabric
	}
	return r.engine + " fabric default"
}

// smDir is the config_dir of the run's fabric's OpenSM on manager m.
func (r *run) smDir(m *manager) string {
	if r.storage {
		return m.storageDir()
	}
	return m.configDir()
}

// openSM is the PID of the OpenSM manager m runs on the run's fabric, 0 when none.
func (r *run) openSM(m *manager) int {
	if r.peer == nil {
		return m.openSMPID()
	}
	return m.openSMIn(r.smDir(m))
}

// opsLeft is how many requests the run may still send, both fabrics' together.
func (r *run) opsLeft() int {
	n := r.o.Ops - r.res.Ops
	if r.peer != nil {
		n -= r.peer.res.Ops
	}
	return n
}

// laneRound runs a round on one fabric, drawn from the seed (on one fabric,
// the round).
func (r *run) laneRound(ctx context.Context) error {
	if r.peer == nil || r.lanes.IntN(2) == 0 {
		return r.round(ctx)
	}
	return r.peer.round(ctx)
}

// startStorage starts the storage fabric's simulator and its run, before the
// managers' configuration names it.
func (r *run) startStorage(ctx context.Context) error {
	p := &run{o: r.o, engine: r.engine, storage: true, peer: r, srv: r.srv, client: r.client, dbURL: r.dbURL,
		rng: rand.New(rand.NewPCG(r.o.Seed, 0x5702)), route: rand.New(rand.NewPCG(r.o.Seed, 2)),
		model: newModelOn(storagePhysnet), excluded: map[fabric.GUID]string{}, jobOwner: r.jobOwner,
		lostJobs: map[string]bool{}, completedAt: map[string]time.Time{}, epoch: r.epoch, dir: filepath.Join(r.dir, storageFabric),
		res: Result{Engine: r.engine, Seed: r.o.Seed, ByFault: map[string]int{}}}
	r.peer, r.lanes = p, rand.New(rand.NewPCG(r.o.Seed, 0x1a2e))
	for _, f := range r.faultKind {
		if p.applies(f) {
			p.faultKind = append(p.faultKind, f)
		}
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	var err error
	// One OpenSM a fabric: ibsim's client slots (about 10) are the fabric's own.
	p.fabric, err = fabricsim.Start(ctx, filepath.Join(r.dir, "fabric-"+storageFabric),
		fabricsim.Options{Hosts: r.o.Hosts, Switches: r.o.Switches, SMs: 1})
	if err != nil {
		return fmt.Errorf("start the storage fabric's simulator: %w", err)
	}
	for _, h := range p.fabric.Hosts {
		p.hosts = append(p.hosts, h.PortGUID)
	}
	p.gen = newGenerator(p.rng, p.model, p.hosts, r.o.CollidingIDs)
	p.gen.retag()
	p.tables = []Tables{p.model.Tables(p.hosts)}
	p.parts = []string{p.model.Partitions()}
	p.masters = watchMasters(r.dir, true, true)
	return nil
}

// retag gives the generator's network and port IDs a mark of the storage
// fabric's (the first character of their second group): Neutron's IDs are
// unique across physnets. Two IDs that share their first 27 characters still do.
func (g *generator) retag() {
	for _, ids := range [][]string{g.nets, g.ports} {
		for i, id := range ids {
			ids[i] = id[:9] + "f" + id[10:]
		}
	}
}

// during sends a burst of the run's requests while the other fabric's fault f
// holds, and waits for their jobs: a fault on one fabric must not keep the
// other's jobs from completing.
func (r *run) during(ctx context.Context, f *fault) error {
	k := min(1+r.rng.IntN(4), r.opsLeft())
	var jobs []job
	for range k {
		j, err := r.request(ctx)
		if err != nil || r.stopped {
			return err
		}
		if j != nil {
			j.otherFault = fmt.Sprintf(" (sent under fault %s on the other fabric)", f.name)
			jobs = append(jobs, *j)
		}
	}
	for _, j := range jobs {
		if err := r.waitJob(ctx, j); err != nil || r.stopped {
			return err
		}
		r.underOther++
	}
	r.reportMasters()
	return nil
}

// endStorage reports the storage fabric's violations and adds its figures
// to the engine's.
func (r *run) endStorage(ctx context.Context) {
	p := r.peer
	if p.res.Violations > 0 {
		p.report(ctx)
	}
	for _, x := range []*run{r, p} {
		fmt.Fprintf(r.o.Out, "  %s: %d operations, %d accepted, %d refused, %d not found, %d faults, %d checks, %d violations; "+
			"%d jobs completed under a fault on the other fabric\n", x.label(), x.res.Ops, x.res.Accepted, x.res.Refused,
			x.res.NotFound, x.res.Faults, x.res.Checks, x.res.Violations, x.underOther)
	}
	r.res.Ops += p.res.Ops
	r.res.Faults += p.res.Faults
	r.res.Checks += p.res.Checks
	r.res.Violations += p.res.Violations
	r.res.Accepted += p.res.Accepted
	r.res.Refused += p.res.Refused
	r.res.NotFound += p.res.NotFound
	r.res.Lost += p.res.Lost
	r.res.EditFailures += p.res.EditFailures
	r.res.PKeyFailures += p.res.PKeyFailures
	for k, n := range p.res.ByFault {
		r.res.ByFault[k] += n
	}
	r.converging += p.converging
	r.reading += p.reading
	r.reads += p.reads
}

// storageConf is the manager's [fabric:storage] sections: its own
// config_dir, log, env file (the storage simulator's socket) and SM HCA.
func (m *manager) storageConf(f *fabricsim.Fabric) ([]testenv.Section, error) {
	env, guid := f.SMEnv(1)
	envFile := filepath.Join(m.dir, storageDirName+".env")
	if err := os.WriteFile(envFile, []byte(strings.Join(env, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return []testenv.Section{
		{Name: "fabric:" + storageFabric, Lines: []string{"physical_networks = " + storagePhysnet,
			"config_dir = " + m.storageDir(), "log_file = " + filepath.Join(m.storageDir(), "opensm.log"),
			"env_file = " + envFile, "check_interval = 1", fmt.Sprintf("sweep_timeout = %g", sweepTimeout.Seconds())}},
		{Name: "fabric:" + storageFabric + ":opensm_conf", Lines: []string{"guid = " + guid.String()}},
	}, nil
}

// confirmStorageSwitches records the storage fabric's switches as expected.
func (m *manager) confirmStorageSwitches(ctx context.Context) error {
	return fabricsim.ConfirmSwitches(ctx, m.binary, m.conf, m.storageDir(), "--fabric", storageFabric)
}

// twoFabricFaults says whether a fault kind runs on two fabrics.
func twoFabricFaults(f string) bool { return !slices.Contains(notOnTwoFabrics, f) }
