package applier

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Host ports that did not take OpenSM's Sets. A tenant that owns its host
// can make its HCA drop OpenSM's P_KeyTable MADs, or answer them with errors:
// only the jobs with a place on that port wait or fail (attribution.go,
// readback.go), and the port is named here, recorded in the database for
// the metrics (afm_port_sets_failed) and an alert, whichever manager is
// scraped, and kept across a new term or leader until a sweep clears it.
//
// The evidence is each sweep the applier watched:
//   - a sweep that came up (SUBNET UP) answered every Set it sent: the ports
//     recorded become the host ports its pkey error lines name (a switch
//     port facing a host port names that host port), none when it was clean;
//   - a sweep that ended with "Errors during initialization" names no port
//     in its log (OpenSM logs the MAD, not where it went): the ports recorded
//     gain those its pkey error lines name and, with verify = tables, the
//     ports of waiting jobs that were in OpenSM's subnet dump but whose
//     tables, read after it, did not show what the applied file gives them
//     or did not answer. A port that is down, not yet swept, or not read
//     within the bound is not named: nothing says it dropped a Set.
//
// A port no open job touches is not read after a failed sweep: the audit
// finds it (an unreachable port, a missing pkey).

// SetFailureStore is what the applier records the ports in (store.Store).
type SetFailureStore interface {
	RecordSetFailures(ctx context.Context, term int64, ports []store.SetFailure) error
	SetFailures(ctx context.Context) ([]store.SetFailure, error)
}

// setFailures is the term's copy of the recorded ports.
type setFailures struct {
	known bool                      // ports is what the database holds
	ports map[fabric.GUID]time.Time // each port and since when
}

// loadSetFailures reads the recorded ports at the term's start, so that a
// sweep that finds what was recorded writes nothing.
func (t *term) loadSetFailures(ctx context.Context) {
	recorded, err := t.Store.SetFailures(ctx)
	if err != nil {
		t.Log.Error("read the ports that did not take OpenSM's Sets; the next sweep records them again", "error", err)
		return
	}
	t.sets = setFailures{known: true, ports: map[fabric.GUID]time.Time{}}
	for _, p := range recorded {
		t.sets.ports[p.Port] = p.Since
	}
}

// noteSweepSets records what the sweep res says of the ports' Sets (see the
// top of this file); unset are the ports the read after it found on the
// fabric but not as the file gives them (readback.go), for a failed sweep.
func (t *term) noteSweepSets(ctx context.Context, res opensm.SweepResult, unset map[fabric.GUID]bool) {
	named := t.linePorts(res.PKeyErrors)
	next := map[fabric.GUID]time.Time{}
	switch res.Outcome {
	case opensm.Applied:
	case opensm.Failed:
		maps.Copy(next, t.sets.ports)
		for p := range unset {
			named[p] = true
		}
	default:
		return // the sweep says nothing of the Sets
	}
	now := time.Now().UTC()
	for p := range named {
		if _, was := next[p]; was {
			continue
		}
		next[p] = now
		if since, was := t.sets.ports[p]; was {
			next[p] = since
		}
	}
	t.recordSetFailures(ctx, next)
}

// recordSetFailures records next as the ports, unless the database holds
// them already, and logs what changed.
func (t *term) recordSetFailures(ctx context.Context, next map[fabric.GUID]time.Time) {
	if t.sets.known && maps.Equal(next, t.sets.ports) {
		return
	}
	rows := make([]store.SetFailure, 0, len(next))
	for _, p := range slices.Sorted(maps.Keys(next)) {
		rows = append(rows, store.SetFailure{Port: p, Since: next[p]})
	}
	if err := t.Store.RecordSetFailures(ctx, t.id, rows); err != nil {
		if ctx.Err() == nil {
			t.Log.Error("record the ports that did not take OpenSM's Sets; the next sweep records them again", "error", err)
		}
		t.sets.known = false
		return
	}
	for _, p := range slices.Sorted(maps.Keys(next)) {
		if _, was := t.sets.ports[p]; !was {
			t.Log.Error("a host port did not take OpenSM's Sets; only its jobs wait or fail", "port", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(t.sets.ports)) {
		if _, still := next[p]; !still {
			t.Log.Info("a sweep came up without an error naming the host port; no longer named as not taking OpenSM's Sets",
				"port", p)
		}
	}
	t.sets = setFailures{known: true, ports: next}
}

// linePorts are the host ports the pkey error lines name; a line that names
// none, or a port the subnet dump does not know, names nothing here
// (attribute says so when it fails jobs).
func (t *term) linePorts(lines []string) map[fabric.GUID]bool {
	ports := map[fabric.GUID]bool{}
	if len(lines) == 0 {
		return ports
	}
	topo, err := t.subnetDump().Load()
	if err != nil {
		return ports
	}
	for _, l := range lines {
		if p, res := placeLine(topo, l); res == linePlaced {
			ports[p.port] = true
		}
	}
	return ports
}

// unsetPorts are the ports of a read whose tables did not show a want, or
// that did not answer: the read reached them (they were in the subnet dump,
// with a LID that answers as them) and the bound did not cut them off.
func unsetPorts(results []pkeyread.Result, verdicts map[pkeyread.Want]string) map[fabric.GUID]bool {
	read := make(map[fabric.GUID]error, len(results))
	for _, r := range results {
		read[r.Target.Port] = r.Err
	}
	unset := map[fabric.GUID]bool{}
	for w, reason := range verdicts {
		err, ok := read[w.Port]
		switch {
		case !ok || reason == "":
		case errors.Is(err, pkeyread.ErrNotRead), errors.Is(err, pkeyread.ErrNoLID), errors.Is(err, pkeyread.ErrMoved):
			// Not the port's doing: not read within the bound, not swept
			// yet, or another port at its LID.
		default:
			unset[w.Port] = true
		}
	}
	return unset
}
