package applier

import (
	"cmp"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// What a sweep changed in the host ports' pkey tables, and which jobs changed
// it: the difference between the state the term last applied (every job up
// to it judged) and the state the sweep applied. A pkey error that names a
// port but no pkey is held against these changes (attribution.go): a port whose
// table was not sent may lack a pkey it gained in the sweep or still hold one
// it lost, and the jobs of those changes are the ones whose outcome is in
// doubt.

// jobObject is what a job changes, as its row names it: a port, a network
// or a Kubernetes pkey ("0x1005").
type jobObject struct {
	kind string // store.ObjectPort, store.ObjectNetwork, store.ObjectPKey
	id   string
}

func objectOf(j store.OpenJob) jobObject { return jobObject{kind: j.ObjectType, id: j.ObjectID} }

// sweepChanges are the places whose membership a sweep added, removed or
// altered, by the object whose change it was. A place can be listed under
// several objects (a port's GUID in a network's partition is the port's and
// the network's).
type sweepChanges map[jobObject][]place

func (c sweepChanges) add(o jobObject, p place) { c[o] = append(c[o], p) }

// diffStates compares prev, the state last applied, with cur, the state the
// sweep applied. Members are in network then GUID order and Kubernetes
// partitions in pkey order (store.Snapshot), so each is one merge; the
// Kubernetes partitions, which a read shares while they are unchanged, are
// skipped whole then.
func diffStates(prev, cur store.Snapshot, flatPKey fabric.PKey) sweepChanges {
	c := sweepChanges{}
	diffNetworks(c, prev, cur, flatPKey)
	if !sameKubernetes(prev.Kubernetes, cur.Kubernetes) {
		diffKubernetes(c, prev.Kubernetes, cur.Kubernetes)
	}
	return c
}

// partitionPKeys are the pkeys of a state's managed networks (a flat one's
// is flatPKey).
func partitionPKeys(snap store.Snapshot, flatPKey fabric.PKey) map[string]fabric.PKey {
	pkeys := make(map[string]fabric.PKey, len(snap.Networks))
	for _, n := range snap.Networks {
		switch {
		case !n.Managed:
		case n.PKey == nil:
			pkeys[n.ID] = flatPKey
		default:
			pkeys[n.ID] = *n.PKey
		}
	}
	return pkeys
}

// diffNetworks adds the networks' membership changes: a port's GUID that
// joined or left a partition (the port's and the network's change), and
// every member of a network whose pkey changed (a VLAN move, the network's).
// A GUID that moved between two ports of one network changes no table.
func diffNetworks(c sweepChanges, prev, cur store.Snapshot, flatPKey fabric.PKey) {
	was, is := partitionPKeys(prev, flatPKey), partitionPKeys(cur, flatPKey)
	left := func(m store.Member) {
		c.add(jobObject{store.ObjectPort, m.PortID}, place{port: m.GUID, pkey: was[m.NetworkID]})
		c.add(jobObject{store.ObjectNetwork, m.NetworkID}, place{port: m.GUID, pkey: was[m.NetworkID]})
	}
	joined := func(m store.Member) {
		c.add(jobObject{store.ObjectPort, m.PortID}, place{port: m.GUID, pkey: is[m.NetworkID]})
		c.add(jobObject{store.ObjectNetwork, m.NetworkID}, place{port: m.GUID, pkey: is[m.NetworkID]})
	}
	p, q := prev.Members, cur.Members
	for len(p) > 0 || len(q) > 0 {
		switch order := compareMembers(p, q); {
		case order < 0:
			left(p[0])
			p = p[1:]
		case order > 0:
			joined(q[0])
			q = q[1:]
		default:
			if old, now := was[p[0].NetworkID], is[q[0].NetworkID]; old != now {
				net := jobObject{store.ObjectNetwork, q[0].NetworkID}
				c.add(net, place{port: q[0].GUID, pkey: old})
				c.add(net, place{port: q[0].GUID, pkey: now})
			}
			p, q = p[1:], q[1:]
		}
	}
}

// compareMembers orders the heads of two member lists, an empty list last.
func compareMembers(p, q []store.Member) int {
	switch {
	case len(p) == 0:
		return 1
	case len(q) == 0:
		return -1
	}
	return cmp.Or(cmp.Compare(p[0].NetworkID, q[0].NetworkID), cmp.Compare(p[0].GUID, q[0].GUID))
}

// sameKubernetes is true when cur is prev as read before: the snapshot cache
// shares the Kubernetes partitions until one of them changes.
func sameKubernetes(prev, cur []store.KubernetesPKey) bool {
	return len(prev) == len(cur) && (len(cur) == 0 || &prev[0] == &cur[0])
}

// diffKubernetes adds the Kubernetes partitions' changes: a GUID added,
// removed, or whose membership or index 0 changed, and every member of a
// pkey created or deleted, each the pkey's change.
func diffKubernetes(c sweepChanges, prev, cur []store.KubernetesPKey) {
	all := func(k store.KubernetesPKey) {
		for _, m := range k.Members {
			c.add(jobObject{store.ObjectPKey, k.PKey.String()}, place{port: m.GUID, pkey: k.PKey})
		}
	}
	for len(prev) > 0 || len(cur) > 0 {
		switch {
		case len(cur) == 0 || len(prev) > 0 && prev[0].PKey < cur[0].PKey:
			all(prev[0])
			prev = prev[1:]
		case len(prev) == 0 || cur[0].PKey < prev[0].PKey:
			all(cur[0])
			cur = cur[1:]
		default:
			diffKubernetesMembers(c, cur[0].PKey, prev[0].Members, cur[0].Members)
			prev, cur = prev[1:], cur[1:]
		}
	}
}

// diffKubernetesMembers adds the changes of one pkey's members, which are in
// GUID order.
func diffKubernetesMembers(c sweepChanges, pkey fabric.PKey, prev, cur []store.KubernetesMember) {
	o := jobObject{store.ObjectPKey, pkey.String()}
	for len(prev) > 0 || len(cur) > 0 {
		switch {
		case len(cur) == 0 || len(prev) > 0 && prev[0].GUID < cur[0].GUID:
			c.add(o, place{port: prev[0].GUID, pkey: pkey})
			prev = prev[1:]
		case len(prev) == 0 || cur[0].GUID < prev[0].GUID:
			c.add(o, place{port: cur[0].GUID, pkey: pkey})
			cur = cur[1:]
		default:
			if prev[0] != cur[0] { // its membership or index 0
				c.add(o, place{port: cur[0].GUID, pkey: pkey})
			}
			prev, cur = prev[1:], cur[1:]
		}
	}
}
