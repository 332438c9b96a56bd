package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// readCost is one row of BenchmarkReadCost (internal/pkeyread): one whole
// read of P_Key tables on the simulated fabric, each host port and the
// switch port facing it, with a real OpenSM's tables.
type readCost struct {
	name        string // "hosts=1500/bootstorm=1000/workers=4"
	nsPerRead   float64
	madsPerPort float64
	madsPerRead float64
	cpuPerPort  float64 // µs: the reader's process, not ibsim's
}

// ports is how many host ports the read covers.
func (c readCost) ports() float64 { return c.madsPerRead / max(c.madsPerPort, 1) }

// readBackSweeps is how many bare sweeps of each fabric of the read-back's
// are timed: the median of them is the boot storm's target, a 1,000-port
// storm read back within one sweep's time.
const readBackSweeps = 5

var readCostLine = regexp.MustCompile(`(?m)^BenchmarkReadCost/(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parseReadCost reads the benchmark's result lines.
func parseReadCost(out []byte) ([]readCost, error) {
	var rows []readCost
	for _, m := range readCostLine.FindAllSubmatch(out, -1) {
		metrics := benchMetrics(m[2])
		c := readCost{name: string(m[1]), nsPerRead: metrics["ns/op"], madsPerPort: metrics["MADs/port"],
			madsPerRead: metrics["MADs/read"], cpuPerPort: metrics["cpu-µs/port"]}
		if c.nsPerRead == 0 || c.madsPerRead == 0 {
			return nil, fmt.Errorf("BenchmarkReadCost: no ns/op or MADs/read in: %s", m[0])
		}
		rows = append(rows, c)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("BenchmarkReadCost: no result line in: %s", out)
	}
	return rows, nil
}

// measureReadBack runs BenchmarkReadCost in its package's test binary (it
// starts its own simulated fabrics and OpenSM); smoke runs only the 4-host
// fabric's rows.
func measureReadBack(ctx context.Context, dir, benchtime string, smoke bool) ([]readCost, error) {
	binary := filepath.Join(dir, "pkeyread.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", binary, "./internal/pkeyread")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the pkeyread benchmark: %w: %s", err, out)
	}
	pattern := "^BenchmarkReadCost$"
	if smoke {
		pattern += "/^hosts=4$/"
	}
	run := exec.CommandContext(ctx, binary, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", benchtime)
	run.Dir = filepath.Join("internal", "pkeyread")
	run.Stderr = os.Stderr
	out, err := run.Output()
	if err != nil {
		return nil, fmt.Errorf("BenchmarkReadCost: %w: %s", err, out)
	}
	return parseReadCost(out)
}

// readBackTable is the read-back benchmark's own table; sweeps are the bare
// sweeps of each row's fabric (readCostSweeps), a boot storm's target.
func readBackTable(rows []readCost, sweeps map[string]latencies, benchtime string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| **9. reading P_Key tables back** (BenchmarkReadCost, simulated fabric, -benchtime %s): "+
		"host ports and the switch ports facing them | target | time per read | one bare sweep of the fabric "+
		"(SIGHUP → SUBNET UP, median of %d) | ports/s | reader's CPU a port | MADs a port | MADs per read |\n"+
		"|---|---|---|---|---|---|---|---|\n", benchtime, readBackSweeps)
	for _, c := range rows {
		t := time.Duration(c.nsPerRead)
		target, cell, sweep := "", ms(t), "n/a"
		name, _, _ := strings.Cut(c.name, "/")
		s, ok := sweeps[name]
		if ok {
			sweep = ms(s.median())
		}
		if strings.Contains(c.name, "bootstorm=1000") {
			target, cell = "≤ one sweep", cell+" "+mark(ok && t <= s.median())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.0f | %.0f µs | %.2f | %.0f |\n", c.name, target, cell, sweep,
			c.ports()/t.Seconds(), c.cpuPerPort, c.madsPerPort, c.madsPerRead)
	}
	return b.String()
}
