package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
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

// fabricRules are the rules each fabric's requests are recorded by, the
// default fabric first, without the template's static partitions and without
// a port limit: enough for the commands that record nothing. The manager's
// start adds those (planFabric).
func fabricRules(cfg *config.Config) []store.FabricRules {
	all := cfg.AllFabrics()
	out := make([]store.FabricRules, 0, len(all))
	for _, f := range all {
		out = append(out, store.FabricRules{Name: f.Name, Rules: store.Rules{PhysicalNetworks: f.PhysicalNetworks,
			FlatPKey: f.OpenSM.FlatPKey, KubernetesRange: f.UFMPKeys.PKeyRange,
			KubernetesMaxMembersPerPKey: f.UFMPKeys.MaxMembersPerPKey, KubernetesMaxMembers: f.UFMPKeys.MaxMembers}})
	}
	return out
}

// fabricConfig is the configuration as a manager of fabric f alone would
// read it: f's [opensm], [opensm_conf], [ufm_pkeys] and physical networks at
// the top, no further fabric, the rest shared. The helpers that wire one
// OpenSM (prepareOpenSM, fabricReader, auditConfig, secondSMCheck,
// checkRecordedState) take it, so that one code path wires every fabric. The
// default fabric's is cfg itself.
func fabricConfig(cfg *config.Config, f config.Fabric) *config.Config {
	if f.Name == config.DefaultFabric {
		return cfg
	}
	c := *cfg
	c.OpenSM, c.OpenSMConf, c.UFMPKeys, c.Fabrics = f.OpenSM, f.OpenSMConf, f.UFMPKeys, nil
	c.API.PhysicalNetworks = f.PhysicalNetworks
	return &c
}

// fabricErr names the fabric a wiring error is about. The helpers speak of
// [opensm] (fabricConfig); for a further fabric the section is named first.
func fabricErr(f config.Fabric, err error) error {
	if err == nil || f.Name == config.DefaultFabric {
		return err
	}
	return fmt.Errorf("%s: %w", f.Section(), err)
}

// cacheDirOf is the OSM_CACHE_DIR the supervisor gives f's OpenSM. The
// default fabric keeps OpenSM's own (or its env_file's): an existing
// fabric's OpenSM keeps the LIDs (guid2lid) and M_Keys (guid2mkey) it
// cached, whether or not fabrics are added beside it. A further fabric's is
// under its config_dir, so that no two share one (startcheck.go refuses an
// env_file that makes two equal).
func cacheDirOf(f config.Fabric) string {
	if f.Name == config.DefaultFabric {
		return ""
	}
	return filepath.Join(f.OpenSM.ConfigDir, "cache")
}

// fabricPlan is what a fabric needs before the database is open: its
// template, its static partitions and its subnet dump's readers, which its
// store rules refuse requests by.
type fabricPlan struct {
	fab   config.Fabric
	cfg   *config.Config // fabricConfig
	tpl   *partitions.Template
	dump  *topology.Dump
	limit *topology.PortLimit
	rules store.Rules
}

// planFabric loads f's template and builds its rules: its static
// partitions, and the port limit of its own subnet dump.
func planFabric(ctx context.Context, cfg *config.Config, f config.Fabric, rules store.Rules) (fabricPlan, error) {
	p := fabricPlan{fab: f, cfg: fabricConfig(cfg, f), rules: rules}
	var err error
	if p.tpl, err = loadTemplate(p.cfg); err != nil {
		return p, fabricErr(f, err)
	}
	// Refused when sent: a network whose VLAN ID is a static partition's pkey,
	// and a port whose host port would fill its switch port's pkey table.
	o := p.cfg.OpenSM
	static, err := p.tpl.Static(ctx, o.DefaultPartition, o.FlatPKey)
	if err != nil {
		return p, fabricErr(f, fmt.Errorf("[opensm] partitions_template: %w", err))
	}
	// One reader of the subnet dump for the API's capacity check, the gates
	// and the metrics: it parses the file only when OpenSM wrote another
	// content.
	p.dump = topology.NewDump(subnetDump(p.cfg))
	p.limit = &topology.PortLimit{DumpFile: subnetDump(p.cfg), Dump: p.dump, Capacity: o.SwitchPKeyCapacity, Static: static.PKeysOf}
	p.rules.StaticPKey = static.Name
	p.rules.StaticMember = static.Listing
	limit := p.limit
	p.rules.PortLimit = func() (store.PortCheck, error) { return limit.Checker() }
	return p, nil
}

