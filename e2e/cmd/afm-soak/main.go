// Command afm-soak runs the randomized, model-checked soak of the manager
// against a real OpenSM on a simulated fabric, with faults (package
// e2e/soak explains the checks). Run it from the repository's root, as root
// (it starts PostgreSQL and MariaDB servers of its own with
// scripts/test-env.sh):
//
//	go run ./e2e/cmd/afm-soak --ops 500 --engines sqlite --seed 42
//	go run ./e2e/cmd/afm-soak --duration 1h --faults all
//
// It prints the operations, faults, checks and violations per engine, and
// ends with one line per engine:
//
//	soak <engine>: N operations, F faults, C checks, V violations, seed S
//
// It exits 1 when any engine had a violation, 2 when the soak could not run.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/soak"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	o, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "afm-soak:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := os.MkdirTemp(workBase(o.WorkDir), "afm-soak.")
	if err != nil {
		fmt.Fprintln(os.Stderr, "afm-soak:", err)
		return 2
	}
	// The database servers run as their own users, who must reach their directories.
	if err := os.Chmod(work, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "afm-soak:", err)
		return 2
	}
	o.WorkDir = work
	o.Binary = filepath.Join(work, "alternative-fabric-manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", o.Binary, "./cmd/alternative-fabric-manager")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "afm-soak: build the manager:", err)
		return 2
	}
	results, err := soak.Run(ctx, o)
	violations := 0
	fmt.Println()
	for _, r := range results {
		fmt.Println(r)
		violations += r.Violations
	}
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "afm-soak:", err)
		fmt.Fprintln(os.Stderr, "afm-soak: work directory kept:", work)
		return 2
	case violations > 0:
		fmt.Fprintln(os.Stderr, "afm-soak: work directory kept:", work)
		return 1
	}
	os.RemoveAll(work)
	return 0
}

// shmDir is a memory file system on most Linux systems. Every client of the
// simulated fabric (each smpquery the checker runs, each OpenSM) builds a
// fake sysfs tree in its working directory at start, tens of files and
// directories that it removes at exit: on a disk's journaled file system
// that costs most of a table read. A memory file system keeps everything the
// soak checks (files, databases and processes outlive a kill -9 the same
// way); it only loses the run's directory at a reboot.
const shmDir = "/dev/shm"

// workBase is the directory the run's own directory is made in: the
// --work-dir flag, else shmDir when writable, else /tmp (not $TMPDIR: the
// database servers run as their own users, who must reach the directory).
func workBase(flagged string) string {
	if flagged != "" {
		return flagged
	}
	if fi, err := os.Stat(shmDir); err == nil && fi.IsDir() && syscall.Access(shmDir, 2 /* W_OK */) == nil {
		return shmDir
	}
	return "/tmp"
}

func parseFlags(args []string) (soak.Options, error) {
	fs := flag.NewFlagSet("afm-soak", flag.ContinueOnError)
	o := soak.Options{Out: os.Stdout}
	engines := fs.String("engines", "sqlite,postgres,mysql", "engines to soak, comma-separated, one after the other (or at once: --parallel): sqlite, postgres, mysql, galera")
	fs.IntVar(&o.Ops, "ops", 500, "operations (requests) per engine")
	fs.DurationVar(&o.Duration, "duration", 0, "stop each engine's run after this long, even before --ops (0: no limit)")
	seed := fs.String("seed", "random", "the seed of the operations and faults (a number, or random: drawn and printed)")
	faults := fs.String("faults", strings.Join(soak.CIFaults, ","),
		"fault kinds, comma-separated; all: "+strings.Join(soak.Faults, ",")+"; none: no faults")
	first := fs.String("faults-first", "", "fault kinds, comma-separated, out of --faults, dealt before the others on every engine (so that a short run meets each), beside the hostile tenant's, which always are")
	fs.IntVar(&o.FaultRate, "fault-rate", soak.DefaultFaultRate, "percentage of rounds with a fault (the kinds are dealt in turn, each once per deck)")
	fs.IntVar(&o.Hosts, "hosts", 16, "hosts of the simulated fabric")
	fs.IntVar(&o.Switches, "switches", 2, "switches of the simulated fabric")
	fs.IntVar(&o.Managers, "managers", 1, "managers sharing the database on PostgreSQL and MariaDB (kill-leader needs 2 or more; with it the default is 3); Galera runs at least 3, one per node")
	fs.BoolVar(&o.CollidingIDs, "colliding-ids", true, "draw two network IDs that share their first 27 characters (--colliding-ids=false: none)")
	fs.BoolVar(&o.Kubernetes, "kubernetes", true, "run ib-kubernetes as a second client at once, through the pkeys API, on the last 2 hosts (--kubernetes=false: none)")
	fs.BoolVar(&o.Parallel, "parallel", false, "run the engines at once (each on its own fabric, database server and managers), not one after the other")
	fs.IntVar(&o.Fabrics, "fabrics", 1, "simulated fabrics one manager runs: 1, or 2 (the second its [fabric:storage], physnet storage; one manager, no galera)")
	fs.BoolVar(&o.Verbose, "verbose", false, "print every operation, answer and check")
	fs.StringVar(&o.WorkDir, "work-dir", "", "where the run's directory is made (default: "+shmDir+" when it is a writable directory, else /tmp); the database servers' users must reach it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.Engines, err = parseEngines(*engines); err != nil {
		return o, err
	}
	if o.Seed, err = parseSeed(*seed); err != nil {
		return o, err
	}
	if o.Faults, o.FirstFaults, err = parseFaults(*faults, *first); err != nil {
		return o, err
	}
	managersSet := false
	fs.Visit(func(f *flag.Flag) { managersSet = managersSet || f.Name == "managers" })
	if slices.Contains(o.Faults, "kill-leader") && !managersSet {
		o.Managers = 3
	}
	return o, checkSizes(o)
}

