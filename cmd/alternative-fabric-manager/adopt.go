package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// --adopt-partitions and --release-adopted: switching a running fabric over
// from UFM or another manager without cutting a tenant off
// (docs/switch-over.md). The store decides what an adoption records
// (store/adopted.go); this reads the running file, sorts out what the
// configuration owns, and refuses what the partitions check would refuse
// before anything is recorded.

// runAdopt adopts the partitions of the running partitions file at file.
func runAdopt(ctx context.Context, path, fabricName, file string, log *slog.Logger, w io.Writer) error {
	all, err := loadCommandConfig(path)
	if err != nil {
		return err
	}
	fab, err := selectFabric(all, fabricName)
	if err != nil {
		return err
	}
	plan, tpl, err := planAdoption(ctx, fab.cfg, file)
	if err != nil {
		return fab.wrap(err)
	}
	// Without migrating, as every operator's command: a migration would
	// also write a fabric's state rows, and so hide a fabric no manager
	// has started (changing refuses one).
	return withOperatorDatabase(ctx, all, log, func(ctx context.Context, db *store.DB) error {
		st, err := fab.view(db)
		if err != nil {
			return err
		}
		return fab.wrap(changing(func(ctx context.Context, fab operatorFabric, st *store.Store) error {
			return recordAdoption(ctx, fab.cfg, st, tpl, plan, file, w)
		})(ctx, fab, st))
	})
}

// planAdoption reads the running file and sorts out what the configuration
// cfg owns: what is left to adopt, and the template to check it with.
func planAdoption(ctx context.Context, cfg config.FabricConfig, file string) (partitions.AdoptionPlan, *partitions.Template, error) {
	var none partitions.AdoptionPlan
	text, err := os.ReadFile(file)
	if err != nil {
		return none, nil, fmt.Errorf("--adopt-partitions: %w", err)
	}
	// NVIDIA's grammar is the wider: UFM's files may use ALL_VCAS. What the
	// configured OpenSM cannot read, the check below refuses.
	f, err := partitions.ParseFor(text, fabric.NVIDIA)
	if err != nil {
		return none, nil, fmt.Errorf("--adopt-partitions %s: nothing adopted: %w", file, err)
	}
	tpl, err := loadTemplate(cfg)
	if err != nil {
		return none, nil, err
	}
	static, err := tpl.Static(ctx, cfg.OpenSM.DefaultPartition, cfg.OpenSM.FlatPKey)
	if err != nil {
		return none, nil, fmt.Errorf("[opensm] partitions_template: %w", err)
	}
	plan, err := partitions.PlanAdoption(f, cfg.OpenSM.FlatPKey, static)
	if err != nil {
		return none, nil, fmt.Errorf("--adopt-partitions %s: nothing adopted: %w", file, err)
	}
	return plan, tpl, nil
}

// recordAdoption checks plan against what st records, records it and
// prints one line for each partition of the file.
func recordAdoption(ctx context.Context, cfg config.FabricConfig, st *store.Store, tpl *partitions.Template,
	plan partitions.AdoptionPlan, file string, w io.Writer) error {
	if err := checkAdoption(ctx, cfg, st, tpl, plan.Adopt); err != nil {
		return fmt.Errorf("--adopt-partitions %s: nothing adopted: %w", file, err)
	}
	out, err := st.AdoptPartitions(ctx, store.Adoption{Partitions: plan.Adopt, CreatedBy: "--adopt-partitions"})
	if err != nil {
		return fmt.Errorf("--adopt-partitions %s: nothing adopted: %w", file, err)
	}
	for _, n := range append(plan.Notes, out.Notes...) {
		fmt.Fprintln(w, n)
	}
	if !out.Changed {
		fmt.Fprintf(w, "%d partitions adopted already: nothing changed, nothing recorded\n", len(plan.Adopt))
		return nil
	}
	fmt.Fprintf(w, "adopted at revision %d (job %d): %s\n", out.Job.Revision, out.Job.ID, out.Job.Result)
	return nil
}

// checkAdoption refuses adopted partitions whose file the partitions check
// would refuse with what is recorded now (a name used twice, ALL=full, a
// port of a network listed...): the applier would then apply nothing at
// all. It renders with the configured template, as the applier will.
func checkAdoption(ctx context.Context, cfg config.FabricConfig, st *store.Store, tpl *partitions.Template, adopt []partitions.Statement) error {
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read recorded state: %w", err)
	}
	state := applier.State(snap, cfg.OpenSM.DefaultPartition, cfg.OpenSM.FlatPKey)
	byPKey := map[fabric.PKey]int{}
	for i, a := range state.Adopted {
		byPKey[a.PKey] = i
	}
	for _, a := range adopt {
		if i, ok := byPKey[a.PKey]; ok {
			state.Adopted[i] = a
		} else {
			state.Adopted = append(state.Adopted, a)
		}
	}
	flavour, err := opensm.DetectFlavour(ctx, cfg.OpenSM.Command)
	if err != nil {
		flavour = fabric.Upstream // the stricter, as --render does
	}
	state.Rules = checkRules(cfg, flavour)
	text, err := tpl.Render(ctx, state)
	if err != nil {
		return err
	}
	if err := partitions.Check(text, state); err != nil {
		return fmt.Errorf("the partitions file would be refused: %w", err)
	}
	return nil
}

// runReleaseAdopted releases every adopted member of pkey.
func runReleaseAdopted(ctx context.Context, path, fabricName, pkey string, log *slog.Logger, w io.Writer) error {
	p, err := parsePKeyFlag(pkey)
	if err != nil {
		return fmt.Errorf("--release-adopted: %w", err)
	}
	return withOperatorStore(ctx, path, fabricName, log, changing(func(ctx context.Context, _ operatorFabric, st *store.Store) error {
		out, err := st.ReleaseAdoptedMembers(ctx, store.AdoptedRelease{PKey: p, CreatedBy: "--release-adopted"})
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("pkey %s has no adopted members", p)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "released from pkey %s at revision %d (job %d): %s\n", p, out.Job.Revision, out.Job.ID, guidList(out.Released))
		return nil
	}))
}

// parsePKeyFlag reads a pkey written 0x and hex digits, or in decimal (a
// VLAN ID), from 0x0001 to 0x7ffe.
func parsePKeyFlag(s string) (fabric.PKey, error) {
	v, err := strconv.ParseUint(s, 0, 16)
	if err != nil || v == 0 || v > uint64(fabric.MaxNetworkPKey) {
		return 0, fmt.Errorf("%q is not a pkey: want 0x0001-%s (or a VLAN ID)", s, fabric.MaxNetworkPKey)
	}
	return fabric.PKey(v), nil
}
