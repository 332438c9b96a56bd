package applier

import (
	"context"
	"encoding/json"
	"fmt"
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
// way, the term reads every host port's P_Key table and the switch port facing
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

// auditState is a term's state of the audit.
type auditState struct {
	due <-chan time.Time // the next audit; nil until the first wait
	// mu guards last for the background services' descriptions of the
	// held jobs (auditEvidence); the loop alone writes it (setAudit).
	mu sync.Mutex
	// last is the last audit as this term recorded or restored it, the
	// gates' evidence; nil: none.
	last *verdict.Audit
	// judged is last's verdict alone: its breaches and its per-port holds
	// (holds.go).
	judged    verdict.Verdict
	healed    string // the cut-off findings the state was last applied again for
	restarted string // the cut-off findings OpenSM was last restarted for
	// yieldedSince is when the audit first gave way to a change since it
	// last read to the end (yieldingAudit); zero: it has not.
	yieldedSince time.Time
}

// auditDue fires when the next audit is due; never without an audit. The
// first is due at once: the term's first idle turn, after its full apply.
func (t *term) auditDue() <-chan time.Time {
	if t.Cfg.Audit.Interval <= 0 || t.Cfg.Audit.Reader == nil {
		return nil
	}
	if t.audit.due == nil {
		t.audit.due = time.After(0)
	}
	return t.audit.due
}

// runAudit audits the fabric against the file OpenSM last applied, and acts
// on what it finds. It runs from the loop's idle turn only, so no apply is
// under way and the file is the one OpenSM swept. A change that arrives
// meanwhile (wake is the loop's) ends the read (yieldingAudit): the change
// is applied at once, and the audit reads again auditYieldRetry later.
func (t *term) runAudit(ctx context.Context, wake <-chan struct{}) {
	t.audit.due = time.After(t.Cfg.Audit.Interval)
	if t.applied < 0 || t.written == nil {
		// An apply is due (the tables are about to change): read soon after.
		t.audit.due = time.After(min(auditYieldRetry, t.Cfg.Audit.Interval))
		return
	}
	if t.fileEdited() {
		// OpenSM may have swept a hand-edited file. The drift repair names it
		// and writes the recorded state again; the audit still reads what
		// OpenSM swept (a breach it made is real while it lasts), and reads
		// again soon after the repair, so that the breach holds jobs only
		// until then.
		t.repairDrift(ctx)
		defer func() { t.audit.due = time.After(min(auditYieldRetry, t.Cfg.Audit.Interval)) }()
	}
	actx, yielded := t.yieldingAudit(ctx, wake)
	started := time.Now()
	s, err := t.auditOnce(actx)
	if err != nil && yielded() && ctx.Err() == nil {
		if t.audit.yieldedSince.IsZero() {
			t.audit.yieldedSince = time.Now()
		}
		retry := min(auditYieldRetry, t.Cfg.Audit.Interval)
		t.audit.due = time.After(retry)
		t.Log.Info("audit gave way to a change; reading the fabric again after its apply", "read_for", time.Since(started),
			"retry_in", retry)
		return
	}
	yielded()
	t.audit.yieldedSince = time.Time{}
	if obs, ok := t.observer().(AuditObserver); ok {
		obs.AuditFinished(s, err)
	}
	if err != nil {
		if ctx.Err() == nil {
			t.Log.Error("audit the fabric's P_Key tables", "error", err)
		}
		return
	}
	t.actOnAudit(ctx, s)
}

// auditYieldRetry is how long after giving way to a change the audit reads
// again (its interval, when shorter): a burst's changes arrive milliseconds
// apart, and each would end a read begun after the previous one's apply.
const auditYieldRetry = time.Second

// yieldingAudit is the context of an audit's read: cancelled once a change
// waits (the revision moved past the applied one, read at each wake-up of
// the loop's and every poll interval, as the idle loop reads it), so that a
// job never waits for the reads of every port of the fabric, only for its
// own. An audit that has given way for an interval already reads to the
// end: a fabric whose changes never stop is still audited at least every
// two intervals. yielded stops the watch and says whether it cancelled the
// read; call it once the read is over.
func (t *term) yieldingAudit(ctx context.Context, wake <-chan struct{}) (_ context.Context, yielded func() bool) {
	// Frozen, or held for a second SM, the loop applies no change: the
	// audit reads to the end.
	if t.notMaster() || !t.audit.yieldedSince.IsZero() && time.Since(t.audit.yieldedSince) >= t.Cfg.Audit.Interval {
		return ctx, func() bool { return false }
	}
	actx, cancel := context.WithCancel(ctx)
	applied := t.applied
	var changed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll := time.NewTicker(t.Cfg.PollInterval)
		defer poll.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-wake:
			case <-poll.C:
			}
			if rev, err := t.Store.Revision(actx); err == nil && rev != applied {
				changed.Store(true)
				cancel()
				return
			}
		}
	}()
	return actx, func() bool {
		cancel()
		<-done
		return changed.Load()
	}
}

