package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// fabricResult: a change's cost on a fabric of a real cloud's size, whose
// ports are really on the fabric, so that OpenSM programs every member's pkey
// table and its subnet dump lists every node.
type fabricResult struct {
	hosts, switches int
	networks        int // VLAN networks the hosts are spread over
	members         int // host ports in a partition before the samples
	overhead        overheadResult
	split           applySplit // the manager's own split of the samples' applies
	// path: each change's latency split along its path, its apply's sweep
	// by OpenSM's own time stamps (changepath.go); its own is the change less
	// that sweep, whose time varies by hundreds of milliseconds from one
	// sweep to the next at this size.
	path changePath
	// enroll is the enrollment's burst (the batching, on host ports with the
	// defaults): the members' POSTs from the first sent to the last job
	// read Completed, and the heavy sweeps OpenSM started meanwhile.
	enroll       time.Duration
	enrollSweeps int
	// alone: OpenSM's sweeps with the manager stopped (alone.go), on the
	// small fabric only.
	alone aloneResult
	// err is why the measurement could not be made; the table says so, and
	// afm-bench fails once it is written.
	err error
	// cpu is the manager process's CPU time (user + system) per change,
	// bare sweeps included: what the manager costs, whatever the machine's load.
	cpu time.Duration
}

// applySplit is what the manager's "partitions applied" log lines say of the
// applies they report: reading and rendering the state, writing the file,
// OpenSM's sweep (SIGHUP → SUBNET UP read), and completing (recording the
// apply, the capacity check, the gates and the jobs' completion).
type applySplit struct {
	render, write, sweep, verify, complete latencies
	at                                     []applyTimes // when each apply's steps began
}

// applyTimes is when an apply's steps began, on the manager's clock, as its
// "partitions applied" line gives them: the line's time (RFC 3339 with
// nanoseconds) less its took is the start, and each phase after it the next
// step's. The manager measures each phase from its own clock readings, so
// these are exact to the microsecond or so between its took's reading and
// the line's (more only if it lost its core just then).
type applyTimes struct {
	started   time.Time // the apply began (prepare: the snapshot's read)
	rendered  time.Time // the file rendered: writing it (and marking the jobs, beside it) began
	signalled time.Time // SIGHUP sent: read once the kill returned
	swept     time.Time // the manager read the sweep's end (and the file's sync was done)
	logged    time.Time // the line's own time: every job it completed was committed before
}

// fabricNetworks is how many VLAN networks the large fabric's hosts are spread
// over: a cloud's tenants, each a partition with its own members.
const fabricNetworks = 10

// measureFabric starts a fabric of hosts hosts on switches switches and a
// manager on it, puts every host but samples of them into fabricNetworks
// networks, then alternates a bare sweep and a port change (one of the
// remaining hosts) samples times, as measureOverhead does on the small fabric.
func measureFabric(ctx context.Context, engine, binary, dir string, hosts, switches, samples, clients int,
	alone bool, log *slog.Logger) (res fabricResult, err error) {
	res = fabricResult{hosts: hosts, switches: switches, networks: fabricNetworks}
	if samples >= hosts {
		return res, fmt.Errorf("%d samples need more than %d hosts", samples, hosts)
	}
	// The manager as shipped: verify = tables, the audit and the second-SM
	// look on; every port is a host's, so every change is read back.
	r, err := startRigWith(ctx, engine, binary, dir, fabricsim.Options{Hosts: hosts, Switches: switches}, verifyTables, nil, log)
	if err != nil {
		return res, err
	}
	defer r.stop(log)

	nets, err := enroll(ctx, r, samples, clients, &res, log)
	if err != nil {
		return res, err
	}
	pid, err := r.opensmPID()
	if err != nil {
		return res, err
	}
	logFrom, err := fileSize(r.logPath)
	if err != nil {
		return res, err
	}
	osmFrom, err := opensm.LogPosition(r.opensmLog)
	if err != nil {
		return res, err
	}
	res.overhead.samples = samples
	changes := make([]change, 0, samples)
	cpuBefore, err := readProcStat(r.managerPID())
	if err != nil {
		return res, err
	}
	for i, h := range r.fabric.Hosts[:samples] {
		d, err := bareSweep(ctx, r.opensmLog, pid)
		if err != nil {
			return res, err
		}
		res.overhead.sweep = append(res.overhead.sweep, d)
		sent := time.Now()
		job, err := r.api.postPort(ctx, hostPort(h.PortGUID, nets[i%len(nets)], i))
		if err != nil {
			return res, err
		}
		// A change's latency is to its job's commit, read from the
		// manager's line (change.committed, readPath): the client polls
		// only to move on, as networking-mlnx polls every sync_timeout
		// (10 s), but not adding so much to each sample's time. Its
		// first GET comes once OpenSM would have swept the change (as
		// long as this sample's bare sweep) and pollCommitted more: a
		// GET during the sweep or the apply's last steps takes the
		// cores they share.
		plan := pollPlan{first: d + pollCommitted, every: pollCommitted}
		w, err := r.api.waitPlanned(ctx, job, plan)
		if err != nil {
			return res, err
		}
		changes = append(changes, change{sent: sent, done: w.done})
	}
	cpuAfter, err := readProcStat(r.managerPID())
	if err != nil {
		return res, err
	}
	res.cpu = ticks(cpuAfter.utime+cpuAfter.stime-cpuBefore.utime-cpuBefore.stime) / time.Duration(samples)
	if err = res.readPath(ctx, r, logFrom, osmFrom, changes); err != nil || !alone {
		return res, err
	}
	res.alone, err = measureOpenSMAlone(ctx, r, samples)
	return res, err
}

