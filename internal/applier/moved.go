package applier

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// A moved GUID: a tenant that takes the GUID of a host that is down (or
// unplugged) makes no duplicate OpenSM could see: the GUID just appears
// behind another switch port, OpenSM sweeps to SUBNET UP, and the partitions
// the manager gave that GUID follow it there: the switch port facing the
// clone now enforces the victim's pkeys. That is an isolation breach on the
// switch side, not only the tenant's problem, so it is the fabric-wide gate
// duplicate_guid, as OpenSM's ERR 0D01 is.
//
// The leader records, at each sweep that applied a state, the switch port
// each port GUID of the state's partitions is behind in OpenSM's subnet dump
// the first time it finds it there (store.GUIDPlace), and, for a recorded
// GUID, the switch port it is seen behind instead. The mark stays while the
// GUID is off the fabric: a clone that flaps its link does not open the gate
// in its down times. It is cleared once the GUID is seen behind its recorded
// switch port again, or by an operator's --accept-moved-guid (a host
// recabled, an HCA moved to another host), which records where the GUID is
// now.
//
// Kubernetes members are not recorded: their GUIDs are the virtual
// functions' that ib-kubernetes gives pods, and move from node to node with
// them.

// PlaceStore records the GUIDs' switch ports (store.Store).
type PlaceStore interface {
	RecordGUIDPlaces(ctx context.Context, term int64, seen []store.GUIDPlaceUpdate) ([]store.GUIDPlace, error)
	AddGUIDPlaces(ctx context.Context, term int64, news []store.GUIDPlaceUpdate) (int64, error)
	GUIDPlaces(ctx context.Context) ([]store.GUIDPlace, error)
}

// MovedGUIDText starts the reason given while a GUID is behind another switch
// port than its recorded one (verdict.MovedGUIDText).
const MovedGUIDText = verdict.MovedGUIDText

// movedReasons is the verdict's reason for the recorded places and a read of
// the subnet dump (nil: not read).
var movedReasons = verdict.MovedReasons

// seenAt and placeOf are the verdict's: the record and the gate compare alike.
var (
	seenAt  = verdict.SeenAt
	placeOf = verdict.PlaceOf
)

// placeUpdates is what to record of a dump: the first place of each GUID of
// guids found in it and not recorded yet, and for a recorded GUID found in
// it, the switch port it is behind instead of its own (or "" when it is back
// at its own), where that changes the row.
func placeUpdates(places []store.GUIDPlace, topo *topology.Topology, guids []fabric.GUID) []store.GUIDPlaceUpdate {
	if topo == nil {
		return nil
	}
	recorded := make(map[fabric.GUID]bool, len(places))
	var out []store.GUIDPlaceUpdate
	for _, p := range places {
		recorded[p.GUID] = true
		at, ok := seenAt(topo, p.GUID)
		if !ok {
			continue // off the fabric: a mark stays, none is made
		}
		movedTo := ""
		if at != placeOf(p) {
			movedTo = at.String()
		}
		if movedTo != p.MovedTo {
			out = append(out, store.GUIDPlaceUpdate{GUID: p.GUID, Switch: p.Switch, Port: p.Port, MovedTo: movedTo})
		}
	}
	for _, g := range guids {
		if recorded[g] {
			continue
		}
		if sw, port, ok := topo.HostPort(g); ok {
			recorded[g] = true
			out = append(out, store.GUIDPlaceUpdate{GUID: g, Switch: sw, Port: port, New: true})
		}
	}
	return out
}

// placedGUIDs are the port GUIDs whose places are recorded: every one the
// state puts in a network's, the flat or an adopted partition, sorted.
func placedGUIDs(st partitions.State) []fabric.GUID {
	var guids []fabric.GUID
	for _, n := range st.Networks {
		guids = append(guids, n.Members...)
	}
	guids = append(guids, st.Flat.Members...)
	for _, a := range st.Adopted {
		for _, m := range a.Members {
			if m.Keyword == "" {
				guids = append(guids, m.GUID)
			}
		}
	}
	slices.Sort(guids)
	return slices.Compact(guids)
}

// anyMarked says whether a place is marked moved: its mark is to be cleared
// or kept, never skipped.
func anyMarked(places []store.GUIDPlace) bool {
	for _, p := range places {
		if p.MovedTo != "" {
			return true
		}
	}
	return false
}

// placeWatch is the term's view of the recorded places.
type placeWatch struct {
	places []store.GUIDPlace // as last recorded or read
	read   bool              // places holds what the database held
	// what the last record compared: while the dump's content, the state and
	// the places are the same and no GUID is moved or marked, there is
	// nothing to write or read again (an operator's accept changes only a
	// moved GUID).
	topo     *topology.Topology
	revision int64
}

// recordPlaces records what the dump says of the state's GUIDs and returns
// the places the gate judges. An error (the database could not be written or
// read) leaves the term's view as it was: the caller completes nothing.
func (t *term) recordPlaces(ctx context.Context, st partitions.State, dump dumpRead) ([]store.GUIDPlace, error) {
	w := &t.gate.places
	if w.read && dump.topo != nil && dump.topo == w.topo && st.Revision == w.revision && !anyMarked(w.places) &&
		len(movedReasons(w.places, dump.topo)) == 0 {
		return w.places, nil
	}
	places := w.places
	if !w.read {
		var err error
		if places, err = t.Store.GUIDPlaces(ctx); err != nil {
			return nil, err
		}
	}
	updates := placeUpdates(places, dump.topo, placedGUIDs(st))
	var err error
	switch moved := len(movedReasons(places, dump.topo)) > 0; {
	case !moved && len(updates) > 0 && allNew(updates):
		places, err = t.addPlaces(ctx, places, updates)
	case moved || len(updates) > 0:
		// Written, or read again: a move an operator accepted is seen.
		places, err = t.Store.RecordGUIDPlaces(ctx, t.id, updates)
	}
	if err != nil {
		return nil, err
	}
	for _, u := range updates {
		if !u.New && u.MovedTo != "" {
			t.Log.Error(MovedGUIDText, "guid", u.GUID.String(), "recorded", fmt.Sprintf("%s:%d", u.Switch, u.Port),
				"seen", u.MovedTo)
		}
	}
	*w = placeWatch{places: places, read: true, topo: dump.topo, revision: st.Revision}
	return places, nil
}

// allNew says whether every update is a first place.
func allNew(updates []store.GUIDPlaceUpdate) bool {
	for _, u := range updates {
		if !u.New {
			return false
		}
	}
	return true
}

// addPlaces records first places (nothing moved, nothing marked) and returns
// places with them, by GUID, without reading every place back: a change that
// brings a host costs one small write. Should fewer be recorded than given
// (a GUID an operator accepted meanwhile, or this term deposed), the places
// are read back instead.
func (t *term) addPlaces(ctx context.Context, places []store.GUIDPlace, news []store.GUIDPlaceUpdate) ([]store.GUIDPlace, error) {
	n, err := t.Store.AddGUIDPlaces(ctx, t.id, news)
	if err != nil {
		return nil, err
	}
	if n != int64(len(news)) {
		return t.Store.GUIDPlaces(ctx)
	}
	out := slices.Clone(places)
	now := time.Now().UTC()
	for _, u := range news {
		out = append(out, store.GUIDPlace{GUID: u.GUID, Switch: u.Switch, Port: u.Port, RecordedAt: now})
	}
	slices.SortFunc(out, func(a, b store.GUIDPlace) int { return cmp.Compare(a.GUID, b.GUID) })
	return out, nil
}
