package applier

import (
	"context"
	"fmt"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Failures stay local: a sweep that applied the file but logged pkey errors
// naming host ports fails only the jobs of the changes those ports concern.
//
// A line that names a host port and a pkey (ERR 0512, one host's table full,
// and the other ERR 05xx of the pkey manager that say which pkey they could
// not set) fails the jobs of the changes that put that port in that pkey's
// partition, as the state the sweep applied records them: a port job whose
// port holds the named port's GUID in a network on that pkey, a network's job
// whose partition (its pkey now: after a VLAN move, the new one) has the port
// as a member, and a Kubernetes pkey's job whose pkey has it; and the jobs
// that took the port out of that pkey in this sweep (changes.go). A host
// whose table is full for one pkey thus fails the changes to that pkey, again
// at every sweep while it lasts, and not the changes to the other pkeys it
// holds.
//
// A line that names a port but no pkey (ERR 0502, 0506, 0509, 0511: a table
// block, the enforcement bits or an allocation failed) leaves the port's
// table in doubt: it may lack a pkey it gained in the sweep or still hold one
// it lost. It fails the jobs whose change added, removed or altered a
// membership of that port in this sweep, found by comparing the state the
// term last applied with the state the sweep applied: a removed port, a
// deleted network or Kubernetes pkey, a VLAN move are no longer in the
// latter. The other jobs complete: a tenant that resets its own host's HCA
// fails its own changes, never another tenant's.
//
// Every job of the sweep fails, as it did before attribution existed, when a
// line cannot be attributed that way:
//   - it names no port, or a port the subnet dump does not know;
//   - it names a port but no pkey, and the term has no applied state to
//     compare with: its first apply (the file OpenSM had may be another
//     term's, another manager's or a hand edit), or the first after an apply
//     that wrote the file but whose jobs were not all judged (OpenSM may have
//     swept any of those states), after OpenSM restarted, after the file
//     drifted or a freeze was lifted.

// place is a host port and a pkey of its table.
type place struct {
	port fabric.GUID
	pkey fabric.PKey
}

// anyPKey is the pkey of a place a line names without a pkey: the whole
// port's table.
const anyPKey fabric.PKey = 0

func (p place) String() string {
	if p.pkey == anyPKey {
		return fmt.Sprintf("host port %s", p.port)
	}
	return fmt.Sprintf("host port %s, pkey %s", p.port, p.pkey)
}

// attribution is what the pkey error lines of a sweep name: the lines by the
// place they could not program.
type attribution map[place][]string

// attribute places every line on a host port and a pkey, using OpenSM's
// subnet dump to turn the node GUID and port number it names into the port's
// GUID. ok is false when a line cannot be placed.
func (t *term) attribute(lines []string) (a attribution, ok bool) {
	topo, err := t.subnetDump().Load()
	if err != nil {
		t.Log.Warn("pkey errors cannot be attributed to ports: the subnet dump cannot be read", "error", err)
		return nil, false
	}
	a = attribution{}
	for _, l := range lines {
		node, port, found := opensm.PKeyErrorPlace(l)
		if !found {
			t.Log.Warn("a pkey error names no port: failing every job of the sweep", "line", l)
			return nil, false
		}
		g, known := topo.PortGUID(fabric.GUID(node), port)
		if !known && topo.IsSwitch(fabric.GUID(node)) {
			// A switch port: the one facing a host port carries that port's
			// pkeys; port 0, the switch itself, or a port to another switch,
			// carries no change's.
			if host, behind := topo.HostBehind(fabric.GUID(node), port); behind {
				g, known = host, true
			} else {
				continue
			}
		}
		if !known {
			t.Log.Warn("a pkey error names a port the subnet dump does not know: failing every job of the sweep",
				"line", l, "node", fabric.GUID(node), "port", port)
			return nil, false
		}
		pkey, _ := opensm.PKeyErrorPKey(l) // none: anyPKey
		p := place{port: g, pkey: fabric.PKey(pkey)}
		a[p] = append(a[p], l)
	}
	return a, true
}

// failLocally fails the open jobs up to the revision of snap, the recorded
// state the sweep applied, that the pkey errors name, and returns how many.
// base is the state the term applied before (nil: none to compare with).
// ok is false when the errors cannot be attributed (the caller fails every
// job); err is a database error (the caller retries: the jobs failed so far
// stay failed, and none has completed).
func (t *term) failLocally(ctx context.Context, base *store.Snapshot, snap store.Snapshot, lines []string) (failed int64, ok bool, err error) {
	a, ok := t.attribute(lines)
	if !ok {
		return 0, false, nil
	}
	var changes sweepChanges
	switch {
	case base != nil:
		changes = diffStates(*base, snap, t.Cfg.FlatPKey)
	case a.namesNoPKey():
		t.Log.Warn("a pkey error names a port but no pkey, and no state applied before in this term shows what the sweep changed on it: failing every job of the sweep",
			"lines", lines)
		return 0, false, nil
	}
	jobs, err := t.Store.OpenJobs(ctx, snap.Revision)
	if err != nil {
		return 0, true, fmt.Errorf("read open jobs: %w", err)
	}
	held := heldPlaces(snap, t.Cfg.FlatPKey)
	for _, j := range jobs {
		named := a.named(held.of(j), changes[objectOf(j)])
		if len(named) == 0 {
			continue
		}
		reason := "OpenSM applied the partitions file, but not this change: " + strings.Join(named, "; ")
		n, err := t.Store.FailJob(ctx, t.id, j.ID, reason)
		if err != nil {
			return failed, true, fmt.Errorf("fail job %d: %w", j.ID, err)
		}
		failed += n
	}
	return failed, true, nil
}

// namesNoPKey is true when a line names a port but no pkey.
func (a attribution) namesNoPKey() bool {
	for p := range a {
		if p.pkey == anyPKey {
			return true
		}
	}
	return false
}

// named returns the lines, each after its place, that concern a job: those
// naming a place its change holds in the applied state (held) and those
// naming a place, or the whole table of a port, whose membership its change
// added, removed or altered in the sweep (changed). Each line once.
func (a attribution) named(held, changed []place) []string {
	var out []string
	seen := map[place]bool{}
	say := func(p place) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, l := range a[p] {
			out = append(out, p.String()+": "+l)
		}
	}
	for _, p := range held {
		say(p)
	}
	for _, p := range changed {
		say(p)
		say(place{port: p.port, pkey: anyPKey})
	}
	return out
}

