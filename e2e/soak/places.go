package soak

import (
	"fmt"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// A job's places are what its request changed on the fabric, as the model
// says: a (port GUID, pkey) that must be in the table (a port bound to its
// network, a network's members at its new VLAN ID), or must be out of it (a
// removed or moved port, a network's members at its old VLAN ID, a deleted
// network's). When a job first reads Completed, each place must hold in the
// real tables read then, the host's and the switch port's facing it, unless
// a later request changed the same (GUID, pkey) again: that one supersedes
// it. This is the promise itself, per job; the table check beside it
// (checkHosts) compares whole tables with any state the floor allows.

// place is one (GUID, pkey) a request changed: in says whether it must be held.
type place struct {
	host fabric.GUID
	key  uint16
	in   bool
}

func (p place) String() string {
	if p.in {
		return fmt.Sprintf("0x%04x in", p.key)
	}
	return fmt.Sprintf("0x%04x out of", p.key)
}

// placesAt are the places request index made on host h: the keys its table
// gained and lost.
func (r *run) placesAt(h fabric.GUID, index int) []place {
	if index < 1 || index >= len(r.tables) {
		return nil
	}
	before, after := r.tables[index-1][h], r.tables[index][h]
	var out []place
	for _, k := range after {
		if !slices.Contains(before, k) {
			out = append(out, place{host: h, key: k, in: true})
		}
	}
	for _, k := range before {
		if !slices.Contains(after, k) {
			out = append(out, place{host: h, key: k, in: false})
		}
	}
	return out
}

// superseded says whether a request after index, up to hi, changed the
// place's (GUID, pkey) again.
func (r *run) superseded(p place, index, hi int) bool {
	for k := index + 1; k <= hi && k < len(r.tables); k++ {
		if slices.Contains(r.tables[k][p.host], p.key) != slices.Contains(r.tables[k-1][p.host], p.key) {
			return true
		}
	}
	return false
}

// checkPlaces compares job j's places on host h with the tables read at its
// completion; it returns how many were wrong (each a violation).
func (r *run) checkPlaces(j job, h fabric.GUID, t tableRead, hi int, when string) int {
	bad := 0
	for _, p := range r.placesAt(h, j.index) {
		if r.superseded(p, j.index, hi) {
			continue
		}
		r.res.Checks++
		for _, side := range []struct {
			name string
			keys []uint16
		}{{"", t.keys}, {"the switch port facing ", t.sw}} {
			if slices.Contains(side.keys, p.key) != p.in {
				bad++
				r.violation("%s: its place %s %s%s (%s) does not hold: the table holds %s (no later request changed it)",
					when, p, side.name, r.hostName(h), h, hexKeys(side.keys))
			}
		}
	}
	return bad
}
