package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
)

// renderResult is BenchmarkRenderCheck's report (internal/partitions: render
// and strictly check the partitions file of 50,000 ports in 4,000 partitions).
type renderResult struct {
	benchtime   string
	nsPerOp     float64
	bytesPerOp  float64
	allocsPerOp float64
	fileBytes   float64
	peakRSS     int64 // bytes: the benchmark process's maximum resident set
}

var benchLine = regexp.MustCompile(`(?m)^BenchmarkRenderCheck\S*\s+\d+\s+(.*)$`)
var benchMetric = regexp.MustCompile(`([0-9.]+) (\S+)`)

// measureRender builds the partitions package's test binary and runs the
// benchmark alone in it, so that the process's peak RSS is the benchmark's.
func measureRender(ctx context.Context, dir, benchtime string) (renderResult, error) {
	res := renderResult{benchtime: benchtime}
	binary := filepath.Join(dir, "partitions.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", binary, "./internal/partitions")
	if out, err := build.CombinedOutput(); err != nil {
		return res, fmt.Errorf("build the partitions benchmark: %w: %s", err, out)
	}
	run := exec.CommandContext(ctx, binary, "-test.run", "^$", "-test.bench", "^BenchmarkRenderCheck$",
		"-test.benchmem", "-test.benchtime", benchtime)
	run.Dir = filepath.Join("internal", "partitions")
	run.Stderr = os.Stderr
	out, err := run.Output()
	if err != nil {
		return res, fmt.Errorf("BenchmarkRenderCheck: %w: %s", err, out)
	}
	if ru, ok := run.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.peakRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
	m := benchLine.FindSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("BenchmarkRenderCheck: no result line in: %s", out)
	}
	metrics := benchMetrics(m[1])
	res.nsPerOp, res.bytesPerOp = metrics["ns/op"], metrics["B/op"]
	res.allocsPerOp, res.fileBytes = metrics["allocs/op"], metrics["file-bytes"]
	if res.nsPerOp == 0 {
		return res, fmt.Errorf("BenchmarkRenderCheck: no ns/op in: %s", m[0])
	}
	return res, nil
}

// benchMetrics are the metrics of a benchmark's result line by unit (ns/op,
// B/op and the benchmark's own); a value that does not parse is left out.
func benchMetrics(line []byte) map[string]float64 {
	metrics := map[string]float64{}
	for _, metric := range benchMetric.FindAllSubmatch(line, -1) {
		if v, err := strconv.ParseFloat(string(metric[1]), 64); err == nil {
			metrics[string(metric[2])] = v
		}
	}
	return metrics
}
