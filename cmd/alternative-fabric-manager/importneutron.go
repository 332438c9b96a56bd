package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/neutronimport"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// exitDiffers is --import-neutron's exit status when the records and Neutron
// still differ after the run (or, with --dry-run, would be changed): what it
// printed lists each difference.
const exitDiffers = 5

// neutronTimeout bounds logging in to Keystone and each request to Neutron.
const neutronTimeout = 60 * time.Second

// runImportNeutron reads Neutron's API as [neutron] says and records what
// it has on the InfiniBand physnets and the manager lacks (docs/neutron-import.md).
// Each fabric is compared with Neutron's networks on its own physnets, as
// networking-mlnx's requests are routed, and reported on its own.
// Exit 0: the records and Neutron agree; exitDiffers: what differs is listed;
// exitFailed: nothing could be compared, or the import stopped (what it did
// so far is listed).
func runImportNeutron(ctx context.Context, path string, opts neutronimport.Options, log *slog.Logger) error {
	cfg, err := loadCommandConfig(path)
	if err != nil {
		return err
	}
	fabrics := allFabrics(cfg)
	rules, err := importRules(ctx, cfg, fabrics)
	if err != nil {
		return err
	}
	db, err := openExisting(ctx, cfg, rules, operatorConnectTimeout, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := checkEveryStarted(ctx, db, fabrics); err != nil {
		return err
	}
	client, err := neutronimport.Connect(ctx, cfg.Neutron.CloudsFile, cfg.Neutron.Cloud)
	if err != nil {
		return err
	}
	client.HTTPClient.Timeout = neutronTimeout
	src := &listedOnce{Source: neutronimport.API{Client: client}}
	var verdict error
	for i, f := range fabrics {
		if len(fabrics) > 1 {
			if i > 0 {
				fmt.Fprintln(os.Stdout)
			}
			fmt.Fprintf(os.Stdout, "fabric %s (%s):\n", f.name, f.section)
		}
		view, err := f.view(db)
		if err != nil {
			return err
		}
		v, err := importFabric(ctx, view, src, rules[i].Rules, opts, os.Stdout)
		if err != nil {
			return f.wrap(err)
		}
		verdict = cmp.Or(verdict, v)
	}
	return verdict
}

// importFabric imports into one fabric's view st what Neutron has on the
// fabric's physnets (rules), then ends the switch-over of its adopted
// partitions, writing the report to w. It returns status.ExitStatus{Code: exitDiffers}
// when the records and Neutron differ.
func importFabric(ctx context.Context, st *store.Store, src neutronimport.Source, rules store.Rules,
	opts neutronimport.Options, w io.Writer) (verdict, err error) {
	report, err := neutronimport.Import(ctx, importRecorder{view: st, db: st.DB()}, src, rules, opts)
	if werr := report.Write(w); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return nil, fmt.Errorf("import from Neutron: %w", err)
	}
	pending, err := releaseAdoptedUnowned(ctx, st, report.Neutron.Members(), opts.DryRun, w)
	switch {
	case err != nil:
		return nil, fmt.Errorf("import from Neutron: release adopted members: %w", err)
	case !report.Agrees() || pending > 0:
		return status.ExitStatus{Code: exitDiffers}, nil
	}
	return nil, nil
}

// listedOnce is a Source that lists Neutron once however many fabrics read
// the listing: each fabric's import selects its own physnets' networks from
// the same listing, as one request to the manager sees one Neutron.
type listedOnce struct {
	neutronimport.Source
	listing *neutronimport.Listing
}

func (l *listedOnce) List(ctx context.Context) (neutronimport.Listing, error) {
	if l.listing == nil {
		listing, err := l.Source.List(ctx)
		if err != nil {
			return neutronimport.Listing{}, err
		}
		l.listing = &listing
	}
	return *l.listing, nil
}

