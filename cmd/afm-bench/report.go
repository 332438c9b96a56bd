package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// engineResult is every per-engine figure of one run.
type engineResult struct {
	engine   string
	overhead overheadResult
	idle     float64 // % of one core
	batch    batchResult
	api      apiResult
	storm    stormResult
	failover failoverResult // zero on SQLite
	fabric   []fabricResult // the small fabric, then the large one on each count of switches (--fabric-switches)
	audit    auditDelayResult
	fabrics  fabricsResult
}

// Targets the figures are read against.
const (
	targetOverhead = 50 * time.Millisecond // p95 on the 4-host fabric
	// targetOverheadMedian is the median on the 4-host fabric: the log is
	// followed by file-change notification, not by polling.
	targetOverheadMedian = 5 * time.Millisecond
	// targetLargeOverhead is the median overhead on the large fabric and at
	// 10,000 ports: what a change costs beyond OpenSM's sweep must not grow
	// with the fabric.
	targetLargeOverhead = 20 * time.Millisecond
	// targetComplete is the median of the step after the sweep on the large
	// fabric: the gates cost what changed, not the fabric's size.
	targetComplete     = 5 * time.Millisecond
	targetBatchSweeps  = 3
	targetPostShare    = 0.5 // of the database's own insert rate
	targetGetFactor    = 10  // × the POST rate
	targetP99          = 20 * time.Millisecond
	targetIdlePercent  = 1.0
	targetRenderTime   = 200 * time.Millisecond
	targetRenderMemory = 100 << 20
)

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// row adds a row to the table: a measure, its target and one cell per
// engine.
type row func(measure, target string, cell func(r engineResult) string)

// table renders the results as Markdown: one column per engine, then the
// render's own table.
func table(results []engineResult, render renderResult, o options) string {
	var b strings.Builder
	header := "| measure | target |"
	rule := "|---|---|"
	for _, r := range results {
		header += " " + r.engine + " |"
		rule += "---|"
	}
	b.WriteString(header + "\n" + rule + "\n")
	add := func(measure, target string, cell func(r engineResult) string) {
		fmt.Fprintf(&b, "| %s | %s |", measure, target)
		for _, r := range results {
			fmt.Fprintf(&b, " %s |", cell(r))
		}
		b.WriteString("\n")
	}
	for _, m := range []struct {
		name string
		rows func(row, options)
	}{
		{"overhead", overheadRows}, {"batch", batchRows}, {"api", apiRows}, {"idle", idleRows},
		{"storm", stormRows}, {"failover", failoverRows},
		{"fabric", func(add row, o options) { fabricRows(add, results, o) }},
		{"audit", auditRows},
		{"fabrics", fabricsRows},
	} {
		if o.runs(m.name) {
			m.rows(add, o)
		}
	}
	if o.runs("render") {
		renderTable(&b, render)
	}
	return b.String()
}

// overheadRows are what a change costs beyond OpenSM's sweep (overhead.go).
func overheadRows(add row, o options) {
	add(fmt.Sprintf("**1. overhead** (%d samples, one port at a time; verify = log: the ports carry GUIDs no host has, "+
		"8a measures the same on hosts' ports with the defaults): OpenSM alone, SIGHUP → SUBNET UP, median / p95", o.samples), "",
		func(r engineResult) string {
			return ms(r.overhead.sweep.median()) + " / " + ms(r.overhead.sweep.quantile(0.95))
		})
	add(fmt.Sprintf("POST Port → job Completed, median / p95 (the job polled every %s from the POST on)",
		o.pollRunning), "", func(r engineResult) string {
		return ms(r.overhead.change.median()) + " / " + ms(r.overhead.change.quantile(0.95))
	})
	add("the poll's resolution: last GET not Completed sent → first Completed answered, median / p95; GETs per change", "",
		func(r engineResult) string {
			return fmt.Sprintf("%s / %s; %.1f", ms(r.overhead.window.median()), ms(r.overhead.window.quantile(0.95)),
				float64(r.overhead.polls)/float64(max(len(r.overhead.change), 1)))
		})
	add("overhead = POST → Completed − median sweep, median / p95", "≤ 5 ms / ≤ 50 ms", func(r engineResult) string {
		m, p := r.overhead.overhead(0.5), r.overhead.overhead(0.95)
		return fmt.Sprintf("%s / %s %s", ms(m), ms(p), mark(m <= targetOverheadMedian && p <= targetOverhead))
	})
}

