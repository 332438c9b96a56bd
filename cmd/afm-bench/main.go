// Command afm-bench measures the manager against its performance targets and
// prints a Markdown table of the figures (docs/performance.md explains them).
//
// For each engine it creates a fresh database (SQLite in a temporary directory;
// PostgreSQL and MariaDB on the servers named by AFM_TEST_POSTGRES_URL and
// AFM_TEST_MYSQL_URL, as for the tests), starts a simulated fabric and the
// manager built from this tree, and measures in turn: a change's overhead
// over OpenSM's own sweep, idle CPU, a burst of port creations, API throughput
// beside the database's own insert rate, and a job-poll storm. Then it runs
// BenchmarkRenderCheck and BenchmarkReadCost (reading P_Key tables back on
// the simulated fabric). Run it from the repository root:
//
//	go run ./cmd/afm-bench --out docs/performance-table.md
//	go run ./cmd/afm-bench --smoke   # every measurement, tiny sizes: checks that the suite works
//
// It fails only when a measurement cannot be made, never on a figure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
)

type options struct {
	engines     []string
	samples     int
	ports       int
	clients     int
	apiDuration time.Duration
	idle        time.Duration
	stormJobs   int
	syncTimeout time.Duration
	benchtime   string
	out         string
	keep        bool
	// The HA failover: [ha] lease_timeout and the kill -9 rounds.
	leaseTimeout   time.Duration
	failoverRounds int
	// The large fabric (fabric.go): hosts and switches.
	fabricHosts    int
	fabricSwitches []int // one large fabric a count, the same hosts
	// pollRunning: how often (1)'s client polls its job.
	pollRunning time.Duration
	// only: the measurements to run (see measurements); all when empty.
	only map[string]bool
	// smoke: every measurement at tiny sizes (the read-back on 4 hosts only).
	smoke bool
}

// measurements are the names --only takes, in the order they run.
var measurements = []string{"overhead", "idle", "batch", "api", "storm", "failover", "fabric", "audit", "fabrics", "render",
	"readback"}

// runs says whether measurement name is to run.
func (o options) runs(name string) bool { return len(o.only) == 0 || o.only[name] }

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("afm-bench", flag.ContinueOnError)
	var o options
	engines := fs.String("engines", "sqlite,postgres,mysql", "engines to measure, comma-separated")
	fs.IntVar(&o.samples, "samples", 20, "changes (and bare sweeps) timed one at a time for the overhead")
	fs.IntVar(&o.ports, "ports", 1000, "port POSTs in the burst")
	fs.IntVar(&o.clients, "clients", 16, "concurrent clients for the burst, the API load and the poll storm")
	fs.DurationVar(&o.apiDuration, "api-duration", 10*time.Second, "how long each API load (and the insert-rate run) lasts")
	fs.DurationVar(&o.idle, "idle", 60*time.Second, "how long the idle manager's CPU is measured")
	fs.IntVar(&o.stormJobs, "storm-jobs", 10000, "jobs polled in the poll storm")
	fs.DurationVar(&o.syncTimeout, "sync-timeout", 10*time.Second, "networking-mlnx's sync_timeout: the storm's polls are spread over it")
	fs.StringVar(&o.benchtime, "benchtime", "5x", "-benchtime of BenchmarkRenderCheck and BenchmarkReadCost")
	fs.StringVar(&o.out, "out", "", "also write the table to this file")
	fs.DurationVar(&o.leaseTimeout, "lease-timeout", 10*time.Second, "[ha] lease_timeout of the failover's three managers")
	fs.IntVar(&o.failoverRounds, "failover-rounds", 3, "kill -9 rounds of the failover (PostgreSQL and MariaDB)")
	fs.IntVar(&o.fabricHosts, "fabric-hosts", 1500, "hosts of the large fabric (ibsim takes at most 2,048 nodes)")
	switches := fs.String("fabric-switches", "40,16", "switches of the large fabric, one measurement a count, comma-separated")
	fs.DurationVar(&o.pollRunning, "poll-running", pollRunning,
		"how often (1)'s client polls its job (5ms: the instrument before 2026-12-01)")
	only := fs.String("only", "", "run only these measurements, comma-separated: "+strings.Join(measurements, ", "))
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (logs, OpenSM's log) instead of removing it")
	fs.BoolVar(&o.smoke, "smoke", false, "every measurement with tiny sizes, a few seconds per engine (overrides the size flags)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for e := range strings.SplitSeq(*engines, ",") {
		if e = strings.TrimSpace(e); e != "" {
			o.engines = append(o.engines, e)
		}
	}
	if o.smoke {
		o.shrink(fs)
		*switches = "2"
	}
	var err error
	if o.fabricSwitches, err = parseSwitches(*switches); err != nil {
		return o, err
	}
	if o.only, err = parseOnly(*only); err != nil {
		return o, err
	}
	return o, o.check()
}