// fabricRun is one fabric's running parts.
type fabricRun struct {
	name string
	cfg  *config.Config // fabricConfig
	log  *slog.Logger   // with a "fabric" attribute when there are several
	st   *store.Store   // the fabric's view
	sm   *opensm.Supervisor
	// writeOpenSMConf writes opensm.conf with the keys the database holds.
	writeOpenSMConf func(context.Context) error
	app             *applier.Applier
	applierLoop     *health.Loop
	leases          store.LeaseTables // with [ha] ha = true only
	metrics         *metrics.Fabric   // the fabric's series in the shared registry
}

// wireFabric prepares p's OpenSM, applier and readers on its store view st,
// refusing to start on a setting or a recorded state its configuration makes
// wrong. closeSM releases its OpenSM driver (also on error, once set).
func wireFabric(ctx context.Context, p fabricPlan, st *store.Store, m *metrics.Metrics, checker *health.Checker,
	log *slog.Logger) (fr *fabricRun, closeSM func(), err error) {
	f, cfg := p.fab, p.cfg
	fr = &fabricRun{name: f.Name, cfg: cfg, log: log, st: st}
	closeSM = func() {}
	sm, flavour, closeDriver, writeConf, err := prepareOpenSM(ctx, cfg, log, databaseKeys{st}, cacheDirOf(f))
	if err != nil {
		return nil, closeSM, fabricErr(f, err)
	}
	fr.sm, fr.writeOpenSMConf, closeSM = sm, writeConf, closeDriver
	// A configuration changed under the recorded networks (flat_pkey now a
	// network's VLAN, a static partition on its pkey) would fail every later
	// job: refuse to start, naming them, as for an unknown key.
	if _, err := checkRecordedState(ctx, cfg, st, p.tpl, flavour); err != nil {
		return nil, closeSM, fabricErr(f, err)
	}
	readback, err := newReadback(ctx, cfg, databaseKeys{st})
	if err != nil {
		return nil, closeSM, fabricErr(f, err)
	}
	// An apply waits for OpenSM's sweep (sweep_timeout) and, in a burst, for
	// the batch; the loop turns at least every poll and check interval
	// otherwise. Past three sweeps and two checks it is stuck.
	loopName := "applier"
	if f.Name != config.DefaultFabric {
		loopName = "applier of fabric " + f.Name
	}
	fr.applierLoop = checker.Loop(loopName, 3*cfg.OpenSM.SweepTimeout+2*cfg.OpenSM.CheckInterval+time.Minute)
	fr.metrics = m.Fabric(f.Name)
	fr.app = &applier.Applier{Store: st, SM: sm, Log: log, Observer: applierObserver{fr.metrics, fr.applierLoop},
		Cfg:      applierConfig(cfg, p, flavour, readback, auditConfig(ctx, cfg, st, sm, log)),
		SecondSM: secondSMCheck(ctx, cfg, st, sm, log)}
	if cfg.HA.HA {
		if fr.leases, err = st.Leases(); err != nil {
			return nil, closeSM, fabricErr(f, err)
		}
		fr.app.Lease = fr.leases
	}
	return fr, closeSM, nil
}