// batchRows are a burst of changes (batch.go).
func batchRows(add row, o options) {
	add(fmt.Sprintf("**2. batching**: %d port POSTs from %d clients, all answered after", o.ports, o.clients), "≈ 1 s",
		func(r engineResult) string { return ms(r.batch.sent) })
	add("first POST → all jobs Completed", "≤ 2 sweeps + 2 s", func(r engineResult) string {
		limit := 2*r.overhead.sweep.median() + 2*time.Second
		return fmt.Sprintf("%s (limit %s) %s", ms(r.batch.allCompleted), ms(limit), mark(r.batch.allCompleted <= limit))
	})
	add("heavy sweeps started (= SIGHUPs) / SUBNET UP", "≤ 3", func(r engineResult) string {
		return fmt.Sprintf("%d / %d %s", r.batch.sweeps, r.batch.subnetUps, mark(r.batch.sweeps <= targetBatchSweeps))
	})
}

// apiRows are the API's throughput and latency (throughput.go).
func apiRows(add row, o options) {
	add(fmt.Sprintf("**3. API**, %d clients, %s each: the database's own single-row INSERTs", o.clients, o.apiDuration), "",
		func(r engineResult) string { return fmt.Sprintf("%.0f /s", r.api.insertRate) })
	add("POST Port", "≥ 50 % of INSERTs", func(r engineResult) string {
		post := r.api.post.perSecond()
		share := 0.0
		if r.api.insertRate > 0 {
			share = post / r.api.insertRate
		}
		return fmt.Sprintf("%.0f /s (%.0f %%) %s", post, 100*share, mark(share >= targetPostShare))
	})
	add("POST Port latency p50 / p99", "p99 < 20 ms", func(r engineResult) string {
		return latencyCell(r.api.post.lat)
	})
	add("GET job", "≥ 10 × POST", func(r engineResult) string {
		get, post := r.api.get.perSecond(), r.api.post.perSecond()
		factor := 0.0
		if post > 0 {
			factor = get / post
		}
		return fmt.Sprintf("%.0f /s (%.1f ×) %s", get, factor, mark(factor >= targetGetFactor))
	})
	add("GET job latency p50 / p99", "p99 < 20 ms", func(r engineResult) string {
		return latencyCell(r.api.get.lat)
	})
}

// idleRows are the manager's CPU with nothing to do (idle.go).
func idleRows(add row, o options) {
	add(fmt.Sprintf("**5. idle**: manager CPU over %s with nothing to do", o.idle), "< 1 % of a core",
		func(r engineResult) string {
			return fmt.Sprintf("%.2f %% %s", r.idle, mark(r.idle < targetIdlePercent))
		})
}

// stormRows are a poll storm on many jobs (storm.go).
func stormRows(add row, o options) {
	add(fmt.Sprintf("**6. poll storm**: %d jobs each polled once, spread over %s by %d pollers, took", o.stormJobs, o.syncTimeout, o.clients), "≈ "+o.syncTimeout.String(),
		func(r engineResult) string { return ms(r.storm.took) })
	add("GET job latency during the storm, p50 / p99", "p99 < 20 ms", func(r engineResult) string {
		return latencyCell(r.storm.get)
	})
	add("at this size, before the storm: OpenSM alone (SIGHUP → SUBNET UP) median; POST → Completed median; overhead", "≤ 20 ms", func(r engineResult) string {
		sweep, change := r.storm.quietSweep.median(), r.storm.quietChange.median()
		return fmt.Sprintf("%s; %s; %s %s", ms(sweep), ms(change), ms(change-sweep), mark(change-sweep <= targetLargeOverhead))
	})
	add("change latency (POST → Completed), quiet median → during storm median / max", "", func(r engineResult) string {
		return fmt.Sprintf("%s → %s / %s (%d changes)", ms(r.storm.quietChange.median()), ms(r.storm.stormChange.median()),
			ms(r.storm.stormChange.quantile(1)), len(r.storm.stormChange))
	})
}

// failoverRows are the HA failover's (failover.go).
func failoverRows(add row, o options) {
	add(fmt.Sprintf("**7. HA failover**: three managers, kill -9 of the leader → the next job Completed, %d rounds, median / max", o.failoverRounds),
		fmt.Sprintf("≤ lease_timeout %s + %s + %s + a sweep", o.leaseTimeout, o.leaseTimeout/5, o.leaseTimeout/2), func(r engineResult) string {
			if len(r.failover.took) == 0 {
				return "n/a (one manager)"
			}
			d := latencies(r.failover.took)
			return ms(d.median()) + " / " + ms(d.quantile(1))
		})
}

