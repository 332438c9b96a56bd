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
// that name a host port and a pkey (ERR 0512, one host's table full, and the
// other ERR 05xx of the pkey manager that say which pkey they could not set)
// fails only the jobs of the changes that put that port in that pkey's
// partition, as the state the sweep applied records them: a port job whose
// port holds the named port's GUID in a network on that pkey, a network's job
// whose partition (its pkey now: after a VLAN move, the new one) has the port
// as a member, and a Kubernetes pkey's job whose pkey has it. The sweep's
// other jobs complete: OpenSM programmed their pkeys. A host whose table is
// full for one pkey thus fails the changes to that pkey, again at every sweep
// while it lasts, and not the changes to the other pkeys it holds.
//
// Every job of the sweep fails, as it did before attribution existed, when a
// line cannot be attributed that way:
//   - it names no port, or a port the subnet dump does not know;
//   - it names a port but no pkey (ERR 0502, 0506, 0509, 0511: a table block,
//     the enforcement bits or an allocation failed). Such a port's table may
//     miss any pkey it should have gained and hold any pkey it should have
//     lost, and which changes took it out of a partition no recorded state
//     shows (a removed port, a deleted network or Kubernetes pkey is no longer
//     there): only failing everything is sure to fail those. These lines are
//     failures to send, not a state of the fabric that every sweep repeats.

// place is a host port and a pkey of its table.
type place struct {
	port fabric.GUID
	pkey fabric.PKey
}

func (p place) String() string { return fmt.Sprintf("host port %s, pkey %s", p.port, p.pkey) }

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
		pkey, named := opensm.PKeyErrorPKey(l)
		if !named {
			t.Log.Warn("a pkey error names a port but no pkey: what it lacks or still holds is unknown; failing every job of the sweep",
				"line", l, "port", g)
			return nil, false
		}
		p := place{port: g, pkey: fabric.PKey(pkey)}
		a[p] = append(a[p], l)
	}
	return a, true
}

// failLocally fails the open jobs up to the revision of snap, the recorded
// state the sweep applied, that the pkey errors name, and returns how many.
// ok is false when the errors cannot be attributed (the caller fails every
// job); err is a database error (the caller retries: the jobs failed so far
// stay failed, and none has completed).
func (t *term) failLocally(ctx context.Context, snap store.Snapshot, lines []string) (failed int64, ok bool, err error) {
	a, ok := t.attribute(lines)
	if !ok {
		return 0, false, nil
	}
	jobs, err := t.Store.OpenJobs(ctx, snap.Revision)
	if err != nil {
		return 0, true, fmt.Errorf("read open jobs: %w", err)
	}
	changes := changedPlaces(snap, t.Cfg.FlatPKey)
	for _, j := range jobs {
		var named []string
		for _, p := range changes.of(j) {
			for _, l := range a[p] {
				named = append(named, p.String()+": "+l)
			}
		}
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

// partitionPlaces are the places of the partitions of a recorded state, by
// what a job names: a managed network's (its pkey, or the flat pkey, and its
// ports), a Kubernetes pkey's (by pkey as its jobs name it, "0x1005").
type partitionPlaces struct {
	networkPKey map[string]fabric.PKey
	network     map[string][]place
	kubernetes  map[string][]place
}

func changedPlaces(snap store.Snapshot, flatPKey fabric.PKey) partitionPlaces {
	c := partitionPlaces{networkPKey: map[string]fabric.PKey{}, network: map[string][]place{},
		kubernetes: map[string][]place{}}
	for _, n := range snap.Networks {
		switch {
		case !n.Managed:
		case n.PKey == nil:
			c.networkPKey[n.ID] = flatPKey
		default:
			c.networkPKey[n.ID] = *n.PKey
		}
	}
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

// of returns the places a job's change put ports in: none for a change that
// only took ports out (a removed port, a deleted network or pkey), which no
// line that names a pkey concerns (OpenSM names pkeys only when it fails to
// set them).
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
