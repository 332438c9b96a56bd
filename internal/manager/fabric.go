package manager

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/health"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/leader"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/metrics"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Each fabric the manager serves ([opensm] and every [fabric:NAME]) runs
// apart: its own OpenSM and supervisor, applier, SMP readers, lock or lease
// and store view, in a goroutine of its own. What they share is the process:
// the database pool, the API and its listeners, the metrics registry and the
// logger. A fabric whose OpenSM fails or whose gates close holds only its own
// jobs; the manager stops only for what stops every fabric.

// FabricRules are the rules each fabric's requests are recorded by, the
// default fabric first, without the template's static partitions and without
// a port limit: enough for the commands that record nothing. The manager's
// start adds those (planFabric).
func FabricRules(cfg *config.Config) []store.FabricRules {
	out := make([]store.FabricRules, 0, len(cfg.Fabrics))
	for _, f := range cfg.Fabrics {
		rules := RulesOf(f)
		rules.PKeysClients = pkeysClientRules(cfg, f.Name)
		rules.ReservedGUIDs = cfg.API.ReservedGUIDs
		rules.CheckHost = cfg.API.CheckHost
		out = append(out, store.FabricRules{Name: f.Name, Rules: rules})
	}
	return out
}

// RulesOf are the rules f's requests are recorded by, as FabricRules has them.
func RulesOf(f config.Fabric) store.Rules {
	return store.Rules{PhysicalNetworks: f.PhysicalNetworks, FlatPKey: f.OpenSM.FlatPKey,
		KubernetesRange: f.UFMPKeys.PKeyRange, KubernetesMaxMembersPerPKey: f.UFMPKeys.MaxMembersPerPKey,
		KubernetesMaxMembers: f.UFMPKeys.MaxMembers}
}

// fabricPlan is what a fabric needs before the database is open: its
// template, its static partitions and its subnet dump's readers, which its
// store rules refuse requests by.
type fabricPlan struct {
	fab   config.Fabric
	cfg   config.FabricConfig
	tpl   *partitions.Template
	dump  *topology.Dump
	limit *topology.PortLimit
	rules store.Rules
}

// planFabric loads f's template and builds its rules: its static
// partitions, and the port limit of its own subnet dump.
func planFabric(ctx context.Context, cfg *config.Config, f config.Fabric, rules store.Rules) (fabricPlan, error) {
	p := fabricPlan{fab: f, cfg: cfg.FabricConfig(f), rules: rules}
	var err error
	if p.tpl, err = LoadTemplate(p.cfg); err != nil {
		return p, f.Wrap(err)
	}
	// Refused when sent: a network whose VLAN ID is a static partition's pkey,
	// and a port whose host port would fill its switch port's pkey table.
	o := p.cfg.OpenSM
	static, err := p.tpl.Static(ctx, o.DefaultPartition, o.FlatPKey)
	if err != nil {
		return p, f.Wrap(fmt.Errorf("[opensm] partitions_template: %w", err))
	}
	// One reader of the subnet dump for the API's capacity check, the gates
	// and the metrics: it parses the file only when OpenSM wrote another
	// content.
	p.dump = topology.NewDump(p.cfg.OpenSM.SubnetDump())
	p.limit = &topology.PortLimit{DumpFile: p.cfg.OpenSM.SubnetDump(), Dump: p.dump, Capacity: o.SwitchPKeyCapacity, Static: static.PKeysOf}
	p.rules.StaticPKey = static.Name
	p.rules.StaticMember = static.Listing
	p.rules.PartitionFlags = PartitionFlags(p.cfg, p.tpl)
	limit := p.limit
	p.rules.PortLimit = func() (store.PortCheck, error) { return limit.Checker() }
	return p, nil
}