// releaseAdoptedUnowned ends the switch-over of docs/switch-over.md for each
// of Neutron's InfiniBand networks whose pkey has adopted members: those no
// port of that network has in Neutron leave the partition, once the network
// owns it (a network the import could not record leaves its pkey's adopted
// members as they are). With dryRun it lists them and returns how many
// would be released.
func releaseAdoptedUnowned(ctx context.Context, st *store.Store, neutron []neutronimport.PKeyMembers, dryRun bool, w io.Writer) (pending int, err error) {
	adopted, err := st.AdoptedPartitions(ctx)
	if err != nil {
		return 0, err
	}
	members := make(map[fabric.PKey][]fabric.GUID, len(adopted))
	for _, a := range adopted {
		for _, m := range a.Statement.Members {
			members[a.PKey] = append(members[a.PKey], m.GUID)
		}
	}
	for _, n := range neutron {
		unowned := slices.DeleteFunc(slices.Clone(members[n.PKey]), func(g fabric.GUID) bool { return slices.Contains(n.GUIDs, g) })
		if len(unowned) == 0 {
			continue
		}
		if dryRun {
			pending += len(unowned)
			fmt.Fprintf(w, "would release adopted: pkey %s: %s (no port of Neutron has them)\n", n.PKey, guidList(unowned))
			continue
		}
		out, err := st.ReleaseAdoptedMembers(ctx, store.AdoptedRelease{PKey: n.PKey, Keep: n.GUIDs, OwnedOnly: true,
			CreatedBy: "--import-neutron"})
		switch {
		case errors.Is(err, store.ErrNotFound): // released meanwhile
		case errors.Is(err, store.ErrAdoptedUnowned):
			pending += len(unowned)
			fmt.Fprintf(w, "kept adopted: pkey %s: %s (no network owns the pkey)\n", n.PKey, guidList(unowned))
		case err != nil:
			return pending, err
		case len(out.Released) > 0:
			fmt.Fprintf(w, "released adopted: pkey %s: %s (job %d)\n", n.PKey, guidList(out.Released), out.Job.ID)
		}
	}
	return pending, nil
}

// guidList is guids as a comma-separated list.
func guidList(guids []fabric.GUID) string {
	s := make([]string, len(guids))
	for i, g := range guids {
		s[i] = g.String()
	}
	return strings.Join(s, ", ")
}

// importRules are, for each fabric of cfg, the rules the API records
// networking-mlnx's requests by, but for the fabric's port limit, which the
// applier still holds every apply to: a network on a static partition's pkey
// and a port listed in the template are refused alike.
func importRules(ctx context.Context, cfg *config.Config, fabrics []operatorFabric) ([]store.FabricRules, error) {
	rules := fabricRules(cfg)
	for i, f := range fabrics {
		tpl, err := loadTemplate(f.cfg)
		if err != nil {
			return nil, f.wrap(err)
		}
		static, err := tpl.Static(ctx, f.cfg.OpenSM.DefaultPartition, f.cfg.OpenSM.FlatPKey)
		if err != nil {
			return nil, f.wrap(fmt.Errorf("[opensm] partitions_template: %w", err))
		}
		rules[i].Rules.StaticPKey = static.Name
		rules[i].Rules.StaticMember = static.Listing
		rules[i].Rules.PartitionFlags = partitionFlags(f.cfg, tpl)
	}
	return rules, nil
}

// importRecorder is what an import of one fabric reads and writes: it reads
// the fabric's view, and records through the database, which routes each
// Neutron change to its fabric as it routes the API's (a view records only
// its own fabric's).
type importRecorder struct {
	view *store.Store
	db   *store.DB
}

func (r importRecorder) Snapshot(ctx context.Context) (store.Snapshot, error) {
	return r.view.Snapshot(ctx)
}

func (r importRecorder) GetPort(ctx context.Context, id string) (store.Port, error) {
	return r.view.GetPort(ctx, id)
}

func (r importRecorder) RecordNetwork(ctx context.Context, c store.NetworkChange) (store.Job, error) {
	return r.db.RecordNetwork(ctx, c)
}

func (r importRecorder) RecordPort(ctx context.Context, c store.PortChange) (store.Job, error) {
	return r.db.RecordPort(ctx, c)
}

func (r importRecorder) RemoveNetwork(ctx context.Context, rm store.NetworkRemoval) (store.Job, error) {
	return r.db.RemoveNetwork(ctx, rm)
}

func (r importRecorder) RemovePort(ctx context.Context, rm store.PortRemoval) (store.Job, error) {
	return r.db.RemovePort(ctx, rm)
}
