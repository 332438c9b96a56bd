package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// The continuous audit: every AuditConfig.Interval, while no apply is under
// way (in the loop's idle turn, lent to the audit's service), the term reads every host port's P_Key table and the switch port facing
// each, and compares them with the file OpenSM last applied (internal/audit).
// Only the leader's term audits: only it knows which file OpenSM swept.
//
// What it finds is acted on at once: a port cut off from its partition makes
// the loop apply the state again, once for a given set of ports (heal says
// what that can and cannot repair); a breach (a foreign pkey, a full membership where the state
// says limited, a switch port not enforcing) closes a gate until an audit
// finds none: no job completes while a tenant may reach another.

// AuditConfig is the continuous audit's; its zero value audits nothing.
type AuditConfig struct {
	Interval time.Duration // 0: no audit
	// Reader reads the tables; nil: no audit.
	Reader *pkeyread.Reader
	// CheckEnforcement judges the switch ports' enforcement bits; off on a
	// fabric that does not report them (audit.Input).
	CheckEnforcement bool
	// Recorder keeps the last audit's summary for --status; nil: not kept.
	Recorder AuditRecorder
	// RestartOpenSM starts the manager's OpenSM again, returning once the
	// new one may be signalled: a new OpenSM has no copy of the ports'
	// tables and writes every one at its first sweep. nil: ports that stay
	// cut off after the state is applied again are only reported.
	RestartOpenSM func(ctx context.Context) error
}

// AuditRecorder keeps the last audit's summary (store.Store).
type AuditRecorder interface {
	RecordAudit(ctx context.Context, a store.Audit) error
	LastAudit(ctx context.Context) (a store.Audit, ok bool, err error)
}

// AuditObserver is told of every audit (metrics.Metrics); the Observer is
// asked for it, so observers that do not count audits need not say so.
type AuditObserver interface {
	AuditFinished(s audit.Summary, err error)
}

// auditState is a term's state of the audit: the verdict of the last one.
type auditState struct {
	// mu guards last for the background services' descriptions of the
	// held jobs (auditEvidence); the loop alone writes it (setAudit).
	mu sync.Mutex
	// last is the last audit as this term recorded or restored it, the
	// gates' evidence; nil: none.
	last *verdict.Audit
	// judged is last's verdict alone: its breaches and its per-port holds
	// (holds.go).
	judged verdict.Verdict
}

// auditOn says whether the term audits the fabric.
func (c *AuditConfig) auditOn() bool { return c.Interval > 0 && c.Reader != nil }

// auditor is the continuous audit, a service of the term (services.go): it
// reads in the loop's idle turn, so that no apply is under way and the file
// is the one OpenSM swept, and reports the verdict and the forgets it asks
// for when it gives the turn back.
type auditor struct {
	log      *slog.Logger
	cfg      *Config
	id       int64
	store    Store
	readDump func() dumpRead
	observer Observer
	drift    *driftRepair // run first on a hand-edited file
	desk     chan<- turnRequest

	healed    string // the cut-off findings the state was last applied again for
	restarted string // the cut-off findings OpenSM was last restarted for
	// yieldedSince is when the audit first gave way to a change since it
	// last read to the end (yieldingAudit); zero: it has not.
	yieldedSince time.Time
}

// newAuditor is the term's audit; d is the term's drift repair.
func (t *term) newAuditor(d *driftRepair) *auditor {
	desk, _ := t.turns.desks()
	return &auditor{log: t.Log, cfg: &t.Cfg, id: t.id, store: t.Store, readDump: t.readDump, observer: t.observer(),
		drift: d, desk: desk}
}

// auditService is the audit as the term's service; nil without an audit.
// The first audit is due at once: the loop lends its idle turn after the
// term's full apply.
func (t *term) auditService(d *driftRepair) *service {
	if !t.Cfg.Audit.auditOn() {
		return nil
	}
	a := t.newAuditor(d)
	return &service{name: "audit", log: t.Log, run: a.run}
}

