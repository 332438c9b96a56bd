package applier

import (
	"context"
	"log/slog"
	"sync"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// A cloned GUID: a tenant that rewrites its HCA's node GUID to another
// host's makes OpenSM find one GUID behind two switch ports. OpenSM logs
// ERR 0D01 and starts its heavy sweep again at once, hundreds of times a
// second, and never reaches SUBNET UP while the clone lasts (with
// exit_on_fatal TRUE or FALSE alike: docs/opensm-hardening.md): nothing the
// manager applies is swept, on any port. The gate duplicate_guid says so,
// naming the GUID and the switch ports it was seen behind, in --status, in
// every held job and in afm_gate_closed: a fabric-wide gate, since no apply
// can be proven while OpenSM cannot bring the subnet up.
//
// The term's tail hands every entry to duplicateLog.observe; the term
// records what it collected at each read of the log (the gates' polls and the
// sweeps' waits), summed per GUID: the loop logs hundreds of entries a
// second, the database gets one row a GUID whose count grows. The gate clears
// once a heavy sweep reaches SUBNET UP without an ERR 0D01 or 0D15 in it:
// OpenSM checks every node's GUID at every heavy sweep, so that sweep found
// the fabric without the clone.

// DuplicateStore records the duplicated GUIDs (store.Store).
type DuplicateStore interface {
	RecordDuplicateGUIDs(ctx context.Context, term int64, seen []store.DuplicateSighting) error
	ClearDuplicateGUIDs(ctx context.Context, term int64) (int64, error)
	DuplicateGUIDs(ctx context.Context) ([]store.DuplicateGUID, error)
}

// duplicateLog collects what the tail handed out until it is recorded.
type duplicateLog struct {
	mu      sync.Mutex // observe runs in whichever goroutine pumps the tail
	pending map[string]*store.DuplicateSighting
	order   []string // pending's GUIDs, as first seen
	// clear: a heavy sweep reached SUBNET UP without a duplicate since the
	// last record; what is recorded is forgotten before pending is recorded.
	clear   bool
	inSweep bool // a duplicate was logged in the heavy sweep under way
	// recorded is what the database holds, as this term last wrote or read
	// it: the gate's reason in finish, which must not read it again.
	recorded []store.DuplicateGUID
	// known: recorded is what the database holds, read by this term since
	// its last write (only the term's leader writes it, fenced). A clean
	// sweep then clears nothing when it holds none: the clear and the read
	// back cost two round trips at every apply.
	known bool
}

// observe is the tail's handler.
func (l *duplicateLog) observe(e opensm.Entry) {
	start, up := opensm.SweepMark(e)
	d, dup := opensm.ParseDuplicateGUID(e)
	if !start && !up && !dup {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case start:
		l.inSweep = false
	case up && !l.inSweep:
		l.clear, l.pending, l.order = true, nil, nil
	case dup:
		l.inSweep = true
		l.add(d)
	}
}

// add sums d into pending.
func (l *duplicateLog) add(d opensm.DuplicateGUID) {
	if l.pending == nil {
		l.pending = map[string]*store.DuplicateSighting{}
	}
	p := l.pending[d.GUID]
	if p == nil {
		p = &store.DuplicateSighting{GUID: d.GUID, Kind: d.Kind}
		l.pending[d.GUID] = p
		l.order = append(l.order, d.GUID)
	}
	p.Count++
	p.Line = d.Line
	if len(d.Places) > 0 {
		p.Places = d.Places
	}
}

// unrecorded says whether the tail handed out what is not recorded yet: a
// duplicate, or a clean sweep's clearing.
func (l *duplicateLog) unrecorded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.clear || len(l.order) > 0
}

// take hands out what to record, and forgets it: put gives it back when the
// record failed.
func (l *duplicateLog) take() (clear bool, seen []store.DuplicateSighting) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.order {
		seen = append(seen, *l.pending[g])
	}
	clear = l.clear
	l.clear, l.pending, l.order = false, nil, nil
	return clear, seen
}