// shrink sets the sizes of --smoke (but --fabric-switches, the caller's).
// The failover's own flags, when given on fs, are kept: its figure is the
// same at any size of the rest.
func (o *options) shrink(fs *flag.FlagSet) {
	o.samples, o.ports, o.apiDuration, o.idle = 2, 40, time.Second, 2*time.Second
	o.stormJobs, o.syncTimeout, o.benchtime = 200, time.Second, "1x"
	o.fabricHosts = 6
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["lease-timeout"] {
		o.leaseTimeout = 2 * time.Second
	}
	if !set["failover-rounds"] {
		o.failoverRounds = 1
	}
}

// parseSwitches reads --fabric-switches: counts of switches, comma-separated.
func parseSwitches(s string) ([]int, error) {
	var counts []int
	for n := range strings.SplitSeq(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || k < 1 {
			return nil, fmt.Errorf("--fabric-switches: %q is no count of switches", n)
		}
		counts = append(counts, k)
	}
	return counts, nil
}

// parseOnly reads --only: names of measurements, comma-separated; nil (all
// of them) when it names none.
func parseOnly(s string) (map[string]bool, error) {
	var only map[string]bool
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		if !slices.Contains(measurements, m) {
			return nil, fmt.Errorf("--only: %q is none of %s", m, strings.Join(measurements, ", "))
		}
		if only == nil {
			only = map[string]bool{}
		}
		only[m] = true
	}
	return only, nil
}

// check refuses sizes no measurement can run with.
func (o options) check() error {
	switch {
	case len(o.engines) == 0:
		return errors.New("--engines: name at least one of sqlite, postgres, mysql")
	case o.samples < 1, o.ports < 1, o.clients < 1, o.stormJobs < 1:
		return errors.New("--samples, --ports, --clients and --storm-jobs must be at least 1")
	case o.apiDuration <= 0, o.idle <= 0, o.syncTimeout <= 0, o.pollRunning <= 0:
		return errors.New("--api-duration, --idle, --sync-timeout and --poll-running must be positive")
	case o.leaseTimeout < time.Second, o.failoverRounds < 1:
		return errors.New("--lease-timeout must be at least 1s and --failover-rounds at least 1")
	case o.fabricHosts <= o.samples:
		return errors.New("--fabric-hosts must be more than --samples")
	}
	return nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "afm-bench:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		fmt.Fprintln(os.Stderr, "afm-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	if _, err := os.Stat(filepath.Join("cmd", "alternative-fabric-manager")); err != nil {
		return errors.New("run from the repository root (it builds ./cmd/alternative-fabric-manager)")
	}
	m := describeMachine()
	work, err := os.MkdirTemp("", "afm-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		log.Info("work directory kept", "dir", work)
	} else {
		defer os.RemoveAll(work)
	}
	binary := filepath.Join(work, "alternative-fabric-manager")
	log.Info("building the manager")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", binary, "./cmd/alternative-fabric-manager").CombinedOutput(); err != nil {
		return fmt.Errorf("build the manager: %w: %s", err, out)
	}

	var results []engineResult
	for _, engine := range o.engines {
		dir := filepath.Join(work, engine)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		res, err := measureEngine(ctx, engine, binary, dir, o, log)
		if err != nil {
			return fmt.Errorf("%s: %w (logs in %s with --keep)", engine, err, dir)
		}
		results = append(results, res)
	}
	var render renderResult
	if o.runs("render") {
		log.Info("running BenchmarkRenderCheck", "benchtime", o.benchtime)
		if render, err = measureRender(ctx, work, o.benchtime); err != nil {
			return err
		}
	}
	var readBack string
	if o.runs("readback") {
		log.Info("running BenchmarkReadCost", "benchtime", o.benchtime)
		rows, err := measureReadBack(ctx, work, o.benchtime, o.smoke)
		if err != nil {
			return err
		}
		log.Info("bare sweeps of the read's fabrics", "sweeps", readBackSweeps)
		sweeps, err := readCostSweeps(ctx, work, rows, readBackSweeps)
		if err != nil {
			return err
		}
		readBack = readBackTable(rows, sweeps, o.benchtime)
	}
	m.loadEnd, m.took = loadAverage(), time.Since(m.started)

	text := table(results, render, o) + readBack + "\n" + m.String() + "\n"
	fmt.Print(text)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			return fmt.Errorf("write the table: %w", err)
		}
		log.Info("table written", "file", o.out)
	}
	return unmeasured(results)
}

// unmeasured is the error of the fabrics that could not be measured.
func unmeasured(results []engineResult) error {
	var errs []error
	for _, r := range results {
		for _, f := range r.fabric {
			if f.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.engine, f.err))
			}
		}
		if r.audit.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.engine, r.audit.err))
		}
	}
	return errors.Join(errs...)
}