// readPath reads the split of the changes' applies from the manager's log
// after offset logFrom, pairs them with OpenSM's sweeps in its log after
// osmFrom and splits each change along its path.
func (res *fabricResult) readPath(ctx context.Context, r *rig, logFrom int64, osmFrom opensm.Position, changes []change) error {
	samples := len(changes)
	var err error
	if res.split, err = awaitApplySplit(ctx, r.logPath, logFrom, changes[0].sent, samples); err != nil {
		return err
	}
	if n := len(res.split.at); n != samples {
		return fmt.Errorf("the manager logged %d \"partitions applied\" lines for %d changes (see %s)", n, samples, r.logPath)
	}
	entries, err := readEntries(r.opensmLog, osmFrom)
	if err != nil {
		return err
	}
	sweeps, err := sweepsOf(entries, res.split.at, time.Local)
	if err != nil {
		return fmt.Errorf("pair the applies with OpenSM's sweeps (see %s and %s): %w", r.logPath, r.opensmLog, err)
	}
	if res.path, err = pathOf(changes, res.split, sweeps); err != nil {
		return err
	}
	for i, c := range changes {
		res.overhead.change = append(res.overhead.change, c.committed(res.split.at[i]).Sub(c.sent))
	}
	return nil
}

// enroll creates the fabric's networks and binds every host but the first
// samples to them in a burst, as a cloud's nodes were enrolled; it notes the
// burst in res and returns the networks.
func enroll(ctx context.Context, r *rig, samples, clients int, res *fabricResult, log *slog.Logger) ([]string, error) {
	nets := make([]string, fabricNetworks)
	var last string
	var err error
	for i := range nets {
		nets[i] = fmt.Sprintf("3b9d6a52-7c1e-4f0a-9e2d-0000000f%04d", i)
		if last, err = r.api.postNetwork(ctx, nets[i], 201+i); err != nil {
			return nil, err
		}
	}
	if _, err := r.api.waitCompleted(ctx, last, 20*time.Millisecond); err != nil {
		return nil, fmt.Errorf("create the networks: %w", err)
	}
	members := r.fabric.Hosts[samples:]
	res.members = len(members)
	log.Info("large fabric: putting host ports into partitions", "ports", len(members), "networks", fabricNetworks)
	from, err := opensm.LogPosition(r.opensmLog)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := postAll(ctx, r, members, nets, clients); err != nil {
		return nil, err
	}
	done, err := r.api.waitCompleted(ctx, jobPath(r.api.lastJob.Load()), pollEvery)
	if err != nil {
		return nil, fmt.Errorf("enroll the hosts: %w", err)
	}
	res.enroll = done.Sub(start)
	if res.enrollSweeps, _, err = countSweeps(r.opensmLog, from); err != nil {
		return nil, err
	}
	return nets, nil
}

// measureFabricsOf measures, with the manager's defaults, the small fabric
// (a host for each sample and four more, on one switch: the 4-host
// overhead's target, on ports real hosts carry) and the large fabric on each
// count of switches of o.
func measureFabricsOf(ctx context.Context, engine, binary, dir string, o options, log *slog.Logger) ([]fabricResult, error) {
	sizes := [][2]int{{o.samples + 4, 1}}
	for _, k := range o.fabricSwitches {
		sizes = append(sizes, [2]int{o.fabricHosts, k})
	}
	var out []fabricResult
	for i, size := range sizes {
		log.Info("fabric with the defaults: overhead over OpenSM", "hosts", size[0], "switches", size[1], "samples", o.samples)
		ldir := filepath.Join(dir, fmt.Sprintf("large-%d-%d", size[0], size[1])) // dir/fabric is the small rig's fabric
		if err := os.MkdirAll(ldir, 0o755); err != nil {
			return out, err
		}
		// One fabric that cannot be measured (a read that fails on a long
		// chain of switches) leaves the others' figures: it is reported in
		// the table, and the run fails after it.
		res, err := measureFabric(ctx, engine, binary, ldir, size[0], size[1], o.samples, o.clients, i == 0, log)
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			res.err = fmt.Errorf("fabric of %d hosts on %d switches: %w", size[0], size[1], err)
			log.Error("fabric not measured", "error", res.err)
		}
		out = append(out, res)
	}
	return out, nil
}

