package applier

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// CapacityChecker finds the host ports whose pkeys, as members of the
// partitions given by host port GUID, fill their switch port's pkey table in
// the topology read from the subnet dump (topo and loadErr: what the term's
// read of Config.SubnetDump returned).
type CapacityChecker interface {
	ReachedIn(topo *topology.Topology, loadErr error, partitions map[fabric.GUID][]fabric.PKey) ([]topology.Reached, error)
	// Room is how many pkeys a host port may carry besides the default
	// partition's and the template's static ones, wherever it is linked
	// (topology.PortLimit.Room).
	Room(guid fabric.GUID) int
}

// A withheld membership is a Kubernetes pkey a GUID holds in the database but
// not in the file: the GUID cannot carry it wherever it is linked.
type withheld struct {
	GUID     fabric.GUID
	PKey     fabric.PKey
	Revision int64 // the change that gave it
}

// withhold returns snap without the Kubernetes memberships its GUIDs cannot
// carry wherever they are linked, the latest given first, and which those are.
//
// The API refuses such a membership when it is sent, placed or not (a GUID
// off the fabric gets its pkeys from OpenSM at the sweep that finds it, with
// no apply in between). One can still be recorded when the configuration
// moved under it (a lower switch_pkey_capacity, a template listing the GUID in
// more static partitions) or by a manager of another version or configuration
// sharing the database. Writing it would fill the switch port's table when
// the port is, or comes, on the fabric, and OpenSM would stop enforcing
// partitions there. Leaving it out fails closed without cutting anyone off:
// the GUID is not in that pkey (no access), keeps the pkeys it had before,
// every other port keeps its own, and the jobs that asked for it fail (see
// failWithheld). A GUID in Kubernetes pkeys is in no Neutron partition, so
// only its Kubernetes pkeys, the default partition and the template's static
// ones count.
func withhold(snap store.Snapshot, limit CapacityChecker) (store.Snapshot, []withheld) {
	if limit == nil {
		return snap, nil
	}
	// Most GUIDs are in a pkey or two: count first, and look closer only at
	// those past their room (a render of 100,000 members does this).
	members := 0
	for _, k := range snap.Kubernetes {
		members += len(k.Members)
	}
	count := make(map[fabric.GUID]int, members)
	for _, k := range snap.Kubernetes {
		for _, m := range k.Members {
			count[m.GUID]++
		}
	}
	room := map[fabric.GUID]int{}
	for g, n := range count {
		if r := limit.Room(g); n > r {
			room[g] = r
		}
	}
	if len(room) == 0 {
		return snap, nil
	}
	// A Kubernetes pkey is no static one, so each membership is a pkey of
	// its own: the GUID keeps its room's worth, the oldest given.
	byGUID := map[fabric.GUID][]withheld{}
	for _, k := range snap.Kubernetes {
		for _, m := range k.Members {
			if _, over := room[m.GUID]; over {
				byGUID[m.GUID] = append(byGUID[m.GUID], withheld{GUID: m.GUID, PKey: k.PKey, Revision: m.Revision})
			}
		}
	}
	var left []withheld
	out := map[withheld]bool{}
	for g, grants := range byGUID {
		slices.SortFunc(grants, func(a, b withheld) int {
			return cmp.Or(cmp.Compare(a.Revision, b.Revision), cmp.Compare(a.PKey, b.PKey))
		})
		for _, w := range grants[room[g]:] {
			left = append(left, w)
			out[withheld{GUID: w.GUID, PKey: w.PKey}] = true
		}
	}
	slices.SortFunc(left, func(a, b withheld) int { return cmp.Or(cmp.Compare(a.GUID, b.GUID), cmp.Compare(a.PKey, b.PKey)) })
	// The snapshot's slices are the cache's: the pkeys that lose a member are
	// copied, never changed in place.
	kube := slices.Clone(snap.Kubernetes)
	for i, k := range kube {
		gone := func(m store.KubernetesMember) bool { return out[withheld{GUID: m.GUID, PKey: k.PKey}] }
		if slices.ContainsFunc(k.Members, gone) {
			kube[i].Members = slices.DeleteFunc(slices.Clone(k.Members), gone)
		}
	}
	snap.Kubernetes = kube
	return snap, left
}