// run audits, each time in the loop's idle turn, until ctx ends; the next
// audit is due its interval after the start of the last (sooner after one
// that gave way, or met a hand-edited file).
func (a *auditor) run(ctx context.Context) {
	due := time.NewTimer(0)
	defer due.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-due.C:
		}
		tv, giveBack, ok := borrowTurn(ctx, a.desk)
		if !ok {
			return
		}
		started := time.Now()
		back := sync.OnceFunc(giveBack) // the audit may give it back when a change comes
		next := a.runAudit(ctx, tv, back)
		back()
		due.Reset(max(0, next-time.Since(started)))
	}
}

// runAudit audits the fabric against the file OpenSM last applied (tv), and
// acts on what it finds; it returns when the next audit is due, from this
// one's start. A change that arrives meanwhile (tv.wake) ends the read
// (yieldingAudit), and the turn goes back to the loop then (giveBack, which
// the caller may call again: once is what counts), before the read has
// drained: the change is applied at once, and the audit reads again
// auditYieldRetry later.
func (a *auditor) runAudit(ctx context.Context, tv *idleTurn, giveBack func()) (next time.Duration) {
	soon := min(auditYieldRetry, a.cfg.Audit.Interval)
	if tv.applied < 0 || tv.written == nil {
		return soon // an apply is due (the tables are about to change): read soon after
	}
	next = a.cfg.Audit.Interval
	if a.drift.fileEdited(tv.written) {
		// OpenSM may have swept a hand-edited file. The drift repair names it
		// and writes the recorded state again; the audit still reads what
		// OpenSM swept (a breach it made is real while it lasts), and reads
		// again soon after the repair, so that the breach holds jobs only
		// until then.
		a.drift.repair(ctx, tv)
		next = soon
	}
	actx, yielded := a.yieldingAudit(ctx, tv, giveBack)
	started := time.Now()
	s, err := a.auditOnce(actx, tv)
	if gaveWay := yielded(); !gaveWay.IsZero() {
		// The turn is the loop's again (tv is no longer the audit's): this
		// read, cut short or not, judges and records nothing. drained is
		// how long the read took to end after that, beside the change.
		if ctx.Err() == nil {
			if a.yieldedSince.IsZero() {
				a.yieldedSince = time.Now()
			}
			a.log.Info("audit gave way to a change; reading the fabric again after its apply",
				"read_for", gaveWay.Sub(started), "drained", time.Since(gaveWay), "retry_in", soon)
		}
		return soon
	}
	a.yieldedSince = time.Time{}
	if obs, ok := a.observer.(AuditObserver); ok {
		obs.AuditFinished(s, err)
	}
	if err != nil {
		if ctx.Err() == nil {
			a.log.Error("audit the fabric's P_Key tables", "error", err)
		}
		return next
	}
	a.actOnAudit(ctx, tv, s)
	return next
}

// auditYieldRetry is how long after giving way to a change the audit reads
// again (its interval, when shorter): a burst's changes arrive milliseconds
// apart, and each would end a read begun after the previous one's apply.
const auditYieldRetry = time.Second

// yieldingAudit is the context of an audit's read: cancelled once a change
// waits (a wake-up of the loop's during the read, or the revision moved
// past the applied one, read every poll interval, as the idle loop reads
// it), so that a job never waits for the reads of every port of the
// fabric, only for its own. The watch gives the turn back (giveBack) as it cancels: the change's
// apply starts while the read drains (the SMPs under way answered, their
// connections closed), which it needs nothing of: the audit reads on
// connections of its own, sends no SMP once cancelled, and writes nothing
// of a read that gave way. An audit that has given way for an interval
// already reads to the end: a fabric whose changes never stop is still
// audited at least every two intervals. yielded stops the watch and says
// when it gave the turn back (zero: it did not), after which the audit must
// not touch the turn (tv) again; call it once the read is over. A read that ended just as
// a change came is the watch's or the audit's, never both: whichever
// claims it first (turn).
func (a *auditor) yieldingAudit(ctx context.Context, tv *idleTurn, giveBack func()) (_ context.Context, yielded func() time.Time) {
	// Frozen, or held for a second SM, the loop applies no change: the
	// audit reads to the end.
	if tv.notMaster || !a.yieldedSince.IsZero() && time.Since(a.yieldedSince) >= a.cfg.Audit.Interval {
		return ctx, func() time.Time { return time.Time{} }
	}
	actx, cancel := context.WithCancel(ctx)
	applied := tv.applied
	const reading, gaveWay, readToEnd = 0, 1, 2
	var turn atomic.Int32
	var gaveWayAt time.Time // written before done closes
	done := make(chan struct{})
	giveWay := func() {
		if turn.CompareAndSwap(reading, gaveWay) {
			cancel()
			gaveWayAt = time.Now()
			giveBack()
		}
	}
	go func() {
		defer close(done)
		poll := time.NewTicker(a.cfg.PollInterval)
		defer poll.Stop()
		// A wake-up from before the read may be the term's own commit (a
		// job completed): the revision says whether a change waits.
		var check bool
		select {
		case <-tv.wake:
			check = true
		default:
		}
		for {
			if check {
				if rev, err := a.store.Revision(actx); err == nil && rev != applied {
					giveWay()
					return
				}
			}
			select {
			case <-actx.Done():
				return
			case <-tv.wake:
				// During the read a wake-up is a change committed (the
				// loop, lent out, commits nothing; one follows a change
				// transaction, or PostgreSQL's notice of a revision):
				// the loop reads the revision itself, so the watch does
				// not read it on the change's path. A request that
				// changed nothing costs this read, read again
				// auditYieldRetry later as after any change.
				giveWay()
				return
			case <-poll.C:
				check = true // another process's change wakes nobody here
			}
		}
	}()
	return actx, func() time.Time {
		turn.CompareAndSwap(reading, readToEnd)
		cancel()
		<-done
		return gaveWayAt
	}
}