// Fabric is one fabric's running parts: its configuration, its store view,
// its OpenSM supervisor and its elector. While its manager is elected it
// runs its services (termServices); when the term ends (the lock or the
// lease may be lost, the manager stops) it stops them and waits for them
// before the elector stops OpenSM or releases the lease.
type Fabric struct {
	name   string
	cfg    config.FabricConfig
	log    *slog.Logger // with a "fabric" attribute when there are several
	st     *store.Store // the fabric's view
	sm     *opensm.Supervisor
	holder string // who this manager is, for operators: host and pid
	// writeOpenSMConf writes opensm.conf with the keys the database holds
	// and qos.
	writeOpenSMConf func(context.Context) error
	// qos is opensm.conf's qos when the manager owns it: on while some
	// pkey's QoS is set (the applier's SetQoS).
	qos         atomic.Bool
	app         *applier.Applier
	applierLoop *health.Loop
	leases      store.LeaseTables // with [ha] ha = true only
	metrics     *metrics.Fabric   // the fabric's series in the shared registry
	// services are what one term runs: termServices, unless a test sets
	// its own.
	services func(term leader.Term) []Service
	// election campaigns for the fabric while it runs (Start to Stop);
	// made at the first of them, under mu, so that the two may race.
	mu       sync.Mutex
	election *routine
}

// wireFabric prepares p's OpenSM, applier and readers on its store view st,
// refusing to start on a setting or a recorded state its configuration makes
// wrong. closeSM releases its OpenSM driver (also on error, once set).
func wireFabric(ctx context.Context, p fabricPlan, st *store.Store, m *metrics.Metrics, checker *health.Checker,
	log *slog.Logger) (f *Fabric, closeSM func(), err error) {
	fab, cfg := p.fab, p.cfg
	f = &Fabric{name: fab.Name, cfg: cfg, log: log, st: st, holder: holder()}
	f.services = f.termServices
	closeSM = func() {}
	keys := opensm.DatabaseKeys{Store: st}
	// OpenSM starts with qos as the recorded pkeys want it, not off until
	// the first apply: a pkey's QoS would go unlimited for its first sweeps.
	if cfg.OwnsQoS() {
		on, err := anyQoSSet(ctx, st)
		if err != nil {
			return nil, closeSM, fab.Wrap(err)
		}
		f.qos.Store(on)
	}
	sm, flavour, closeDriver, writeConf, err := prepareOpenSM(ctx, cfg, log, keys, &f.qos, fab.CacheDir(),
		cfg.OpenSM.DriverStatusFile())
	if err != nil {
		return nil, closeSM, fab.Wrap(err)
	}
	f.sm, f.writeOpenSMConf, closeSM = sm, writeConf, closeDriver
	// A configuration changed under the recorded networks (flat_pkey now a
	// network's VLAN, a static partition on its pkey) would fail every later
	// job: refuse to start, naming them, as for an unknown key.
	text, err := CheckRecordedState(ctx, cfg, st, p.tpl, flavour)
	if err != nil {
		return nil, closeSM, fab.Wrap(err)
	}
	if err := writeRecordedState(cfg, text); err != nil {
		return nil, closeSM, fab.Wrap(err)
	}
	if err := recordSMPort(ctx, cfg, st, f.holder, log); err != nil {
		return nil, closeSM, fab.Wrap(err)
	}
	if err := warnCheckHostUnconfirmed(ctx, cfg, st, log); err != nil {
		return nil, closeSM, fab.Wrap(err)
	}
	// One set of M_Keys for the read-back and the second-SM look: an apply
	// reads them once, beside its sweep (readbackMKeys).
	mkeys, err := newReadbackMKeys(ctx, cfg, keys)
	if err != nil {
		return nil, closeSM, fab.Wrap(err)
	}
	readback, err := newReadback(ctx, cfg, mkeys)
	if err != nil {
		return nil, closeSM, fab.Wrap(err)
	}
	// An apply waits for OpenSM's sweep (sweep_timeout) and, in a burst, for
	// the batch; the loop turns at least every poll and check interval
	// otherwise. Past three sweeps and two checks it is stuck.
	f.applierLoop = checker.Loop(fab.Label("applier"), 3*cfg.OpenSM.SweepTimeout+2*cfg.OpenSM.CheckInterval+time.Minute)
	f.metrics = m.Fabric(fab.Name)
	f.app = &applier.Applier{Store: st, SM: sm, Log: log, Observer: applierObserver{f.metrics, f.applierLoop},
		Cfg:      applierConfig(cfg, p, flavour, readback, auditConfig(ctx, cfg, st, sm, log), cfg.OpenSM.SubnetDump()),
		SecondSM: secondSMCheck(ctx, cfg, st, sm, mkeys, log)}
	if mkeys != nil {
		f.app.Cfg.KeysAhead = mkeys.Ahead
	}
	if f.app.Cfg.QoSPolicyFile != "" {
		f.app.Cfg.SetQoS = f.setQoS
	}
	if cfg.HA.HA {
		if f.leases, err = st.Leases(); err != nil {
			return nil, closeSM, fab.Wrap(err)
		}
		f.app.Lease = f.leases
	}
	return f, closeSM, nil
}