// recordOverCapacity records, as enforcement errors, the host ports of the
// applied state that carry as many pkeys as their switch port's table holds.
// The API refuses a port that would; this catches those already there after
// the fabric or the template changed. Upstream OpenSM stops enforcing
// partitions on such a switch port without logging a word, so the gates must
// close as if it had said so. dump is the apply's one read of the subnet
// dump, which the gates compare the switches with too.
//
// It fails closed: since OpenSM will never log these ports, an error
// recording them is returned, and no job may complete until a later apply
// has recorded them. A dump that cannot be read is logged only: the gates,
// judging the same read, are closed by it.
func (t *term) recordOverCapacity(ctx context.Context, st partitions.State, dump dumpRead) error {
	if t.Cfg.PortLimit == nil {
		return nil
	}
	members := map[fabric.GUID][]fabric.PKey{}
	for _, n := range st.Networks {
		for _, g := range n.Members {
			members[g] = append(members[g], n.PKey)
		}
	}
	for _, g := range st.Flat.Members {
		members[g] = append(members[g], st.Flat.PKey)
	}
	for _, k := range st.Kubernetes {
		for _, m := range k.Members {
			members[m.GUID] = append(members[m.GUID], k.PKey)
		}
	}
	reached, err := t.Cfg.PortLimit.ReachedIn(dump.topo, dump.err, members)
	if err != nil {
		t.Log.Error("check host ports against their switch ports' pkey tables", "error", err)
		return nil
	}
	if len(reached) == 0 {
		return nil
	}
	seen := make([]store.EnforcementSighting, len(reached))
	for i, r := range reached {
		seen[i] = store.EnforcementSighting{Switch: r.Behind.Switch.String(), Port: r.Behind.Port,
			Line: fmt.Sprintf("host port %s carries %d pkeys, as many as switch port %s holds ([opensm] switch_pkey_capacity): "+
				"OpenSM stops enforcing partitions there without a word", r.Host, r.PKeys, r.Behind)}
		t.Log.Error(EnforcementCleared+" (its pkey table is full)", "switch_port", r.Behind.String(), "host_port", r.Host.String(), "pkeys", r.PKeys)
	}
	record := func() error { return t.Store.RecordEnforcementErrors(ctx, t.id, seen) }
	if t.gate != nil { // counted, for a jobs' transaction begun beside it (early.go)
		record = func() error {
			return t.gate.enforcement.write(func() error { return t.Store.RecordEnforcementErrors(ctx, t.id, seen) })
		}
	}
	if err := record(); err != nil {
		return fmt.Errorf("record host ports at their switch ports' pkey capacity: %w", err)
	}
	return nil
}

// failWithheld says, once per apply that leaves them out, which memberships
// the file withholds, and fails the open jobs up to rev that gave them: their
// GUID is not in their pkey, and never will be under this configuration
// (ib-kubernetes' retry is refused with the reason). ok is false when the jobs
// could not be read or failed: the apply is retried, so that no such job is
// completed by the sweep.
func (t *term) failWithheld(ctx context.Context, rev int64, left []withheld) (ok bool) {
	for _, w := range left {
		t.Log.Error("Kubernetes membership left out of the partitions file: the GUID cannot carry it wherever it is "+
			"linked ([opensm] switch_pkey_capacity)", "guid", w.GUID.String(), "pkey", w.PKey.String(),
			"revision", w.Revision)
	}
	jobs, err := t.Store.OpenJobs(ctx, rev)
	if err != nil {
		t.Log.Error("read open jobs", "error", err)
		return false
	}
	for _, o := range jobs {
		if o.ObjectType != store.ObjectPKey {
			continue
		}
		var gave []withheld
		for _, w := range left {
			if w.PKey.String() == o.ObjectID {
				gave = append(gave, w)
			}
		}
		if len(gave) == 0 {
			continue
		}
		j, err := t.Store.GetJob(ctx, o.ID)
		if err != nil {
			t.Log.Error("read job", "job", o.ID, "error", err)
			return false
		}
		var guids []string
		for _, w := range gave {
			if w.Revision == j.Revision {
				guids = append(guids, fmt.Sprintf("%016x", uint64(w.GUID)))
			}
		}
		if len(guids) == 0 || j.Operation != store.OpAddKubernetesGUIDs {
			continue
		}
		reason := fmt.Sprintf("not applied: GUIDs %s would carry as many pkeys as their switch port's table "+
			"holds ([opensm] switch_pkey_capacity), wherever they are linked: left out of the partitions file",
			strings.Join(guids, ", "))
		if _, err := t.Store.FailJob(ctx, t.id, j.ID, reason); err != nil {
			t.Log.Error("fail job", "job", j.ID, "error", err)
			return false
		}
	}
	return true
}