// auditOnce reads and compares; the file and the owners are what the last
// apply wrote.
func (a *auditor) auditOnce(ctx context.Context, tv *idleTurn) (audit.Summary, error) {
	dump := a.readDump()
	if dump.err != nil {
		return audit.Summary{}, fmt.Errorf("OpenSM's subnet dump: %w", dump.err)
	}
	return audit.Run(ctx, audit.Input{File: tv.written, Revision: tv.applied, Flavour: a.cfg.Rules.Flavour,
		Owners: tv.owners, Topology: dump.topo, Reader: a.cfg.Audit.Reader,
		CheckEnforcement: a.cfg.Audit.CheckEnforcement})
}

// actOnAudit logs and records the findings, heals what applying again heals
// and gives the term the breaches as its evidence (tv).
func (a *auditor) actOnAudit(ctx context.Context, tv *idleTurn, s audit.Summary) {
	for _, f := range s.Findings {
		level := a.log.Warn
		if f.Breach() {
			level = a.log.Error
		}
		level("audit: "+f.Text, "kind", f.Kind, "revision", s.Revision)
	}
	a.log.Info("audit finished", "ports", s.Ports, "read", s.Read, "findings", len(s.Findings),
		"breaches", len(s.Breaches()), "took", s.Took)
	record := AuditRecord(a.id, s)
	if rec := a.cfg.Audit.Recorder; rec != nil {
		if err := rec.RecordAudit(ctx, record); err != nil { // the term's: with its deadline (deadlineStore)
			a.log.Error("record the audit's summary", "error", err)
		}
	}
	a.heal(ctx, tv, s)
	// The gates judge the audit as recorded, as --status does: the same
	// findings, whether or not the record could be written.
	tv.audit = verdict.AuditOf(record) // the term's setAudit (holds.go)
}

// heal applies the state again for ports cut off from their partitions, once
// for a given set of them: OpenSM's heavy sweep programs what its own view of
// the fabric lacks (a port it found again). Upstream OpenSM does not rewrite
// a table that was changed behind its back while its view says it is right
// (measured on the simulated fabric), so ports still cut off after that make
// it start again, once for a given set: a new OpenSM writes every table.
// Applying again at every audit would only sweep.
func (a *auditor) heal(ctx context.Context, tv *idleTurn, s audit.Summary) {
	var cut []string
	for _, f := range s.Findings {
		if f.Heals() {
			cut = append(cut, f.Text)
		}
	}
	key := strings.Join(cut, "\n")
	switch {
	case len(cut) == 0:
		a.restarted = ""
	case key != a.healed:
		a.log.Warn("audit: ports are cut off from their partitions; applying the recorded state again", "ports", len(cut))
		tv.forget("the audit found ports cut off from their partitions")
	case key != a.restarted && a.cfg.Audit.RestartOpenSM != nil:
		a.log.Warn("audit: ports are still cut off from their partitions after the state was applied again; "+
			"restarting OpenSM, which writes every port's table at its first sweep", "ports", len(cut), "first", cut[0])
		a.restarted = key
		a.restartOpenSM(ctx, tv)
	default:
		a.log.Error("audit: ports are still cut off from their partitions after the state was applied again: "+
			"OpenSM does not rewrite a table it believes right; bounce the port's link or restart OpenSM "+
			"so that it programs the port again", "ports", len(cut), "first", cut[0])
	}
	a.healed = key
}