// auditOnce reads and compares; the file and the owners are what the last
// apply wrote.
func (t *term) auditOnce(ctx context.Context) (audit.Summary, error) {
	dump := t.readDump()
	if dump.err != nil {
		return audit.Summary{}, fmt.Errorf("OpenSM's subnet dump: %w", dump.err)
	}
	return audit.Run(ctx, audit.Input{File: t.written, Revision: t.applied, Flavour: t.Cfg.Rules.Flavour,
		Owners: Owners(t.rendered), Topology: dump.topo, Reader: t.Cfg.Audit.Reader,
		CheckEnforcement: t.Cfg.Audit.CheckEnforcement})
}

// actOnAudit logs and records the findings, heals what applying again heals
// and sets the gate from the breaches.
func (t *term) actOnAudit(ctx context.Context, s audit.Summary) {
	for _, f := range s.Findings {
		level := t.Log.Warn
		if f.Breach() {
			level = t.Log.Error
		}
		level("audit: "+f.Text, "kind", f.Kind, "revision", s.Revision)
	}
	t.Log.Info("audit finished", "ports", s.Ports, "read", s.Read, "findings", len(s.Findings),
		"breaches", len(s.Breaches()), "took", s.Took)
	record := AuditRecord(t.id, s)
	if rec := t.Cfg.Audit.Recorder; rec != nil {
		if err := rec.RecordAudit(ctx, record); err != nil { // the term's: with its deadline (deadlineStore)
			t.Log.Error("record the audit's summary", "error", err)
		}
	}
	t.heal(ctx, s)
	// The gates judge the audit as recorded, as --status does: the same
	// findings, whether or not the record could be written.
	t.setAudit(verdict.AuditOf(record)) // holds.go
}

// heal applies the state again for ports cut off from their partitions, once
// for a given set of them: OpenSM's heavy sweep programs what its own view of
// the fabric lacks (a port it found again). Upstream OpenSM does not rewrite
// a table that was changed behind its back while its view says it is right
// (measured on the simulated fabric), so ports still cut off after that make
// it start again, once for a given set: a new OpenSM writes every table.
// Applying again at every audit would only sweep.
func (t *term) heal(ctx context.Context, s audit.Summary) {
	var cut []string
	for _, f := range s.Findings {
		if f.Heals() {
			cut = append(cut, f.Text)
		}
	}
	key := strings.Join(cut, "\n")
	switch {
	case len(cut) == 0:
		t.audit.restarted = ""
	case key != t.audit.healed:
		t.Log.Warn("audit: ports are cut off from their partitions; applying the recorded state again", "ports", len(cut))
		t.forget("the audit found ports cut off from their partitions")
	case key != t.audit.restarted && t.Cfg.Audit.RestartOpenSM != nil:
		t.Log.Warn("audit: ports are still cut off from their partitions after the state was applied again; "+
			"restarting OpenSM, which writes every port's table at its first sweep", "ports", len(cut), "first", cut[0])
		t.audit.restarted = key
		t.restartOpenSM(ctx)
	default:
		t.Log.Error("audit: ports are still cut off from their partitions after the state was applied again: "+
			"OpenSM does not rewrite a table it believes right; bounce the port's link or restart OpenSM "+
			"so that it programs the port again", "ports", len(cut), "first", cut[0])
	}
	t.audit.healed = key
}

// restartOpenSM restarts OpenSM for heal, within auditRestart, and applies
// the state again to the new one.
func (t *term) restartOpenSM(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, auditRestart)
	defer cancel()
	if err := t.Cfg.Audit.RestartOpenSM(ctx); err != nil {
		t.Log.Error("audit: restart OpenSM", "error", err)
	}
	t.forget("OpenSM was restarted for ports the audit found cut off")
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
	if rec == nil || t.auditDue() == nil {
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
