package neutronimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// CreatedBy is the jobs' created_by of what the import records.
const CreatedBy = "neutron-import"

// Recorder is the store as the import uses it: what is recorded, and the
// same record and remove methods networking-mlnx's requests go through.
type Recorder interface {
	Snapshot(ctx context.Context) (store.Snapshot, error)
	GetPort(ctx context.Context, id string) (store.Port, error)
	RecordNetwork(ctx context.Context, c store.NetworkChange) (store.Job, error)
	RecordPort(ctx context.Context, c store.PortChange) (store.Job, error)
	RemoveNetwork(ctx context.Context, r store.NetworkRemoval) (store.Job, error)
	RemovePort(ctx context.Context, r store.PortRemoval) (store.Job, error)
}

// Options say what an import may write.
type Options struct {
	// DryRun writes nothing: the report says what would be recorded and
	// removed.
	DryRun bool
	// Prune removes what is recorded and Neutron lacks; without it, that is
	// only listed.
	Prune bool
}

// Report is what an import did, or with DryRun would do.
type Report struct {
	DryRun bool
	// Recorded are the networks and ports recorded (with DryRun: to be
	// recorded), Neutron's and not the manager's, or not the same.
	Recorded []Finding
	// Refused by the rules or the store, as networking-mlnx's request
	// would have been (400).
	Refused []Finding
	// Skipped are Neutron's objects not imported: see Inventory.Skipped, and
	// those deleted or changed in Neutron while the import ran.
	Skipped []Finding
	// NotInNeutron are the recorded networks and memberships that Neutron
	// lacks, left as they are; Removed those removed by Options.Prune (with
	// DryRun: to be removed).
	NotInNeutron, Removed []Finding
	// InSync counts Neutron's networks and ports recorded as they are;
	// Ignored what is not the manager's (Inventory.Ignored).
	InSync, Ignored int
	// Neutron is what was read from Neutron: Neutron.Members() are the GUIDs
	// of its ports by partition key.
	Neutron Inventory
	// read says Neutron was read: a report of an import that failed before
	// has nothing to say, not even its summary.
	read bool
}

// Agrees says whether, after the import, the records and Neutron agree:
// Neutron was read, nothing refused, skipped or left that Neutron lacks, and
// with DryRun, nothing to write.
func (r Report) Agrees() bool {
	pending := r.DryRun && (len(r.Recorded) > 0 || len(r.Removed) > 0)
	return r.read && !pending && len(r.Refused) == 0 && len(r.Skipped) == 0 && len(r.NotInNeutron) == 0
}

// Import records what Neutron has on the InfiniBand physnets and the manager
// lacks, as networking-mlnx would have sent it, and reports what the manager
// has and Neutron lacks. The records are read before Neutron is listed: what
// networking-mlnx records meanwhile is not in them, so it is never taken for
// something Neutron lacks. On an error the report says what was done so far.
func Import(ctx context.Context, rec Recorder, src Source, rules store.Rules, opts Options) (Report, error) {
	r := Report{DryRun: opts.DryRun}
	snap, err := rec.Snapshot(ctx)
	if err != nil {
		return r, fmt.Errorf("read the recorded networks: %w", err)
	}
	l, err := src.List(ctx)
	if err != nil {
		return r, err
	}
	inv, err := Select(l, rules)
	if err != nil {
		return r, err
	}
	r.Neutron, r.Ignored, r.read = inv, inv.Ignored, true
	r.Refused = append(r.Refused, inv.Refused...)
	r.Skipped = append(r.Skipped, inv.Skipped...)
	i := importer{rec: rec, src: src, rules: rules, opts: opts, r: &r, refusedNets: make(map[string]bool)}
	if err := i.networks(ctx, inv.Networks, snap.Networks); err != nil {
		return r, err
	}
	if err := i.ports(ctx, inv.Ports); err != nil {
		return r, err
	}
	return r, i.notInNeutron(ctx, inv, snap)
}

// importer is one import's state.
type importer struct {
	rec   Recorder
	src   Source
	rules store.Rules
	opts  Options
	r     *Report
	// refusedNets are the networks the store refused in this run: their
	// ports are skipped, not refused one by one.
	refusedNets map[string]bool
}

