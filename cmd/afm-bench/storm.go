package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// stormResult: networking-mlnx polling many jobs while changes keep coming.
type stormResult struct {
	jobs        int           // jobs polled, once each
	window      time.Duration // the period they were spread over (sync_timeout)
	took        time.Duration // how long the polls really took
	get         latencies
	quietChange latencies // POST → Completed just before the storm
	quietSweep  latencies // a bare sweep (SIGHUP → SUBNET UP) at the same state size
	stormChange latencies // the same during it
}

// measureStorm makes sure at least jobs jobs exist, then GETs each of them once,
// paced evenly over window by clients concurrent pollers (several
// neutron-server processes polling their journals), while one client sends a
// port change after another and times each to Completed.
func measureStorm(ctx context.Context, r *rig, jobs, clients int, window time.Duration, quietSamples int) (stormResult, error) {
	res := stormResult{jobs: jobs, window: window}
	if err := fillJobs(ctx, r, int64(jobs), clients); err != nil {
		return res, err
	}
	// Start from a quiet applier: the fill's changes are all applied.
	if _, err := r.api.waitCompleted(ctx, jobPath(r.api.lastJob.Load()), 20*time.Millisecond); err != nil {
		return res, err
	}
	if err := measureQuiet(ctx, r, quietSamples, &res); err != nil {
		return res, err
	}
	if err := runStorm(ctx, r, clients, &res); err != nil {
		return res, fmt.Errorf("job-poll storm: %w", err)
	}
	return res, nil
}

// measureQuiet times samples bare sweeps and port changes before the storm.
// With this many ports OpenSM's own sweep is longer too (it parses every
// member): the bare sweep at this size tells the two apart.
func measureQuiet(ctx context.Context, r *rig, samples int, res *stormResult) error {
	pid, err := r.opensmPID()
	if err != nil {
		return err
	}
	for range samples {
		d, err := bareSweep(ctx, r.opensmLog, pid)
		if err != nil {
			return err
		}
		res.quietSweep = append(res.quietSweep, d)
		if d, err = timeChange(ctx, r); err != nil {
			return err
		}
		res.quietChange = append(res.quietChange, d)
	}
	return nil
}

// runStorm is the storm itself: clients pollers GET res.jobs jobs in a
// random order, paced evenly over res.window, while port changes are timed
// one after another until the polls are over. It fills res.get,
// res.stormChange and res.took, and returns the first error of either.
func runStorm(ctx context.Context, r *rig, clients int, res *stormResult) error {
	order := rand.Perm(res.jobs)
	start := time.Now()
	spacing := res.window / time.Duration(res.jobs)
	next := countTo(ctx, res.jobs)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = make(chan error, clients+1)
	)
	for range clients {
		wg.Go(func() {
			mine := pollPaced(ctx, r, next, func(i int) (time.Time, int64) {
				return start.Add(time.Duration(i) * spacing), r.api.jobAt(order[i])
			}, errs)
			mu.Lock()
			res.get = append(res.get, mine...)
			mu.Unlock()
		})
	}
	stormOver := make(chan struct{})
	changesDone := make(chan struct{})
	go func() {
		defer close(changesDone)
		res.stormChange = timeChangesUntil(ctx, r, stormOver, errs)
	}()
	wg.Wait()
	res.took = time.Since(start)
	close(stormOver)
	<-changesDone
	close(errs)
	return <-errs
}

// countTo sends 0 to n-1, then closes the channel; or stops early when ctx
// ends.
func countTo(ctx context.Context, n int) <-chan int {
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	return next
}

// pollPaced GETs, for each index next sends, the job slot names, not before
// the time slot gives it, and returns how long each GET took. It stops at
// the first error, which it sends on errs.
func pollPaced(ctx context.Context, r *rig, next <-chan int, slot func(i int) (time.Time, int64), errs chan<- error) latencies {
	var mine latencies
	for i := range next {
		at, job := slot(i)
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		t := time.Now()
		if _, err := r.api.jobStatus(ctx, jobPath(job)); err != nil {
			errs <- err
			break
		}
		mine = append(mine, time.Since(t))
	}
	return mine
}

// timeChangesUntil times one port change after another, to Completed,
// until over is closed (the change under way when it closes is timed to its
// end) or a change fails, whose error goes to errs.
func timeChangesUntil(ctx context.Context, r *rig, over <-chan struct{}, errs chan<- error) latencies {
	var took latencies
	for {
		d, err := timeChange(ctx, r)
		if err != nil {
			errs <- err
			return took
		}
		took = append(took, d)
		select {
		case <-over:
			return took
		default:
		}
	}
}

// fillJobs sends port POSTs until the manager has handed this client at least
// n jobs.
func fillJobs(ctx context.Context, r *rig, n int64, clients int) error {
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			for int64(r.api.jobCount()) < n && ctx.Err() == nil {
				if _, err := r.api.postPort(ctx, r.ports.port()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("create %d jobs: %w", n, err)
	}
	return ctx.Err()
}

// timeChange is one port POST's time to Completed.
func timeChange(ctx context.Context, r *rig) (time.Duration, error) {
	sent := time.Now()
	job, err := r.api.postPort(ctx, r.ports.port())
	if err != nil {
		return 0, err
	}
	done, err := r.api.waitCompleted(ctx, job, pollEvery)
	if err != nil {
		return 0, err
	}
	return done.Sub(sent), nil
}