// put gives back what take handed out, under what was observed since.
func (l *duplicateLog) put(clear bool, seen []store.DuplicateSighting) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clear {
		return // a clean sweep since: what was taken is stale
	}
	l.clear = l.clear || clear
	later, order := l.pending, l.order
	l.pending, l.order = nil, nil
	for _, s := range seen {
		l.addSighting(s)
	}
	for _, g := range order {
		l.addSighting(*later[g])
	}
}

func (l *duplicateLog) addSighting(s store.DuplicateSighting) {
	if l.pending == nil {
		l.pending = map[string]*store.DuplicateSighting{}
	}
	p := l.pending[s.GUID]
	if p == nil {
		p = &store.DuplicateSighting{GUID: s.GUID, Kind: s.Kind}
		l.pending[s.GUID] = p
		l.order = append(l.order, s.GUID)
	}
	p.Count += s.Count
	p.Line = s.Line
	if len(s.Places) > 0 {
		p.Places = s.Places
	}
}

// record clears and records what was observed since the last record, then
// reads back what the database holds for the gate. What could not be
// written is kept for the next call.
func (l *duplicateLog) record(ctx context.Context, term int64, st DuplicateStore, log *slog.Logger) error {
	clear, seen := l.take()
	if !clear && len(seen) == 0 || len(seen) == 0 && l.holdsNone() {
		return nil
	}
	l.mu.Lock()
	l.known = false // until read back: a write may fail half-way
	l.mu.Unlock()
	if clear {
		if _, err := st.ClearDuplicateGUIDs(ctx, term); err != nil {
			l.put(clear, seen)
			return err
		}
	}
	if err := st.RecordDuplicateGUIDs(ctx, term, seen); err != nil {
		l.put(false, seen)
		return err
	}
	recorded, err := st.DuplicateGUIDs(ctx)
	if err != nil {
		return err // the next record reads again; the gate keeps its last view
	}
	if clear && len(seen) == 0 && len(l.view()) > 0 {
		log.Info("OpenSM swept to SUBNET UP without a duplicated GUID; the gate duplicate_guid is open")
	}
	for _, s := range seen {
		log.Error("OpenSM found a GUID twice on the fabric (a cloned GUID?); no job completes until a sweep comes up without it",
			"guid", s.GUID, "kind", s.Kind, "places", s.Places, "entries", s.Count, "line", s.Line)
	}
	l.mu.Lock()
	l.recorded, l.known = recorded, true
	l.mu.Unlock()
	return nil
}

// unknown forgets that recorded is what the database holds: the next clean
// sweep clears the table and reads it back (after a restore, say, which may
// have put a duplicate's rows back).
func (l *duplicateLog) unknown() {
	l.mu.Lock()
	l.known = false
	l.mu.Unlock()
}

// holdsNone says whether the database is known to hold no duplicate.
func (l *duplicateLog) holdsNone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.known && len(l.recorded) == 0
}

// view is what the database holds, as last written or read.
func (l *duplicateLog) view() []store.DuplicateGUID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recorded
}

// load reads what the database holds, at a term's start: a new leader holds
// jobs for the duplicates its predecessor recorded until a sweep clears them.
func (l *duplicateLog) load(ctx context.Context, st DuplicateStore) error {
	recorded, err := st.DuplicateGUIDs(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.recorded, l.known = recorded, true
	l.mu.Unlock()
	return nil
}

// DuplicateGUIDText starts the reason given while duplicated GUIDs are recorded.
const DuplicateGUIDText = verdict.DuplicateGUIDText

// duplicateReason is the term's gate reason, from what it last recorded.
func (t *term) duplicateReason() []GateReason {
	return verdict.Judge(verdict.Evidence{Duplicates: t.gate.duplicates.view()}).Of(GateDuplicateGUID)
}

// recordDuplicates records what the tail has handed out so far.
func (t *term) recordDuplicates(ctx context.Context) {
	if err := t.gate.duplicates.record(ctx, t.id, t.Store, t.Log); err != nil {
		t.Log.Error("record duplicated GUIDs", "error", err)
	}
}
