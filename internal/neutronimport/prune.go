package neutronimport

import (
	"context"
	"errors"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// prune removes the recorded networks and memberships Neutron lacks, each
// once Neutron, asked again, still lacks it: a network only when Neutron
// deleted it, a membership when Neutron deleted its port or the port no
// longer carries its GUID. A port goes with its network.
func (i *importer) prune(ctx context.Context, nets, members []Finding) error {
	for _, f := range nets {
		_, err := i.src.Network(ctx, f.ID)
		if err == nil {
			f.Reason = "Neutron has it on another physnet or of another type: not removed"
			i.r.NotInNeutron = append(i.r.NotInNeutron, f)
			continue
		}
		if !errors.Is(err, ErrGone) {
			return err
		}
		if err := i.remove(f, func() (store.Job, error) {
			return i.rec.RemoveNetwork(ctx, store.NetworkRemoval{NetworkID: f.ID, CreatedBy: CreatedBy})
		}); err != nil {
			return err
		}
	}
	for _, f := range members {
		if f.Reason != "" { // goes with its network
			continue
		}
		guid, err := i.memberGUID(ctx, f.ID)
		if err != nil || guid == nil {
			return err
		}
		if err := i.remove(f, func() (store.Job, error) {
			return i.rec.RemovePort(ctx, store.PortRemoval{PortID: f.ID, GUID: guid, CreatedBy: CreatedBy})
		}); err != nil {
			return err
		}
	}
	return nil
}

// memberGUID is the GUID to remove port id's membership by, nil when Neutron,
// asked again, has the port with the GUID recorded (then it is not removed).
func (i *importer) memberGUID(ctx context.Context, id string) (*fabric.GUID, error) {
	have, err := i.rec.GetPort(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && have.GUID == nil) {
		return nil, nil // removed meanwhile
	}
	if err != nil {
		return nil, err
	}
	raw, err := i.src.Port(ctx, id)
	switch {
	case errors.Is(err, ErrGone):
		return have.GUID, nil
	case err != nil:
		return nil, err
	}
	c, err := api.DecodePort(raw)
	if err == nil && c.Port.GUID != nil && *c.Port.GUID == *have.GUID {
		return nil, nil // in Neutron again (or its listing missed it)
	}
	return have.GUID, nil
}

// remove files f as removed (with DryRun: to be removed) once remove, unless
// DryRun, succeeded. The store's refusal or a removal it does not find is
// f's; any other error ends the import.
func (i *importer) remove(f Finding, remove func() (store.Job, error)) error {
	f.Reason = ""
	if !i.opts.DryRun {
		job, err := remove()
		if errors.Is(err, store.ErrNotFound) {
			return nil // removed meanwhile, by networking-mlnx's DELETE
		}
		return i.outcome("remove", &i.r.Removed, f, job, err, nil)
	}
	i.r.Removed = append(i.r.Removed, f)
	return nil
}
