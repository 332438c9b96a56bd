package neutronimport

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// ports records Neutron's ports that are not recorded as they are.
func (i *importer) ports(ctx context.Context, ports []Port) error {
	for _, p := range ports {
		have, err := i.rec.GetPort(ctx, p.Change.Port.ID)
		known := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("read recorded port %s: %w", p.Change.Port.ID, err)
		}
		if known && samePort(have, p.Change.Port) {
			i.r.InSync++
			continue
		}
		if known {
			p.Change.Operation = store.OpUpdatePort
		}
		if err := i.recordPort(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// samePort says whether recorded port have is want as it would be recorded.
func samePort(have, want store.Port) bool {
	g := wantGUID(want)
	sameGUID := (have.GUID == nil && g == nil) || (have.GUID != nil && g != nil && *have.GUID == *g)
	return have.NetworkID == want.NetworkID && have.Host == want.Host && sameGUID
}

// recordPort records p as networking-mlnx's request would have, with its
// dictionary as Neutron has it now.
func (i *importer) recordPort(ctx context.Context, p Port) error {
	f := Finding{Kind: "port", ID: p.Change.Port.ID, About: portAbout(p.Change)}
	if i.refusedNets[p.Change.Port.NetworkID] {
		f.Reason = fmt.Sprintf("its network %s is refused", p.Change.Port.NetworkID)
		i.r.Skipped = append(i.r.Skipped, f)
		return nil
	}
	now, ok, err := recordable(ctx, i, f, p, i.freshPort)
	if !ok {
		return err
	}
	c := now.Change
	c.Operation, c.CreatedBy, c.Request = p.Change.Operation, CreatedBy, string(now.Raw)
	job, err := i.rec.RecordPort(ctx, c)
	return i.outcome("record", &i.r.Recorded, f, job, err, nil)
}

// freshPort reads p again from Neutron: skip says why it is not recorded
// when Neutron deleted it, or changed its network or client-id, since the
// listing (a GUID given now to a deleted port would stay in the partition).
func (i *importer) freshPort(ctx context.Context, p Port) (Port, string, error) {
	raw, err := i.src.Port(ctx, p.Change.Port.ID)
	if errors.Is(err, ErrGone) {
		return Port{}, "deleted in Neutron while the import ran", nil
	}
	if err != nil {
		return Port{}, "", err
	}
	c, err := api.DecodePort(raw)
	if err != nil || c.Port.NetworkID != p.Change.Port.NetworkID || c.Port.GUID == nil || *c.Port.GUID != *p.Change.Port.GUID {
		return Port{}, "changed in Neutron while the import ran: run the import again", nil
	}
	return Port{Change: c, PKey: p.PKey, Raw: json.RawMessage(raw)}, "", nil
}

// notInNeutron lists the recorded networks and memberships that Neutron
// lacks and, with Options.Prune, removes them.
func (i *importer) notInNeutron(ctx context.Context, inv Inventory, snap store.Snapshot) error {
	var nets, members []Finding
	gone := make(map[string]bool)
	for _, n := range snap.Networks {
		if !inv.ib[n.ID] {
			gone[n.ID] = true
			nets = append(nets, Finding{Kind: "network", ID: n.ID, About: recordedAbout(n, i.rules)})
		}
	}
	for _, m := range snap.Members {
		if g, ok := inv.claimed[m.PortID]; ok && g == m.GUID {
			continue
		}
		f := Finding{Kind: "port", ID: m.PortID, About: fmt.Sprintf("GUID %s, network %s", m.GUID, m.NetworkID)}
		if gone[m.NetworkID] {
			f.Reason = "goes with its network"
		}
		members = append(members, f)
	}
	if !i.opts.Prune {
		for _, f := range append(nets, members...) {
			f.Reason = "Neutron lacks it (--prune removes it)"
			i.r.NotInNeutron = append(i.r.NotInNeutron, f)
		}
		return nil
	}
	if len(inv.ib) == 0 && len(nets) > 0 {
		return fmt.Errorf("not pruning: Neutron lists no network on the InfiniBand physnets and %d are recorded "+
			"(is [neutron] cloud the right cloud, and [api] physical_networks right?)", len(nets))
	}
	return i.prune(ctx, nets, members)
}

// recordedAbout says which partition recorded network n has.
func recordedAbout(n store.Network, rules store.Rules) string {
	if n.PKey == nil {
		return fmt.Sprintf("flat, pkey %s", cmp.Or(rules.FlatPKey, store.DefaultFlatPKey))
	}
	return "pkey " + n.PKey.String()
}
