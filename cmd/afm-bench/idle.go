package main

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// measureIdle is the share of one core the manager process (not its OpenSM)
// used over d with nothing to do: utime+stime from /proc/<pid>/stat before and
// after.
func measureIdle(ctx context.Context, r *rig, d time.Duration) (float64, error) {
	pid := r.managerPID()
	before, err := readProcStat(pid)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	after, err := readProcStat(pid)
	if err != nil {
		return 0, err
	}
	ticks := float64(after.utime + after.stime - before.utime - before.stime)
	return 100 * ticks / clockTicks() / time.Since(start).Seconds(), nil
}

// clockTicks is the unit of /proc/<pid>/stat's times (USER_HZ), 100 on every
// Linux architecture Debian ships unless getconf says otherwise.
func clockTicks() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return float64(n)
		}
	}
	return 100
}