// restartOpenSM restarts OpenSM for heal, within auditRestart, and asks the
// term to apply the state again to the new one.
func (a *auditor) restartOpenSM(ctx context.Context, tv *idleTurn) {
	ctx, cancel := context.WithTimeout(ctx, auditRestart)
	defer cancel()
	if err := a.cfg.Audit.RestartOpenSM(ctx); err != nil {
		a.log.Error("audit: restart OpenSM", "error", err)
	}
	tv.forget("OpenSM was restarted for ports the audit found cut off")
}

// auditRestart bounds a restart: OpenSM's stop, the supervisor's back-off and
// the new one's start.
const auditRestart = time.Minute

// Owners names each network's partition by the network, for an audit's
// findings (the leader's and --audit's): the file names it by pkey and id
// only.
func Owners(snap store.Snapshot) map[uint16]string {
	names := map[uint16]string{}
	for _, n := range snap.Networks {
		if n.Managed && n.PKey != nil {
			names[uint16(*n.PKey)&0x7fff] = fmt.Sprintf("network %s (%s)", n.Name, n.ID)
		}
	}
	return names
}

// maxRecordedFindings bounds the findings an audit's record lists (its
// counts are of all of them): a fabric-wide fault (the default partition
// gone from every port) must not make a row of megabytes at every audit.
const maxRecordedFindings = 200

// AuditRecord is the database's record of an audit by term (--audit
// records its own audits the same way, term 0 aside).
func AuditRecord(term int64, s audit.Summary) store.Audit {
	rec := store.Audit{Term: term, Revision: s.Revision, StartedAt: s.Started, Took: s.Took,
		Findings: int64(len(s.Findings)), Breaches: int64(len(s.Breaches()))}
	kept := s
	// Breaches first, so the ones kept are the ones a gate names, then the
	// per-port holds, which a new term restores too.
	kept.Findings = append(s.Breaches(), hostOnly(s.Findings, true)...)
	kept.Findings = append(kept.Findings, hostOnly(nonBreaches(s.Findings), false)...)
	kept.Findings = kept.Findings[:min(len(kept.Findings), maxRecordedFindings)]
	rec.Summary, _ = json.Marshal(kept) // of plain values: cannot fail
	return rec
}

// hostOnly are the findings whose HostOnly is want.
func hostOnly(findings []audit.Finding, want bool) []audit.Finding {
	var out []audit.Finding
	for _, f := range findings {
		if f.HostOnly == want {
			out = append(out, f)
		}
	}
	return out
}

func nonBreaches(findings []audit.Finding) []audit.Finding {
	var out []audit.Finding
	for _, f := range findings {
		if !f.Breach() {
			out = append(out, f)
		}
	}
	return out
}

// loadAudit starts the term's gate from the last recorded audit: breaches a
// previous term (this manager before a restart, or another leader) found keep
// jobs from completing until this term's first audit finds the fabric clean.
// Without an audit configured nothing would ever clear them, so none is
// loaded.
func (t *term) loadAudit(ctx context.Context) {
	rec := t.Cfg.Audit.Recorder
	if rec == nil || !t.Cfg.Audit.auditOn() {
		return
	}
	last, ok, err := rec.LastAudit(ctx)
	if err != nil {
		t.Log.Error("read the last audit; its breaches are found again by this term's first audit", "error", err)
		return
	}
	if !ok {
		return
	}
	if !json.Valid(last.Summary) {
		t.Log.Error("read the last audit's summary: not JSON; its count of breaches stands")
	}
	t.setAudit(verdict.AuditOf(last)) // holds.go
	if last.Breaches == 0 {
		return
	}
	t.Log.Warn("the last fabric audit found breaches; jobs wait for an audit that finds none",
		"audited", last.StartedAt, "breaches", last.Breaches)
}