// holder is who this manager is, for operators (--status): host and pid.
func holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}

// onlyManagerStartsOpenSM says whether no OpenSM can start from the
// fabric's partitions file but one this manager starts (its term, after
// writing the recorded state): OpenSM is its child (driver process, killed
// with it) or in a container it starts (managed: in its PID namespace,
// auto-removed, never restarted by Docker). A docker driver's container is
// someone else's, which may start at a boot before the manager.
func onlyManagerStartsOpenSM(cfg config.FabricConfig) bool {
	return cfg.OpenSM.Driver == config.DriverProcess || cfg.OpenSM.Driver == config.DriverManaged
}

// writeRecordedState writes text, the checked rendering of the recorded
// state, as the partitions file, synced before its rename, at the manager's
// start where only the manager starts OpenSM: an apply there syncs the file
// during its sweep (applier.Config.OnlyManagerStartsOpenSM), and a crash
// (power loss) in that window may leave the file empty or partial, which
// OpenSM would read as every port a full member of the default partition. A
// term writes the recorded state before it starts OpenSM, but not one that
// fails the check then (a change recorded since this start): it leaves the
// file, which this write makes whole after any crash. No OpenSM runs yet:
// none outlives its manager (see onlyManagerStartsOpenSM).
func writeRecordedState(cfg config.FabricConfig, text []byte) error {
	if !onlyManagerStartsOpenSM(cfg) {
		return nil
	}
	path := filepath.Join(cfg.OpenSM.ConfigDir, "partitions.conf")
	if err := opensm.WriteFileAtomic(path, text, 0o644); err != nil {
		return fmt.Errorf("write the recorded state's partitions file at the start: %w", err)
	}
	return opensm.RemoveLeftTemps(path)
}

// applierConfig is the applier's Config of the fabric cfg configures.
func applierConfig(cfg config.FabricConfig, p fabricPlan, flavour fabric.Flavour, readback *pkeyread.Reader,
	audit applier.AuditConfig, subnetDump string) applier.Config {
	return applier.Config{
		PartitionsFile:   filepath.Join(cfg.OpenSM.ConfigDir, "partitions.conf"),
		QoSPolicyFile:    qosPolicyFile(cfg),
		LogFile:          cfg.OpenSM.LogFile,
		DefaultPartition: cfg.OpenSM.DefaultPartition,
		FlatPKey:         cfg.OpenSM.FlatPKey,
		Template:         p.tpl,
		Rules:            CheckRules(cfg, flavour),
		SweepTimeout:     cfg.OpenSM.SweepTimeout,
		CheckInterval:    cfg.OpenSM.CheckInterval,
		PollInterval:     cfg.Database.PollInterval,
		BatchWindow:      time.Second,
		JobRetention:     cfg.Database.JobRetention,
		SubnetDump:       subnetDump,
		Dump:             p.dump,
		PortLimit:        p.limit,
		Readback:         readback,
		VerifyTimeout:    cfg.OpenSM.VerifyTimeout,
		Audit:            audit,

		OnlyManagerStartsOpenSM: onlyManagerStartsOpenSM(cfg),
	}
}

// anyQoSSet says whether a client set the QoS of some Kubernetes pkey of
// st's fabric: then OpenSM runs with qos on (partitions.RenderQoSPolicy).
func anyQoSSet(ctx context.Context, st *store.Store) (bool, error) {
	pkeys, err := st.KubernetesPKeys(ctx)
	if err != nil {
		return false, fmt.Errorf("read the Kubernetes pkeys' QoS: %w", err)
	}
	for _, p := range pkeys {
		if p.QoS != (fabric.QoS{}) {
			return true, nil
		}
	}
	return false, nil
}

// setQoS turns OpenSM's qos on or off: opensm.conf written again, which
// OpenSM reads at the heavy sweep the applier's SIGHUP starts.
func (f *Fabric) setQoS(ctx context.Context, on bool) error {
	f.qos.Store(on)
	return f.writeOpenSMConf(ctx)
}

// Name is the fabric's name ("default" for [opensm]).
func (f *Fabric) Name() string { return f.name }

// Store is the fabric's view of the database.
func (f *Fabric) Store() *store.Store { return f.st }

