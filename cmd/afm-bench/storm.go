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
	// With this many ports OpenSM's own sweep is longer too (it parses every
	// member): the bare sweep at this size tells the two apart.
	pid, err := r.opensmPID()
	if err != nil {
		return res, err
	}
	for range quietSamples {
		d, err := bareSweep(ctx, r.opensmLog, pid)
		if err != nil {
			return res, err
		}
		res.quietSweep = append(res.quietSweep, d)
		if d, err = timeChange(ctx, r); err != nil {
			return res, err
		}
		res.quietChange = append(res.quietChange, d)
	}

	order := rand.Perm(jobs)
	start := time.Now()
	spacing := window / time.Duration(jobs)
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range jobs {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = make(chan error, clients+1)
	)
	for range clients {
		wg.Go(func() {
			var mine latencies
			for i := range next {
				if wait := time.Until(start.Add(time.Duration(i) * spacing)); wait > 0 {
					time.Sleep(wait)
				}
				t := time.Now()
				if _, err := r.api.jobStatus(ctx, jobPath(r.api.jobAt(order[i]))); err != nil {
					errs <- err
					break
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			res.get = append(res.get, mine...)
			mu.Unlock()
		})
	}
	stormOver := make(chan struct{})
	changesDone := make(chan struct{})
	go func() {
		defer close(changesDone)
		for {
			d, err := timeChange(ctx, r)
			if err != nil {
				errs <- err
				return
			}
			res.stormChange = append(res.stormChange, d)
			select {
			case <-stormOver:
				return
			default:
			}
		}
	}()
	wg.Wait()
	res.took = time.Since(start)
	close(stormOver)
	<-changesDone
	close(errs)
	if err := <-errs; err != nil {
		return res, fmt.Errorf("job-poll storm: %w", err)
	}
	return res, nil
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
