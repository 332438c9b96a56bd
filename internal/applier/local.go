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
// naming host ports (ERR 0512, one host's table full, and the other ERR 05xx
// of the pkey manager, which name "node 0x... port N") fails only the jobs of
// the changes involving those ports: a port job whose port holds the GUID of
// a named port, a network's job whose partition, in the state the sweep
// applied (after a VLAN move: its new pkey's), has a named port as a member,
// and a Kubernetes pkey's job whose pkey has one. The sweep's other jobs
// complete: OpenSM programmed their pkeys. A line that names no port, or
// a port the subnet dump does not know, cannot be attributed: then every job
// of the sweep fails, as before.

// attribution is what the pkey error lines of a sweep name.
type attribution struct {
	byPort map[fabric.GUID][]string
}

// attribute places every line on a host port, using OpenSM's subnet dump to
// turn the node GUID and port number it names into the port's GUID. ok is
// false when a line cannot be placed.
func (t *term) attribute(lines []string) (a attribution, ok bool) {
	topo, err := t.subnetDump().Load()
	if err != nil {
		t.Log.Warn("pkey errors cannot be attributed to ports: the subnet dump cannot be read", "error", err)
		return a, false
	}
	a = attribution{byPort: map[fabric.GUID][]string{}}
	for _, l := range lines {
		node, port, found := opensm.PKeyErrorPlace(l)
		if !found {
			t.Log.Warn("a pkey error names no port: failing every job of the sweep", "line", l)
			return a, false
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
			return a, false
		}
		a.byPort[g] = append(a.byPort[g], l)
	}
	return a, true
}

// failLocally fails the open jobs up to the revision of snap, the recorded
// state the sweep applied, that the pkey errors name, and returns how many.
// ok is false when the errors cannot be attributed (the caller fails every
// job); err is a database error (the caller retries).
func (t *term) failLocally(ctx context.Context, snap store.Snapshot, lines []string) (failed int64, ok bool, err error) {
	a, ok := t.attribute(lines)
	if !ok {
		return 0, false, nil
	}
	jobs, err := t.Store.OpenJobs(ctx, snap.Revision)
	if err != nil {
		return 0, true, fmt.Errorf("read open jobs: %w", err)
	}
	networks := map[string][]fabric.GUID{} // a network's members in the state the sweep applied
	for _, m := range snap.Members {
		networks[m.NetworkID] = append(networks[m.NetworkID], m.GUID)
	}
	var kube map[string][]fabric.GUID // a Kubernetes pkey's members, read once if a pkey job is open
	for _, j := range jobs {
		var named []string
		switch {
		case j.ObjectType == store.ObjectPort && j.GUID != nil:
			named = a.byPort[*j.GUID]
		case j.ObjectType == store.ObjectNetwork:
			for _, g := range networks[j.ObjectID] {
				named = append(named, a.byPort[g]...)
			}
		case j.ObjectType == store.ObjectPKey:
			if kube == nil {
				if kube, err = t.kubernetesMembers(ctx); err != nil {
					return failed, true, err
				}
			}
			for _, g := range kube[j.ObjectID] {
				named = append(named, a.byPort[g]...)
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

// kubernetesMembers reads the Kubernetes pkeys' members as recorded now, by
// pkey as a job names it ("0x1005"): a pkey job fails when a pkey error names
// one of its pkey's ports.
func (t *term) kubernetesMembers(ctx context.Context) (map[string][]fabric.GUID, error) {
	snap, err := t.Store.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read Kubernetes pkeys: %w", err)
	}
	out := map[string][]fabric.GUID{}
	for _, k := range snap.Kubernetes {
		for _, m := range k.Members {
			out[k.PKey.String()] = append(out[k.PKey.String()], m.GUID)
		}
	}
	return out, nil
}
