package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// auditDelayResult: what the continuous audit's full read costs a change
// sent while it reads (the target: no more than the change's own reads of
// its places, the verify phase), against a change sent between audits, on
// one manager with the defaults but a short audit_interval.
type auditDelayResult struct {
	hosts, switches int
	interval        time.Duration
	read            latencies // the audits' full reads that ran to the end ("audit finished" took)
	// quiet and during are POST → Completed of the changes sent between
	// audits and a tenth into an audit's read; quietOwn and duringOwn the
	// same less OpenSM's own sweep of each one's apply (as (8)'s own
	// overhead): empty when the applies cannot be paired with the changes.
	quiet, during, quietOwn, duringOwn latencies
	// quietWait and duringWait are each change's POST sent → its apply's
	// start: what the audit's read makes a change wait, whatever the sweep.
	quietWait, duringWait latencies
	sent                  []time.Time // of the changes, between and during in turn
	verify                latencies   // every change's own reads (the verify phase)
	split                 applySplit  // the changes' applies, when they pair with the changes
	gaveWay               int         // audits that gave way to a change
	err                   error
}

// auditBenchInterval is the measurement's audit_interval: the default (300
// s) would take hours for a few samples.
const auditBenchInterval = 2 * time.Second

// measureAuditDelay starts a fabric of hosts on switches with a manager
// auditing every auditBenchInterval, enrolls every host but 2 × samples,
// then samples times: waits for an audit to end, times a change (between
// audits), and times another sent a tenth into the next audit's read.
func measureAuditDelay(ctx context.Context, engine, binary, dir string, hosts, switches, samples, clients int,
	log *slog.Logger) (res auditDelayResult, err error) {
	res = auditDelayResult{hosts: hosts, switches: switches, interval: auditBenchInterval}
	if 2*samples >= hosts {
		return res, fmt.Errorf("%d samples need more than %d hosts", samples, hosts/2)
	}
	audit := fmt.Sprintf("audit_interval = %d\n", int(auditBenchInterval.Seconds()))
	r, err := startRigWith(ctx, engine, binary, dir, fabricsim.Options{Hosts: hosts, Switches: switches}, audit, nil, log)
	if err != nil {
		return res, err
	}
	defer r.stop(log)
	nets, err := enroll(ctx, r, 2*samples, clients, &fabricResult{}, log)
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
	at := logFrom
	change := func(n int) (time.Duration, error) {
		sent := time.Now()
		res.sent = append(res.sent, sent)
		job, err := r.api.postPort(ctx, hostPort(r.fabric.Hosts[n].PortGUID, nets[n%len(nets)], n))
		if err != nil {
			return 0, err
		}
		done, err := r.api.waitCompleted(ctx, job, pollEvery)
		return done.Sub(sent), err
	}
	for i := range samples {
		var a auditRun
		if a, at, err = nextAudit(ctx, r.logPath, at); err != nil {
			return res, err
		}
		res.read = append(res.read, a.took)
		d, err := change(2 * i)
		if err != nil {
			return res, err
		}
		res.quiet = append(res.quiet, d)
		// The next audit starts an interval after this one started.
		if err := sleep(ctx, time.Until(a.start.Add(res.interval+a.took/10))); err != nil {
			return res, err
		}
		if d, err = change(2*i + 1); err != nil {
			return res, err
		}
		res.during = append(res.during, d)
	}
	if err = res.readLog(ctx, r.logPath, logFrom); err == nil {
		err = res.pairSweeps(r.opensmLog, osmFrom)
	}
	return res, err
}

// readLog reads the applies' split and the audits that gave way from the
// manager's log after offset from.
func (res *auditDelayResult) readLog(ctx context.Context, path string, from int64) error {
	if len(res.sent) == 0 {
		return nil
	}
	split, err := awaitApplySplit(ctx, path, from, res.sent[0], len(res.sent))
	if err != nil {
		return err
	}
	res.verify = split.verify
	if len(split.sweep) == len(res.quiet)+len(res.during) && len(res.sent) == len(split.at) {
		res.split = split
		for i := range res.quiet {
			res.quietWait = append(res.quietWait, split.at[2*i].started.Sub(res.sent[2*i]))
			res.duringWait = append(res.duringWait, split.at[2*i+1].started.Sub(res.sent[2*i+1]))
		}
	}
	res.gaveWay, err = countLogLines(path, from, "audit gave way to a change; reading the fabric again after its apply")
	return err
}