// parseEngines reads --engines: engine names, comma-separated, at least one.
func parseEngines(s string) ([]string, error) {
	var engines []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			if !slices.Contains([]string{"sqlite", "postgres", "mysql", "galera"}, e) {
				return nil, fmt.Errorf("--engines: unknown engine %q: want sqlite, postgres, mysql or galera", e)
			}
			engines = append(engines, e)
		}
	}
	if len(engines) == 0 {
		return nil, fmt.Errorf("--engines: none given")
	}
	return engines, nil
}

// parseSeed reads --seed: a number, or random (one drawn here).
func parseSeed(s string) (uint64, error) {
	if s == "random" {
		var b [8]byte
		rand.Read(b[:])
		return binary.LittleEndian.Uint64(b[:]) % 1_000_000_000, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("--seed %q: want a number or random", s)
	}
	return v, nil
}

// parseFaults reads --faults (names, all or none) and --faults-first (names
// out of --faults).
func parseFaults(kinds, first string) (faults, firstFaults []string, err error) {
	switch kinds {
	case "all":
		faults = soak.Faults
	case "none", "":
	default:
		for _, f := range strings.Split(kinds, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(soak.Faults, f) {
				return nil, nil, fmt.Errorf("--faults: unknown fault %q: want some of %s", f, strings.Join(soak.Faults, ","))
			}
			faults = append(faults, f)
		}
	}
	for _, f := range strings.Split(first, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(faults, f) {
			return nil, nil, fmt.Errorf("--faults-first: %q is not one of --faults (%s)", f, strings.Join(faults, ","))
		}
		firstFaults = append(firstFaults, f)
	}
	return faults, firstFaults, nil
}

// checkSizes refuses the sizes and the combinations a run cannot have.
func checkSizes(o soak.Options) error {
	switch {
	case o.Ops < 1:
		return fmt.Errorf("--ops %d: want at least 1", o.Ops)
	case o.Hosts < 2 || o.Hosts > 64:
		return fmt.Errorf("--hosts %d: want 2 to 64", o.Hosts)
	case o.Switches < 1 || o.Switches > 8:
		return fmt.Errorf("--switches %d: want 1 to 8", o.Switches)
	case o.FaultRate < 0 || o.FaultRate > 100:
		return fmt.Errorf("--fault-rate %d: want 0 to 100", o.FaultRate)
	case o.Managers < 1 || o.Managers > 5:
		return fmt.Errorf("--managers %d: want 1 to 5", o.Managers)
	case o.Fabrics < 1 || o.Fabrics > 2:
		return fmt.Errorf("--fabrics %d: want 1 or 2", o.Fabrics)
	case o.Fabrics > 1 && (o.Managers > 1 || slices.Contains(o.Engines, "galera")):
		return fmt.Errorf("--fabrics %d: runs one manager, on sqlite, postgres or mysql (not --managers %d, not galera)", o.Fabrics, o.Managers)
	}
	return nil
}