// measureEngine runs every per-engine measurement on one rig, in an order that
// grows the state: the overhead and idle figures on a nearly empty database,
// the storm last, on the most jobs.
func measureEngine(ctx context.Context, engine, binary, dir string, o options, log *slog.Logger) (res engineResult, err error) {
	res.engine = engine
	log = log.With("engine", engine)
	small := []string{"overhead", "idle", "batch", "api", "storm"}
	if slices.ContainsFunc(small, o.runs) {
		if err := measureSmall(ctx, &res, binary, dir, o, log); err != nil {
			return res, err
		}
	}
	if o.runs("fabric") {
		if res.fabric, err = measureFabricsOf(ctx, engine, binary, dir, o, log); err != nil {
			return res, err
		}
	}
	if o.runs("audit") {
		measureAuditOf(ctx, &res, binary, dir, o, log)
	}
	if o.runs("fabrics") {
		log.Info("two fabrics: a change on fabric 2 during a burst on fabric 1", "ports", o.ports)
		fdir := filepath.Join(dir, "fabrics")
		if err := os.MkdirAll(fdir, 0o755); err != nil {
			return res, err
		}
		if res.fabrics, err = measureFabrics(ctx, engine, binary, fdir, o.ports, o.clients, log); err != nil {
			return res, fmt.Errorf("two fabrics: %w", err)
		}
	}
	if engine == "sqlite" || !o.runs("failover") {
		return res, nil // SQLite: one manager only, no HA
	}
	log.Info("HA failover: kill -9 of the leader of three", "lease_timeout", o.leaseTimeout, "rounds", o.failoverRounds)
	fdir := filepath.Join(dir, "failover")
	if err := os.MkdirAll(fdir, 0o755); err != nil {
		return res, err
	}
	if res.failover, err = measureFailover(ctx, engine, binary, fdir, o.leaseTimeout, o.failoverRounds, log); err != nil {
		return res, fmt.Errorf("failover: %w", err)
	}
	return res, nil
}

// measureAuditOf measures what the audit costs a change (auditdelay.go) on
// the large fabric's last count of switches. A measurement that cannot be
// made is reported in the table, and the run fails after it.
func measureAuditOf(ctx context.Context, res *engineResult, binary, dir string, o options, log *slog.Logger) {
	switches := o.fabricSwitches[len(o.fabricSwitches)-1]
	log.Info("the audit and a change", "hosts", o.fabricHosts, "switches", switches, "samples", o.samples)
	adir := filepath.Join(dir, "audit")
	err := os.MkdirAll(adir, 0o755)
	if err == nil {
		res.audit, err = measureAuditDelay(ctx, res.engine, binary, adir, o.fabricHosts, switches, o.samples, o.clients, log)
	}
	if err != nil {
		res.audit.err = fmt.Errorf("the audit and a change, %d hosts on %d switches: %w", o.fabricHosts, switches, err)
		log.Error("audit not measured", "error", res.audit.err)
	}
}

// measureSmall runs the measurements on the 4-host fabric, on one rig.
func measureSmall(ctx context.Context, res *engineResult, binary, dir string, o options, log *slog.Logger) (err error) {
	log.Info("starting database, simulated fabric and manager")
	r, err := startRig(ctx, res.engine, binary, dir, fabricsim.Options{Hosts: 4}, log)
	if err != nil {
		return err
	}
	defer r.stop(log)

	if o.runs("overhead") {
		log.Info("overhead over OpenSM", "samples", o.samples)
		if res.overhead, err = measureOverhead(ctx, r, o.samples, pollPlan{every: o.pollRunning}); err != nil {
			return fmt.Errorf("overhead: %w", err)
		}
	}
	if o.runs("idle") {
		log.Info("idle CPU", "for", o.idle)
		if res.idle, err = measureIdle(ctx, r, o.idle); err != nil {
			return fmt.Errorf("idle: %w", err)
		}
	}
	if o.runs("batch") {
		log.Info("batching", "ports", o.ports, "clients", o.clients)
		if res.batch, err = measureBatch(ctx, r, o.ports, o.clients); err != nil {
			return fmt.Errorf("batching: %w", err)
		}
	}
	if o.runs("api") {
		log.Info("API throughput", "clients", o.clients, "for", o.apiDuration)
		if res.api, err = measureAPI(ctx, r, o.clients, o.apiDuration); err != nil {
			return fmt.Errorf("API throughput: %w", err)
		}
	}
	if o.runs("storm") {
		log.Info("job-poll storm", "jobs", o.stormJobs, "window", o.syncTimeout)
		quiet := min(o.samples, 5)
		if res.storm, err = measureStorm(ctx, r, o.stormJobs, o.clients, o.syncTimeout, quiet); err != nil {
			return fmt.Errorf("poll storm: %w", err)
		}
	}
	return nil
}