// pairSweeps pairs the changes' applies (readLog) with OpenSM's own sweeps
// in its log after from, for the changes less OpenSM's sweep.
func (res *auditDelayResult) pairSweeps(opensmLog string, from opensm.Position) error {
	if len(res.split.at) == 0 {
		return nil
	}
	entries, err := readEntries(opensmLog, from)
	if err != nil {
		return err
	}
	sweeps, err := sweepsOf(entries, res.split.at, time.Local)
	if err != nil {
		return fmt.Errorf("pair the applies with OpenSM's sweeps (see %s): %w", opensmLog, err)
	}
	for i := range res.quiet {
		res.quietOwn = append(res.quietOwn, res.quiet[i]-sweeps[2*i].up.Sub(sweeps[2*i].hup))
		res.duringOwn = append(res.duringOwn, res.during[i]-sweeps[2*i+1].up.Sub(sweeps[2*i+1].hup))
	}
	return nil
}

// auditRun is an audit that read to the end, as the manager logged it.
type auditRun struct {
	start time.Time
	took  time.Duration
}

// nextAudit waits for the manager to log an audit that ended after offset
// from, and returns it and the offset after its line.
func nextAudit(ctx context.Context, path string, from int64) (auditRun, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		a, next, ok, err := findAudit(path, from)
		if err != nil || ok {
			return a, next, err
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return a, from, fmt.Errorf("no audit ended within a minute (see %s): %w", path, err)
		}
	}
}

// findAudit is nextAudit's one read of the log.
func findAudit(path string, from int64) (a auditRun, next int64, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return a, from, false, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return a, from, false, err
	}
	rd := bufio.NewReader(f)
	next = from
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return a, from, false, nil // a line not yet whole is read again
		}
		next += int64(len(line))
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
			Took int64     `json:"took"`
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "audit finished" {
			took := time.Duration(l.Took)
			return auditRun{start: l.Time.Add(-took), took: took}, next, true, nil
		}
	}
}

// countLogLines counts the manager's log lines after offset from whose
// message is msg.
func countLogLines(path string, from int64, msg string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return 0, err
	}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		var l struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == msg {
			n++
		}
	}
	return n, sc.Err()
}

// sleep waits d (nothing when d is not positive), or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// auditRows are what the audit's full read costs a change sent during it.
func auditRows(add row, o options) {
	add(fmt.Sprintf("**8b. the audit and a change** (the defaults but audit_interval = %s): %d hosts, %d switches, %d "+
		"times a change between audits and one a tenth into an audit's read: the audit's full read, median / p95",
		auditBenchInterval, o.fabricHosts, o.fabricSwitches[len(o.fabricSwitches)-1], o.samples), "",
		func(r engineResult) string {
			if r.audit.err != nil {
				return "✗ not measured: " + r.audit.err.Error()
			}
			return ms(r.audit.read.median()) + " / " + ms(r.audit.read.quantile(0.95))
		})
	add("POST → Completed, between audits / during an audit's read, medians; audits that gave way to a change", "",
		func(r engineResult) string {
			return fmt.Sprintf("%s / %s; %d", ms(r.audit.quiet.median()), ms(r.audit.during.median()), r.audit.gaveWay)
		})
	add("the same less OpenSM's own sweep of each one's apply (SIGHUP → SUBNET UP by OpenSM's time stamp), between / during, "+
		"medians; the change's own reads (`verify`), median", "",
		func(r engineResult) string {
			return fmt.Sprintf("%s / %s; %s", ms(r.audit.quietOwn.median()), ms(r.audit.duringOwn.median()),
				ms(r.audit.verify.median()))
		})
	add("POST → its apply's start, between / during, medians / p95", "", func(r engineResult) string {
		return fmt.Sprintf("%s / %s; %s / %s", ms(r.audit.quietWait.median()), ms(r.audit.duringWait.median()),
			ms(r.audit.quietWait.quantile(0.95)), ms(r.audit.duringWait.quantile(0.95)))
	})
	add("what the audit's read makes a change wait: POST → its apply's start, during − between, medians",
		"≤ the change's own reads", func(r engineResult) string {
			d := r.audit.duringWait.median() - r.audit.quietWait.median()
			return fmt.Sprintf("%s %s", ms(d), mark(len(r.audit.duringWait) > 0 && d <= r.audit.verify.median()))
		})
}