// partitionPlaces are the places of the partitions of a recorded state, by
// what a job names: a managed network's (its pkey, or the flat pkey, and its
// ports), a Kubernetes pkey's (by pkey as its jobs name it, "0x1005").
type partitionPlaces struct {
	networkPKey map[string]fabric.PKey
	network     map[string][]place
	kubernetes  map[string][]place
}

// heldPlaces are the places the partitions of snap hold, by job.
func heldPlaces(snap store.Snapshot, flatPKey fabric.PKey) partitionPlaces {
	c := partitionPlaces{networkPKey: partitionPKeys(snap, flatPKey), network: map[string][]place{},
		kubernetes: map[string][]place{}}
	for _, m := range snap.Members {
		if pkey, ok := c.networkPKey[m.NetworkID]; ok {
			c.network[m.NetworkID] = append(c.network[m.NetworkID], place{port: m.GUID, pkey: pkey})
		}
	}
	for _, k := range snap.Kubernetes {
		for _, m := range k.Members {
			c.kubernetes[k.PKey.String()] = append(c.kubernetes[k.PKey.String()], place{port: m.GUID, pkey: k.PKey})
		}
	}
	return c
}

// of returns the places a job's object holds in the state: none for a
// change that only took ports out (a removed port, a deleted network or
// pkey), whose places only the comparison with the state applied before
// finds (sweepChanges).
func (c partitionPlaces) of(j store.OpenJob) []place {
	switch j.ObjectType {
	case store.ObjectPort:
		pkey, managed := c.networkPKey[j.NetworkID]
		if j.GUID == nil || !managed {
			return nil
		}
		return []place{{port: *j.GUID, pkey: pkey}}
	case store.ObjectNetwork:
		return c.network[j.ObjectID]
	case store.ObjectPKey:
		return c.kubernetes[j.ObjectID]
	}
	return nil
}
