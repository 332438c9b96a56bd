package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// batchResult: a burst of port creations, as 500 bare-metal nodes booting at
// once send them.
type batchResult struct {
	ports        int
	sent         time.Duration // first POST sent → last 202 received
	allCompleted time.Duration // first POST sent → every job read Completed
	sweeps       int           // heavy sweeps OpenSM started meanwhile (each one a SIGHUP of the manager's)
	subnetUps    int
}

// measureBatch sends ports POSTs from clients concurrent clients, paced to
// spread over one second (faster if the manager cannot keep up, it is then as
// fast as it answers), and waits until every job is Completed.
func measureBatch(ctx context.Context, r *rig, ports, clients int) (batchResult, error) {
	res := batchResult{ports: ports}
	from, err := opensm.LogPosition(r.opensmLog)
	if err != nil {
		return res, err
	}
	jobs := make([]int64, ports)
	spacing := time.Second / time.Duration(ports)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for i := c; i < ports; i += clients {
				if wait := time.Until(start.Add(time.Duration(i) * spacing)); wait > 0 {
					time.Sleep(wait)
				}
				job, err := r.api.postPort(ctx, r.ports.port())
				if err == nil {
					jobs[i], err = jobNumber(job)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	res.sent = time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	last, err := waitAllCompleted(ctx, r.api, jobs)
	if err != nil {
		return res, err
	}
	res.allCompleted = last.Sub(start)
	res.sweeps, res.subnetUps, err = countSweeps(r.opensmLog, from)
	return res, err
}

// waitAllCompleted returns when the last of jobs was first read Completed. The
// applier completes jobs in revision order, so the newest job is watched
// closely and the rest checked once it completes; any found still open are
// then watched in turn.
func waitAllCompleted(ctx context.Context, api *apiClient, jobs []int64) (time.Time, error) {
	newest := jobs[0]
	for _, j := range jobs {
		newest = max(newest, j)
	}
	last, err := api.waitCompleted(ctx, jobPath(newest), pollEvery)
	if err != nil {
		return last, err
	}
	for _, j := range jobs {
		status, err := api.jobStatus(ctx, jobPath(j))
		if err != nil {
			return last, err
		}
		if status == "Completed" {
			continue
		}
		at, err := api.waitCompleted(ctx, jobPath(j), pollEvery)
		if err != nil {
			return last, fmt.Errorf("after the newest job: %w", err)
		}
		last = at
	}
	return last, nil
}
