package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// overheadResult: how much a change costs beyond OpenSM's own sweep.
type overheadResult struct {
	samples int
	sweep   latencies // SIGHUP sent → "SUBNET UP" as OpenSM timestamps it
	change  latencies // POST Port sent → job first read Completed
	// window: per change, the last GET that read the job not Completed sent →
	// the GET that read it Completed answered. The job completed within it:
	// what the client's polling can add to the change's figure at most.
	window latencies
	polls  int // GETs of the job, all changes together
}

// overhead is a change's latency minus the median sweep.
func (o overheadResult) overhead(q float64) time.Duration {
	return o.change.quantile(q) - o.sweep.median()
}

// pollEvery is how often a waiting client polls its job: much faster than
// networking-mlnx, so that the poll adds little to the figure (half of it on
// average) without loading the manager.
const pollEvery = 5 * time.Millisecond

// pollCommitted is how often the client of (8) and (8a) polls its job,
// whose latency is taken to its commit (change.committed).
const pollCommitted = 50 * time.Millisecond

// pollRunning is how often (1)'s client polls its job, from the POST on.
// (1)'s whole change, OpenSM's sweep of 4 hosts (~2 ms) included, is
// shorter than pollEvery: polled every pollEvery while Pending, its job
// read Completed at the second GET, 5 ms after the first, whatever the
// manager took, and the figure was the poll's.
const pollRunning = time.Millisecond

// measureOverhead alternates a bare sweep (SIGHUP sent to OpenSM by hand, the
// manager idle) with one port change through the manager, samples times each,
// on a quiet fabric. The client polls each change's job by plan.
func measureOverhead(ctx context.Context, r *rig, samples int, plan pollPlan) (overheadResult, error) {
	pid, err := r.opensmPID()
	if err != nil {
		return overheadResult{}, err
	}
	res := overheadResult{samples: samples}
	for range samples {
		d, err := bareSweep(ctx, r.opensmLog, pid)
		if err != nil {
			return res, err
		}
		res.sweep = append(res.sweep, d)
		sent := time.Now()
		job, err := r.api.postPort(ctx, r.ports.port())
		if err != nil {
			return res, err
		}
		w, err := r.api.waitPlanned(ctx, job, plan)
		if err != nil {
			return res, err
		}
		res.change = append(res.change, w.done.Sub(sent))
		from := w.lastNotDone
		if from.IsZero() { // the first GET read Completed
			from = sent
		}
		res.window = append(res.window, w.done.Sub(from))
		res.polls += w.polls
	}
	return res, nil
}

// bareSweep sends SIGHUP to OpenSM and returns the time from the signal to the
// "SUBNET UP" line of the heavy sweep it started, by OpenSM's own time stamp
// (microseconds), so that reading the log adds nothing to the figure.
func bareSweep(ctx context.Context, logPath string, pid int) (time.Duration, error) {
	from, err := opensm.LogPosition(logPath)
	if err != nil {
		return 0, err
	}
	sent := time.Now()
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return 0, fmt.Errorf("SIGHUP OpenSM (pid %d): %w", pid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	follower := opensm.FollowLog(logPath, from)
	defer follower.Close()
	started := false
	for {
		e, err := follower.Next(ctx)
		if err != nil {
			return 0, fmt.Errorf("follow OpenSM's log after SIGHUP: %w", err)
		}
		switch {
		case e.Title == "INITIATING HEAVY SWEEP":
			started = true
		case started && e.Message == "Errors during initialization":
			return 0, errors.New("the sweep after SIGHUP ended with errors")
		case started && e.Message == "SUBNET UP":
			at, err := logTime(e.Time, sent)
			if err != nil {
				return 0, err
			}
			return at.Sub(sent), nil
		}
	}
}

// logTime reads OpenSM's time stamp ("Nov 29 18:16:33 486627": local time, no
// year) as the instant nearest to near.
func logTime(stamp string, near time.Time) (time.Time, error) {
	return logTimeIn(stamp, near, time.Local)
}

// logTimeIn is logTime for an OpenSM whose local time is loc's.
func logTimeIn(stamp string, near time.Time, loc *time.Location) (time.Time, error) {
	if len(stamp) != len("Jan 02 15:04:05 000000") {
		return time.Time{}, fmt.Errorf("OpenSM time stamp %q: unexpected form", stamp)
	}
	t, err := time.ParseInLocation("Jan 02 15:04:05", stamp[:15], loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("OpenSM time stamp %q: %w", stamp, err)
	}
	micros, err := strconv.Atoi(stamp[16:])
	if err != nil {
		return time.Time{}, fmt.Errorf("OpenSM time stamp %q: %w", stamp, err)
	}
	t = time.Date(near.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), micros*1000, loc)
	// Across New Year the stamp belongs to the neighbouring year.
	if t.Sub(near) > 180*24*time.Hour {
		t = t.AddDate(-1, 0, 0)
	} else if near.Sub(t) > 180*24*time.Hour {
		t = t.AddDate(1, 0, 0)
	}
	return t, nil
}

// countSweeps counts the heavy sweeps OpenSM started and the "SUBNET UP" lines
// it logged in its log since from.
func countSweeps(logPath string, from opensm.Position) (started, up int, err error) {
	entries, err := readEntries(logPath, from)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		switch {
		case e.Title == "INITIATING HEAVY SWEEP":
			started++
		case e.Message == "SUBNET UP":
			up++
		}
	}
	return started, up, nil
}