// renderTable is the render benchmark's own table (render.go).
func renderTable(b *strings.Builder, render renderResult) {
	fmt.Fprintf(b, "\n| **4. render + check**, 50,000 ports in 4,000 partitions (BenchmarkRenderCheck, -benchtime %s) | target | result |\n|---|---|---|\n", render.benchtime)
	t := time.Duration(render.nsPerOp)
	fmt.Fprintf(b, "| time per render + check | < 200 ms | %s %s |\n", ms(t), mark(t < targetRenderTime))
	fmt.Fprintf(b, "| peak memory (benchmark process's max RSS) | < 100 MB | %.1f MB %s |\n", float64(render.peakRSS)/1e6, mark(render.peakRSS < targetRenderMemory))
	fmt.Fprintf(b, "| allocated per render + check | | %.1f MB in %.0f allocations |\n", render.bytesPerOp/1e6, render.allocsPerOp)
	fmt.Fprintf(b, "| partitions file size | | %.1f MB |\n", render.fileBytes/1e6)
}

// fabricRows are the fabrics measured with the defaults (fabric.go): the
// small one, then the large one on each count of switches.
func fabricRows(add row, results []engineResult, o options) {
	n := 1 + len(o.fabricSwitches)
	for i := range n {
		f := fabricResult{hosts: o.samples + 4, switches: 1, networks: fabricNetworks}
		if i > 0 {
			f.hosts, f.switches = o.fabricHosts, o.fabricSwitches[i-1]
		}
		if len(results) > 0 && i < len(results[0].fabric) {
			f = results[0].fabric[i]
		}
		at := func(r engineResult) fabricResult {
			if i < len(r.fabric) {
				return r.fabric[i]
			}
			return fabricResult{}
		}
		if !slices.ContainsFunc(results, func(r engineResult) bool { return at(r).err == nil }) {
			add(fmt.Sprintf("**8. large fabric** (the defaults): %d hosts, %d switches: not measured", f.hosts, f.switches), "",
				func(r engineResult) string { return "✗ " + strings.ReplaceAll(at(r).err.Error(), "|", "/") })
			continue
		}
		// An engine whose fabric could not be measured has no figure,
		// and no ✓: afm-bench fails after the table, saying why.
		measured := func(measure, target string, cell func(r engineResult) string) {
			add(measure, target, func(r engineResult) string {
				if at(r).err != nil {
					return "✗ not measured"
				}
				return cell(r)
			})
		}
		fabricConfRows(measured, f, at, o, i == 0)
	}
}

// fabricConfRows are one fabric's rows; at picks its result of an engine's.
func fabricConfRows(add row, f fabricResult, at func(engineResult) fabricResult, o options, small bool) {
	own := "≤ 20 ms median"
	if small {
		own = "≤ 5 ms median"
	}
	title := "**8. large fabric**"
	if small {
		title = "**8a. small fabric, defaults**"
	}
	add(fmt.Sprintf("%s (verify = tables, the audit and the second-SM look as shipped): %d hosts, %d switches, %d host ports in "+
		"%d partitions, then %d changes one at a time (a host port each): OpenSM alone, SIGHUP → SUBNET UP, median / p95",
		title, f.hosts, f.switches, f.members, f.networks, o.samples), "",
		func(r engineResult) string {
			return ms(at(r).overhead.sweep.median()) + " / " + ms(at(r).overhead.sweep.quantile(0.95))
		})
	add(fmt.Sprintf("the enrollment's burst (batching on host ports): %d POSTs from %d clients → the last job Completed; "+
		"OpenSM's heavy sweeps meanwhile", f.members, o.clients), "", func(r engineResult) string {
		return fmt.Sprintf("%s; %d sweeps", ms(at(r).enroll), at(r).enrollSweeps)
	})
	add(fmt.Sprintf("POST Port → job Completed (committed: the line the manager logs after its commit, or the client's "+
		"read if sooner; the client polls every %s from the sample's bare sweep and %s after the POST), median / p95",
		pollCommitted, pollCommitted), "", func(r engineResult) string {
		return ms(at(r).overhead.change.median()) + " / " + ms(at(r).overhead.change.quantile(0.95))
	})
	target := targetLargeOverhead
	if small {
		target = targetOverheadMedian
	}
	// OpenSM alone sweeps a one-port change as long as it sweeps nothing
	// (within 0.1 ms on 24 hosts): an apply's sweep that takes longer
	// (0.7-1.5 ms on 24 hosts) is slowed by what the manager runs beside it on the
	// same cores. So the target subtracts the bare sweep, not the apply's.
	add("the manager's overhead: POST → Completed − OpenSM's bare sweep (median), median / p95", own,
		func(r engineResult) string {
			o := at(r).overhead
			m := o.overhead(0.5)
			return fmt.Sprintf("%s / %s %s", ms(m), ms(o.overhead(0.95)), mark(m <= target))
		})
	add("the same less OpenSM's own sweep of its apply (SIGHUP → SUBNET UP by OpenSM's time stamp; longer than a bare "+
		"one by what the manager runs beside it), median / p95", "", func(r engineResult) string {
		l := at(r).path.own
		return ms(l.median()) + " / " + ms(l.quantile(0.95))
	})
	add("the same less the apply's sweep as the manager read it (SIGHUP → SUBNET UP read by its log tail: the end's read "+
		"counted as OpenSM's; the figure before), median / p95", "", func(r engineResult) string {
		l := at(r).path.ownRead
		return ms(l.median()) + " / " + ms(l.quantile(0.95))
	})
	if small {
		add("OpenSM alone (the manager stopped): a bare sweep; one that applies a one-port change (a member line taken "+
			"out of the manager's file, or put back), medians", "", func(r engineResult) string {
			a := at(r).alone
			return ms(a.bare.median()) + "; " + ms(a.change.median())
		})
	}
	add("manager CPU (user + system) per change, its bare sweep included", "", func(r engineResult) string {
		return ms(at(r).cpu)
	})
	pathRows(add, at)
}

