package applier

import (
	"maps"
	"slices"
	"strconv"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// The term's state machine (the package doc names its states and who may
// take its transitions). These methods are the only writers of the core
// fields: term.applied, term.reapply, gatekeeper.blocked and
// auditState.judged. Each runs in the term's loop goroutine; a background
// service asks for a transition through findings (services.go), which the
// loop takes at its next turn (takeReports).

// forget is "apply everything again": nothing this term applied counts as
// proven any more (OpenSM was restarted, the file drifted, the database was
// restored, the gates reopened, an audit found ports cut off, a completion
// failed, a freeze was lifted, a second SM went away). The jobs a sweep in
// flight would complete wait for the sweep after it (reapply, taken at the
// loop's next turn), and the jobs the gates held are judged again by that
// sweep: what held them is older than what made the term forget.
func (t *term) forget(why string) {
	t.Log.Info("applying the recorded state again", "why", why, "applied", t.applied, "term", t.id)
	t.applied, t.reapply = -1, true
	t.gate.blocked, t.gate.said = 0, ""
	t.gate.duplicates.unknown() // a restore, or a write cut short, may have put rows back
}

// takeForgotten is the loop's turn, or an apply's start, after a forget:
// the sweep that was in flight is judged (it completed nothing), so the
// state is due again, even where that sweep's end marked its revision
// applied; an apply that starts now is the one the forget asked for.
func (t *term) takeForgotten() {
	if t.reapply {
		t.applied, t.reapply = -1, false
	}
}

// markApplied records that OpenSM was seen applying rev (or that rev can
// never be applied and its jobs were failed): the loop applies again when
// the revision moves past it.
func (t *term) markApplied(rev int64) { t.applied = rev }

// keepApplied undoes the mark of a sweep that proved nothing of its own
// revision (a sweep that ended with errors): the revision applied before it
// stays the one applied, and the loop applies again after its back-off.
func (t *term) keepApplied(before int64) { t.applied = before }

// holdRevision keeps the jobs up to rev, whose sweep was proven, waiting for
// the verdict: every poll judges them again (pollGates).
func (t *term) holdRevision(rev int64) { t.gate.blocked = rev }

// releaseHold ends a hold: the verdict let the jobs complete.
func (t *term) releaseHold() { t.gate.blocked, t.gate.said, t.gate.reopened = 0, "", false }

// gatesReopened is the verdict opening while it held rev's jobs: the sweep
// that held them proves nothing (the fabric may have changed while a gate
// was closed), so the term forgets, and the jobs, saying said, complete
// after the next sweep.
func (t *term) gatesReopened(rev int64, said string) {
	t.forget("the gates opened while they held the jobs of revision " + strconv.FormatInt(rev, 10))
	t.gate.said, t.gate.reopened = said, true
}

// setAudit takes the last audit as the gates' evidence, with its verdict
// alone for the read-back's holds, and logs what changed of the holds
// (holds.go). The background services read the audit through auditEvidence.
func (t *term) setAudit(a *verdict.Audit) {
	judged := verdict.Judge(verdict.Evidence{Audit: a})
	held, was := judged.Held, t.heldPorts()
	for _, port := range slices.Sorted(maps.Keys(held)) {
		if _, ok := was[port]; !ok {
			t.Log.Error("audit: a host's own P_Key table lies while its switch port is right; holding that port's jobs only",
				"port", port, "finding", held[port])
		}
	}
	for _, port := range slices.Sorted(maps.Keys(was)) {
		if _, still := held[port]; !still {
			t.Log.Info("audit: the host port's table is right again; its jobs are no longer held", "port", port)
		}
	}
	t.audit.mu.Lock()
	t.audit.last, t.audit.judged = a, judged
	t.audit.mu.Unlock()
}