// postAll binds every host's port to one of nets, round-robin, from clients
// concurrent clients.
func postAll(ctx context.Context, r *rig, hosts []fabricsim.Host, nets []string, clients int) error {
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for i := c; i < len(hosts); i += clients {
				// Numbered after the samples' ports, which take 0 to samples-1.
				n := len(r.fabric.Hosts) - len(hosts) + i
				if _, err := r.api.postPort(ctx, hostPort(hosts[i].PortGUID, nets[i%len(nets)], n)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// hostPort is the baremetal port of a host of the fabric, number n of the run:
// its id and host name are n's, its client-id carries the host's port GUID.
func hostPort(guid fabric.GUID, network string, n int) benchPort {
	id := fmt.Sprintf("5c0e7d1a-2b3c-4d5e-8f90-%012x", n)
	return makePort(id, network, fmt.Sprintf("fabric-node-%d", n), uint64(guid))
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// loggedSince is the split of the applies whose lines were logged at t or
// later (the lines are in the order of their times).
func (s applySplit) loggedSince(t time.Time) applySplit {
	k := 0
	for k < len(s.at) && s.at[k].logged.Before(t) {
		k++
	}
	return s.last(len(s.at) - k)
}

// last is the split of the last n applies.
func (s applySplit) last(n int) applySplit {
	tail := func(l latencies) latencies { return l[max(len(l)-n, 0):] }
	return applySplit{render: tail(s.render), write: tail(s.write), sweep: tail(s.sweep), verify: tail(s.verify),
		complete: tail(s.complete), at: s.at[max(len(s.at)-n, 0):]}
}

// awaitApplySplit reads the split of the "partitions applied" lines after
// offset from logged since since (when the first change was sent: the
// enrollment's last apply logs its line once its jobs are committed, after
// the client read its last job Completed) once there are n of them, or what
// there is after 5 s: a job is committed before its apply's line is logged,
// so that the client may read the last change Completed before its line is
// written.
func awaitApplySplit(ctx context.Context, path string, from int64, since time.Time, n int) (applySplit, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := readApplySplit(path, from)
		s = s.loggedSince(since)
		if err != nil || len(s.at) >= n || time.Now().After(deadline) {
			return s, err
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return s, err
		}
	}
}

// readApplySplit reads the split of every "partitions applied" line of the
// manager's log (JSON lines, durations in nanoseconds) after offset from.
func readApplySplit(path string, from int64) (applySplit, error) {
	var s applySplit
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return s, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		var line struct {
			Time                                   time.Time `json:"time"`
			Msg                                    string    `json:"msg"`
			Render, Write, Sweep, Verify, Complete *int64
			Took                                   int64 `json:"took"`
			Jobs                                   int64 `json:"jobs_completed"`
		}
		// An apply that completed no job (the audit's repair, a reapply
		// after the gates reopened) is no change's.
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "partitions applied" || line.Complete == nil ||
			line.Jobs == 0 {
			continue
		}
		if line.Render == nil || line.Write == nil || line.Sweep == nil {
			return s, fmt.Errorf("%s: a \"partitions applied\" line without its split: %s", filepath.Base(path), sc.Text())
		}
		s.render = append(s.render, time.Duration(*line.Render))
		s.write = append(s.write, time.Duration(*line.Write))
		s.sweep = append(s.sweep, time.Duration(*line.Sweep))
		if line.Verify != nil {
			s.verify = append(s.verify, time.Duration(*line.Verify))
		}
		s.complete = append(s.complete, time.Duration(*line.Complete))
		a := applyTimes{started: line.Time.Add(-time.Duration(line.Took)), logged: line.Time}
		a.rendered = a.started.Add(time.Duration(*line.Render))
		a.signalled = a.rendered.Add(time.Duration(*line.Write))
		a.swept = a.signalled.Add(time.Duration(*line.Sweep))
		s.at = append(s.at, a)
	}
	return s, sc.Err()
}

// ticks is a count of /proc/<pid>/stat clock ticks as a duration.
func ticks(n uint64) time.Duration {
	return time.Duration(float64(n) / clockTicks() * float64(time.Second))
}
