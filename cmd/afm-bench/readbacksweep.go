package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// readCostFabrics are BenchmarkReadCost's fabrics by the name of their
// sub-benchmark (internal/pkeyread's sizeName, which names no count of
// switches up to 16): hosts and switches.
var readCostFabrics = map[string][2]int{"hosts=4": {4, 1}, "hosts=1500": {1500, 16}, "hosts=1500,switches=40": {1500, 40}}

// readCostFabric is the fabric of a BenchmarkReadCost row's name
// ("hosts=1500/bootstorm=1000/workers=4").
func readCostFabric(row string) (string, [2]int, error) {
	name, _, _ := strings.Cut(row, "/")
	size, ok := readCostFabrics[name]
	if !ok {
		return name, size, fmt.Errorf("BenchmarkReadCost row %q: no known fabric %q", row, name)
	}
	return name, size, nil
}

// readCostOpenSM is the benchmark's OpenSM: its configuration and its
// partitions (internal/pkeyread's sweptFabricSM and testPartitions). Its
// sweeps are timed with the manager's per-module logging added, as the
// manager's OpenSM logs them: bareSweep reads the boxes that log_flags 0x03
// leaves out.
const (
	readCostConf       = "log_flags 0x03\nforce_log_flush TRUE\nsweep_interval 0\nper_module_logging_file %s\n"
	readCostPartitions = "Default=0x7fff,ipoib : ALL=limited, SELF=full ;\nnet1=0x0064 : %s=full, %s ;\n"
)

// readCostSweeps times, for each fabric of rows, n bare sweeps of it
// (SIGHUP → SUBNET UP by OpenSM's time stamp): what a read of that fabric is
// held against. Each fabric is started alone, after the benchmark, as the
// benchmark starts it.
func readCostSweeps(ctx context.Context, dir string, rows []readCost, n int) (map[string]latencies, error) {
	sweeps := map[string]latencies{}
	for _, c := range rows {
		name, size, err := readCostFabric(c.name)
		if err != nil {
			return nil, err
		}
		if _, done := sweeps[name]; done {
			continue
		}
		fdir := filepath.Join(dir, "sweep-"+strings.NewReplacer("=", "", ",", "-").Replace(name))
		if sweeps[name], err = fabricSweeps(ctx, fdir, size[0], size[1], n); err != nil {
			return nil, fmt.Errorf("bare sweeps of %s: %w", name, err)
		}
	}
	return sweeps, nil
}

// fabricSweeps starts a fabric of hosts on switches and the benchmark's
// OpenSM on it, waits for its first SUBNET UP, and times n bare sweeps
// after one more.
func fabricSweeps(ctx context.Context, dir string, hosts, switches, n int) (latencies, error) {
	binary, err := fabricsim.LookPath("opensm")
	if err != nil {
		return nil, err
	}
	f, err := fabricsim.Start(ctx, dir, fabricsim.Options{Hosts: hosts, Switches: switches})
	if err != nil {
		return nil, err
	}
	defer f.Stop()
	conf, partitions, logFile := filepath.Join(dir, "opensm.conf"), filepath.Join(dir, "partitions.conf"), filepath.Join(dir, "opensm.log")
	modules := filepath.Join(dir, "per-module-logging.conf")
	if err := os.WriteFile(modules, opensm.PerModuleLoggingConf(), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(conf, fmt.Appendf(nil, readCostConf, modules), 0o644); err != nil {
		return nil, err
	}
	text := fmt.Sprintf(readCostPartitions, fabricsim.HostGUID(1), fabricsim.HostGUID(2))
	if err := os.WriteFile(partitions, []byte(text), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "-F", conf, "-g", f.SMGUID.String(), "-P", partitions, "-f", logFile, "-d", "2",
		"--dump_files_dir", dir)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), f.Env()...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start OpenSM: %w", err)
	}
	defer func() { // before the fabric stops (defers run last first)
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if err := firstSubnetUp(ctx, logFile); err != nil {
		return nil, err
	}
	// The first is not counted: OpenSM may sweep again by itself right after
	// its first SUBNET UP, and a sweep it began before the SIGHUP would
	// be timed short.
	var l latencies
	for range n + 1 {
		d, err := bareSweep(ctx, logFile, cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		l = append(l, d)
	}
	return l[1:], nil
}

// firstSubnetUp waits for OpenSM's first SUBNET UP: before it, a SIGHUP
// could kill OpenSM, and the first sweep is no bare one.
func firstSubnetUp(ctx context.Context, logFile string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	follower := opensm.FollowLog(logFile, opensm.Position{})
	defer follower.Close()
	for {
		e, err := follower.Next(ctx)
		if err != nil {
			return fmt.Errorf("wait for OpenSM's first SUBNET UP: %w", err)
		}
		if e.Message == "SUBNET UP" {
			return nil
		}
	}
}