// applierConfig is the applier's Config of the fabric cfg configures.
func applierConfig(cfg *config.Config, p fabricPlan, flavour fabric.Flavour, readback *pkeyread.Reader,
	audit applier.AuditConfig) applier.Config {
	return applier.Config{
		PartitionsFile:   filepath.Join(cfg.OpenSM.ConfigDir, "partitions.conf"),
		LogFile:          cfg.OpenSM.LogFile,
		DefaultPartition: cfg.OpenSM.DefaultPartition,
		FlatPKey:         cfg.OpenSM.FlatPKey,
		Template:         p.tpl,
		Rules:            checkRules(cfg, flavour),
		SweepTimeout:     cfg.OpenSM.SweepTimeout,
		CheckInterval:    cfg.OpenSM.CheckInterval,
		PollInterval:     cfg.Database.PollInterval,
		BatchWindow:      time.Second,
		JobRetention:     cfg.Database.JobRetention,
		SubnetDump:       subnetDump(cfg),
		Dump:             p.dump,
		PortLimit:        p.limit,
		Readback:         readback,
		VerifyTimeout:    cfg.OpenSM.VerifyTimeout,
		Audit:            audit,
	}
}

// elect campaigns for the fabric's lock (or lease) until ctx ends, applying
// while elected. A term that fails (its OpenSM does not start, its database
// reads fail) ends in the elector, which campaigns again: it never reaches
// another fabric.
func (fr *fabricRun) elect(ctx context.Context, holder string, ha config.HA) {
	if ha.HA {
		// Several managers: the lease elects (docs/ha.md), and OpenSM runs
		// only while this manager holds it.
		e := &leader.LeaseElector{Leases: fr.leases, TryLock: fr.st.TryLock, Holder: holder, Log: fr.log,
			LeaseTimeout: ha.LeaseTimeout, Stop: fr.sm.StopTerm}
		_ = e.Run(ctx, func(ctx context.Context, term leader.Term) error {
			return fr.leading(ctx, term.ID, func(ctx context.Context) error {
				return fr.app.LeadTerm(ctx, term.ID, term.Taken.Suspect)
			})
		})
		return
	}
	e := &leader.Elector{Store: fr.st, Holder: holder, Log: fr.log,
		RetryInterval: 2 * time.Second, CheckInterval: electorCheckInterval}
	_ = e.Run(ctx, func(ctx context.Context, term int64) error {
		return fr.leading(ctx, term, func(ctx context.Context) error { return fr.app.Lead(ctx, term) })
	})
}

// leading runs lead, telling the metrics and liveness that this manager
// applies the fabric meanwhile.
func (fr *fabricRun) leading(ctx context.Context, term int64, lead func(context.Context) error) error {
	// The keys are the database's at every term, not at this process's
	// start: a manager that started before a --rotate-keys and leads after
	// it runs OpenSM with the rotated keys, not with the ones the ports no
	// longer carry (docs/key-rotation.md).
	if err := fr.writeOpenSMConf(ctx); err != nil {
		return err
	}
	fr.metrics.Leading(term)
	fr.applierLoop.Active(true)
	defer func() {
		fr.applierLoop.Active(false)
		fr.metrics.Leading(0)
	}()
	return lead(ctx)
}

// electAll runs every fabric's election in its own goroutine; the channel
// is closed once all have stopped.
func electAll(ctx context.Context, fabrics []*fabricRun, ha config.HA) <-chan struct{} {
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s pid %d", host, os.Getpid())
	var wg sync.WaitGroup
	for _, fr := range fabrics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fr.elect(ctx, holder, ha)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// stopAll stops every fabric's OpenSM at once: one slow to stop does not
// keep the others running.
func stopAll(ctx context.Context, fabrics []*fabricRun) {
	var wg sync.WaitGroup
	for _, fr := range fabrics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopOpenSM(ctx, fr.sm, fr.log)
		}()
	}
	wg.Wait()
}

// fabricLogger is log with the fabric's name when the manager serves
// several; with one fabric its lines stay as they always were.
func fabricLogger(log *slog.Logger, cfg *config.Config, name string) *slog.Logger {
	if len(cfg.Fabrics) == 0 {
		return log
	}
	return log.With("fabric", name)
}