// Supervisor is the supervisor of the fabric's OpenSM.
func (f *Fabric) Supervisor() *opensm.Supervisor { return f.sm }

// ApplierConfig is what the fabric's applier applies with.
func (f *Fabric) ApplierConfig() applier.Config { return f.app.Cfg }

// Start campaigns for the fabric's lock (or lease) until ctx ends or Stop,
// running its services while elected.
func (f *Fabric) Start(ctx context.Context) error {
	return f.campaign().Start(ctx)
}

// Stop ends the campaign and returns once it has ended: the term under way,
// if any, ended and its services stopped. OpenSM is not stopped
// (StopOpenSM): the manager stops every fabric's at once.
func (f *Fabric) Stop() {
	f.campaign().Stop()
}

// campaign is the routine of the fabric's election.
func (f *Fabric) campaign() *routine {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.election == nil {
		f.election = newRoutine("election of fabric "+f.name, f.elect)
	}
	return f.election
}

// elect campaigns for the fabric's lock (or lease) until ctx ends, running
// a term while elected. A term that fails (its OpenSM does not start, its
// database reads fail) ends in the elector, which campaigns again: it never
// reaches another fabric.
func (f *Fabric) elect(ctx context.Context) error {
	if f.cfg.HA.HA {
		// Several managers: the lease elects (docs/ha.md), and OpenSM runs
		// only while this manager holds it.
		e := &leader.LeaseElector{Leases: f.leases, TryLock: f.st.TryLock, Holder: f.holder, Log: f.log,
			LeaseTimeout: f.cfg.HA.LeaseTimeout, Stop: f.sm.StopTerm}
		return e.Run(ctx, f.runTerm)
	}
	e := &leader.Elector{Store: f.st, Holder: f.holder, Log: f.log,
		RetryInterval: 2 * time.Second, CheckInterval: leader.ManagerCheckInterval}
	return e.Run(ctx, func(ctx context.Context, term int64) error {
		return f.runTerm(ctx, leader.Term{ID: term})
	})
}

// runTerm runs the fabric's services for one term, telling the metrics and
// liveness that this manager applies the fabric meanwhile; it returns once
// the term ended and every service stopped.
func (f *Fabric) runTerm(ctx context.Context, term leader.Term) error {
	// The keys are the database's at every term, not at this process's
	// start: a manager that started before a --rotate-keys and leads after
	// it runs OpenSM with the rotated keys, not with the ones the ports no
	// longer carry (docs/key-rotation.md).
	if err := f.writeOpenSMConf(ctx); err != nil {
		return err
	}
	f.metrics.Leading(term.ID)
	f.applierLoop.Active(true)
	defer func() {
		f.applierLoop.Active(false)
		f.metrics.Leading(0)
	}()
	return runServices(ctx, f.services(term))
}

// termServices are a term's services: the applier's term, which applies
// the recorded state and runs the term's watchers (freeze, second SM,
// audit, retention) inside it.
func (f *Fabric) termServices(term leader.Term) []Service {
	return []Service{newRoutine("applier term", func(ctx context.Context) error {
		return f.app.LeadTerm(ctx, term.ID, term.Taken.Suspect)
	})}
}

// StopOpenSM stops the fabric's OpenSM and waits for it, for a little
// longer than its SIGKILL deadline.
func (f *Fabric) StopOpenSM(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := f.sm.Stop(ctx); err != nil {
		f.log.Error("stop OpenSM", "error", err)
	}
}

// stopOpenSMs stops every fabric's OpenSM at once: one slow to stop does not
// keep the others running.
func stopOpenSMs(ctx context.Context, fabrics []*Fabric) {
	var wg sync.WaitGroup
	for _, f := range fabrics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.StopOpenSM(ctx)
		}()
	}
	wg.Wait()
}

// stopFabrics stops every fabric's campaign at once; the channel is closed
// once all have stopped.
func stopFabrics(fabrics []*Fabric) <-chan struct{} {
	var wg sync.WaitGroup
	for _, f := range fabrics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Stop()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// fabricLogger is log with the fabric's name when the manager serves
// several; with one fabric its lines stay as they always were.
func fabricLogger(log *slog.Logger, cfg *config.Config, name string) *slog.Logger {
	if len(cfg.Fabrics) == 1 {
		return log
	}
	return log.With("fabric", name)
}
