package applier

import (
	"context"
	"fmt"

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
	if err := t.Store.RecordEnforcementErrors(ctx, t.id, seen); err != nil {
		return fmt.Errorf("record host ports at their switch ports' pkey capacity: %w", err)
	}
	return nil
}
