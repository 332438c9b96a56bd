package store

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A job's proof obligation: the places its change touches, recorded with the
// job in the change's transaction, and what each must hold once the change is
// applied. The read-back proof ([opensm] verify = tables) reads exactly these
// places, whatever the applier remembers: a new term, a restart, a gate that
// reopened or a pkey error elsewhere in the sweep change nothing of what a job
// must show before it completes.

// Want is what a place must hold once its job's change is applied.
type Want string

const (
	WantFull    Want = "full"    // the port is a full member of the pkey
	WantLimited Want = "limited" // a limited member
	WantAbsent  Want = "absent"  // the port's table (and its switch port's) no longer holds the pkey
)

// Place is one host port and one pkey of its table that a job's change
// touches, with what the change promises there. The switch port facing the
// host port is read with it and must agree.
type Place struct {
	GUID fabric.GUID
	PKey fabric.PKey
	Want Want
}

func (p Place) String() string {
	return fmt.Sprintf("port %s, pkey %s: %s", p.GUID, p.PKey, p.Want)
}

// rank orders what a change may promise at one place: a place the change
// both empties and fills (a port moving within the flat pkey, an adopted
// member its new owner keeps in the pkey) holds what the owner gives it.
func (w Want) rank() int {
	switch w {
	case WantFull:
		return 2
	case WantLimited:
		return 1
	}
	return 0
}

// wantOf is what a membership promises.
func wantOf(m fabric.Membership) Want {
	if m == fabric.Limited {
		return WantLimited
	}
	return WantFull
}

// placeKey is a place less what it promises: a job lists each once.
type placeKey struct {
	guid fabric.GUID
	pkey fabric.PKey
}

// promised is a change's places as it states them, each (GUID, pkey) once.
type promised struct {
	at     map[placeKey]int // from indexedPlaces places on; nil below
	places []Place
}

// indexedPlaces is how many places a change states before add indexes
// them: a port's change states one to three, which a scan finds sooner
// than a map is made; a network's may state thousands.
const indexedPlaces = 8

// add states p; over a place already stated, the higher rank wins.
func (ps *promised) add(p Place) {
	k := placeKey{p.GUID, p.PKey}
	if i, ok := ps.find(k); ok {
		if p.Want.rank() > ps.places[i].Want.rank() {
			ps.places[i].Want = p.Want
		}
		return
	}
	ps.places = append(ps.places, p)
	switch {
	case ps.at != nil:
		ps.at[k] = len(ps.places) - 1
	case len(ps.places) == indexedPlaces:
		ps.at = make(map[placeKey]int, 2*indexedPlaces)
		for i, q := range ps.places {
			ps.at[placeKey{q.GUID, q.PKey}] = i
		}
	}
}

// find is the index of the place stated at k.
func (ps *promised) find(k placeKey) (int, bool) {
	if ps.at != nil {
		i, ok := ps.at[k]
		return i, ok
	}
	for i, q := range ps.places {
		if q.GUID == k.guid && q.PKey == k.pkey {
			return i, true
		}
	}
	return 0, false
}

// driverPlaces are places as the job's insert takes them.
func driverPlaces(places []Place) []driver.Place {
	out := make([]driver.Place, len(places))
	for i, p := range places {
		out[i] = driver.Place{GUID: p.GUID, PKey: p.PKey, Want: string(p.Want)}
	}
	return out
}

// storePlaces are the places a job's row holds (driver.PlacesJSON).
func storePlaces(text string) ([]Place, error) {
	ps, err := driver.ParsePlacesJSON(text)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	out := make([]Place, len(ps))
	for i, p := range ps {
		out[i] = Place{GUID: p.GUID, PKey: p.PKey, Want: Want(p.Want)}
	}
	return out, nil
}

// sortPlaces orders a job's places by GUID, then pkey, as job_places' key
// (and OpenJobs) lists them, whatever order its change stated them in.
func sortPlaces(places []Place) {
	slices.SortFunc(places, func(a, b Place) int {
		if c := cmp.Compare(a.GUID, b.GUID); c != 0 {
			return c
		}
		return cmp.Compare(a.PKey, b.PKey)
	})
}