// networks records Neutron's networks that are not recorded with their
// partition.
func (i *importer) networks(ctx context.Context, nets []Network, recorded []store.Network) error {
	byID := make(map[string]store.Network, len(recorded))
	for _, n := range recorded {
		byID[n.ID] = n
	}
	for _, n := range nets {
		have, known := byID[n.Spec.ID]
		if known && samePartition(have, n) {
			i.r.InSync++
			continue
		}
		op := store.OpCreateNetwork
		if known {
			op = store.OpUpdateNetwork
		}
		if err := i.recordNetwork(ctx, n, op); err != nil {
			return err
		}
	}
	return nil
}

// samePartition says whether recorded network have has n's partition.
func samePartition(have store.Network, n Network) bool {
	if !have.Managed {
		return false
	}
	if n.Spec.Type == store.TypeFlat {
		return have.PKey == nil
	}
	return have.PKey != nil && *have.PKey == n.PKey
}

// recordNetwork records n as networking-mlnx's request op would have, with
// its dictionary as Neutron has it now.
func (i *importer) recordNetwork(ctx context.Context, n Network, op string) error {
	f := Finding{Kind: "network", ID: n.Spec.ID, About: networkAbout(n.Spec)}
	now, ok, err := recordable(ctx, i, f, n, i.freshNetwork)
	if !ok {
		return err
	}
	job, err := i.rec.RecordNetwork(ctx, store.NetworkChange{Network: now.Spec, Operation: op,
		CreatedBy: CreatedBy, Request: string(now.Raw)})
	return i.outcome("record", &i.r.Recorded, f, job, err, func() { i.refusedNets[n.Spec.ID] = true })
}

// freshNetwork reads n again from Neutron: skip says why it is not recorded
// when Neutron deleted it, or moved it to another partition, since the listing.
func (i *importer) freshNetwork(ctx context.Context, n Network) (Network, string, error) {
	raw, err := i.src.Network(ctx, n.Spec.ID)
	if errors.Is(err, ErrGone) {
		return Network{}, "deleted in Neutron while the import ran", nil
	}
	if err != nil {
		return Network{}, "", err
	}
	inv, err := Select(Listing{Networks: []json.RawMessage{raw}}, i.rules)
	if err != nil || len(inv.Networks) != 1 || inv.Networks[0].PKey != n.PKey {
		return Network{}, "changed in Neutron while the import ran: run the import again", nil
	}
	return inv.Networks[0], "", nil
}

// outcome files f by the store's answer to the change what ("record" or
// "remove"): its job into done (the report's Recorded or Removed); a refusal
// is f's and the import goes on (refused, if any, runs then); any other error
// ends the import.
func (i *importer) outcome(what string, done *[]Finding, f Finding, job store.Job, err error, refused func()) error {
	reason, isRefusal := refusal(err)
	switch {
	case isRefusal:
		f.Reason = reason
		i.r.Refused = append(i.r.Refused, f)
		if refused != nil {
			refused()
		}
		return nil
	case err != nil:
		return fmt.Errorf("%s %s %s: %w", what, f.Kind, f.ID, err)
	}
	f.Reason = fmt.Sprintf("job %d", job.ID)
	*done = append(*done, f)
	return nil
}

// recordable reads obj again from Neutron with fresh (freshPort,
// freshNetwork) before it is recorded: ok says to record what fresh read.
// Otherwise f is filed: as recorded in a dry run, which reads nothing, or as
// skipped, with fresh's reason; err ends the import.
func recordable[T any](ctx context.Context, i *importer, f Finding, obj T, fresh func(context.Context, T) (T, string, error)) (now T, ok bool, err error) {
	if i.opts.DryRun {
		i.r.Recorded = append(i.r.Recorded, f)
		return now, false, nil
	}
	now, skip, err := fresh(ctx, obj)
	if err != nil || skip != "" {
		f.Reason = skip
		i.r.Skipped = append(i.r.Skipped, f)
		return now, false, err
	}
	return now, true, nil
}

// wantGUID is the GUID a port holds once recorded: none while it is unbound
// (store.RecordPort's rule).
func wantGUID(p store.Port) *fabric.GUID {
	if p.Host == "" {
		return nil
	}
	return p.GUID
}

// refusal is the reason the store refused a change, as networking-mlnx's
// request would have been refused: a rule (400), or a network whose
// physnet moved to another fabric (409, until --move-physnet); ok is false
// for any other error.
func refusal(err error) (reason string, ok bool) {
	var rej *store.RejectedError
	var moved *store.PhysnetMovedError
	switch {
	case errors.As(err, &rej):
		return rej.Reason, true
	case errors.As(err, &moved):
		return moved.Error(), true
	}
	return "", false
}