// pathRows split a fabric's changes along their path, in its order.
func pathRows(add row, at func(engineResult) fabricResult) {
	n := 0
	step := func(name string, l func(p changePath) latencies, target string, ok func(time.Duration) bool) {
		n++
		label := fmt.Sprintf("path %d. %s", n, name)
		if n == 1 {
			label = "the change's path, step by step, median / p95 (each change's steps but the last sum to its latency; the steps' " +
				"medians need not sum to its median): " + label
		}
		add(label, target, func(r engineResult) string {
			d := l(at(r).path)
			cell := ms(d.median()) + " / " + ms(d.quantile(0.95))
			if ok != nil {
				cell += " " + mark(ok(d.median()))
			}
			return cell
		})
	}
	step("wait (POST sent → its apply's start)", func(p changePath) latencies { return p.wait }, "", nil)
	step("render (snapshot, render, check)", func(p changePath) latencies { return p.render }, "", nil)
	step("write (the file and its fsync, SIGHUP)", func(p changePath) latencies { return p.write }, "", nil)
	step("OpenSM's sweep (SIGHUP → SUBNET UP by OpenSM's time stamp)", func(p changePath) latencies { return p.sweep }, "", nil)
	step("the end's read (SUBNET UP logged → read by the manager)", func(p changePath) latencies { return p.endRead }, "", nil)
	step("verify (read the changed ports' tables back; the second-SM look, places and capacity run beside)", func(p changePath) latencies { return p.verify }, "", nil)
	step("complete (what of the look and records outlasts the reads, gates, FinishApply)", func(p changePath) latencies { return p.complete },
		"≤ 5 ms median", func(d time.Duration) bool { return d <= targetComplete })
	step("the client's read, not in the latency (the apply's line logged → the client read Completed: its poll; "+
		"below 0 when it read the committed job before the line was logged)",
		func(p changePath) latencies { return p.client }, "", nil)
}

func latencyCell(l latencies) string {
	p99 := l.quantile(0.99)
	return fmt.Sprintf("%s / %s %s", ms(l.median()), ms(p99), mark(p99 < targetP99))
}

// machine describes where the run happened, for the figures' reader.
type machine struct {
	cpus      int
	cpuModel  string
	memory    string
	loadStart string
	loadEnd   string
	goVersion string
	started   time.Time
	took      time.Duration
}

func describeMachine() machine {
	m := machine{cpus: runtime.NumCPU(), goVersion: runtime.Version(), started: time.Now(), loadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kib int64
				fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kib)
				m.memory = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
			}
		}
	}
	return m
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func (m machine) String() string {
	return fmt.Sprintf("Run %s, took %s. Machine: %d CPUs (nproc), %s, %s memory; load average %s at the start, %s at the end; %s.",
		m.started.UTC().Format("2006-01-02 15:04 UTC"), m.took.Round(time.Second), m.cpus, m.cpuModel, m.memory,
		m.loadStart, m.loadEnd, m.goVersion)
}
