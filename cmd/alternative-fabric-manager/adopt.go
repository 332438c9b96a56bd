package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

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
	all, err := config.Load(path)
	if err != nil {
		return err
	}
	fab, err := selectFabric(all, fabricName)
	if err != nil {
		return err
	}
	if err := adoptInto(ctx, all, fab, file, log, w); err != nil {
		return fab.wrap(err)
	}
	return nil
}

// adoptInto adopts the partitions of file into fabric fab of configuration all.
func adoptInto(ctx context.Context, all *config.Config, fab operatorFabric, file string, log *slog.Logger, w io.Writer) error {
	cfg := fab.cfg
	text, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--adopt-partitions: %w", err)
	}
	// NVIDIA's grammar is the wider: UFM's files may use ALL_VCAS. What the
	// configured OpenSM cannot read, the check below refuses.
	f, err := partitions.ParseFor(text, fabric.NVIDIA)
	if err != nil {
		return fmt.Errorf("--adopt-partitions %s: nothing adopted: %w", file, err)
	}
	tpl, err := loadTemplate(cfg)
	if err != nil {
		return err
	}
	static, err := tpl.Static(ctx, cfg.OpenSM.DefaultPartition, cfg.OpenSM.FlatPKey)
	if err != nil {
		return fmt.Errorf("[opensm] partitions_template: %w", err)
	}
	plan, err := partitions.PlanAdoption(f, cfg.OpenSM.FlatPKey, static)
	if err != nil {
		return fmt.Errorf("--adopt-partitions %s: nothing adopted: %w", file, err)
	}
	db, err := openStore(ctx, all, all.Database.AutoMigrate, fabricRules(all), log)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := fab.view(db)
	if err != nil {
		return err
	}
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
		fmt.Fprintf(w, "%d partitions adopted already: nothing changed (job %d)\n", len(plan.Adopt), out.Job.ID)
		return nil
	}
	fmt.Fprintf(w, "adopted at revision %d (job %d): %s\n", out.Job.Revision, out.Job.ID, out.Job.Result)
	return nil
}

// checkAdoption refuses adopted partitions whose file the partitions check
// would refuse with what is recorded now (a name used twice, ALL=full, a
// port of a network listed...): the applier would then apply nothing at
// all. It renders with the configured template, as the applier will.
func checkAdoption(ctx context.Context, cfg *config.Config, st *store.Store, tpl *partitions.Template, adopt []partitions.Statement) error {
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
	return withOperatorStore(ctx, path, fabricName, log, func(ctx context.Context, _ operatorFabric, st *store.Store) error {
		out, err := st.ReleaseAdoptedMembers(ctx, store.AdoptedRelease{PKey: p, CreatedBy: "--release-adopted"})
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("pkey %s has no adopted members", p)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "released from pkey %s at revision %d (job %d): %s\n", p, out.Job.Revision, out.Job.ID, guidList(out.Released))
		return nil
	})
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

// AdoptedStatus is one adopted partition as --status shows it.
type AdoptedStatus struct {
	PKey string `json:"pkey"`
	Name string `json:"name"`
	// Owner is what has the pkey now: "network <id>", "Kubernetes pkey",
	// "the flat partition"; "" while the adopted partition is written as it is.
	Owner   string                `json:"owner"`
	Members []AdoptedMemberStatus `json:"members"`
	// Flags are the header's flags as the running file wrote them (ipoib,
	// mtu=4...), written while no owner has the pkey.
	Flags    []string `json:"flags"`
	Revision int64    `json:"revision"`
}

// AdoptedMemberStatus is one adopted member.
type AdoptedMemberStatus struct {
	GUID       string `json:"guid"`
	Membership string `json:"membership"`
}

// readAdopted reads the adopted partitions and who owns their pkeys.
func readAdopted(ctx context.Context, cfg *config.Config, st *store.Store) ([]AdoptedStatus, error) {
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("adopted partitions: %w", err)
	}
	owners := map[fabric.PKey]string{cfg.OpenSM.FlatPKey: "the flat partition"}
	for _, n := range snap.Networks {
		if n.PKey != nil {
			owners[*n.PKey] = "network " + n.ID
		}
	}
	for _, k := range snap.Kubernetes {
		owners[k.PKey] = "Kubernetes pkey"
	}
	out := []AdoptedStatus{}
	for _, a := range snap.Adopted {
		s := AdoptedStatus{PKey: a.PKey.String(), Name: a.Statement.Name, Owner: owners[a.PKey],
			Members: []AdoptedMemberStatus{}, Flags: []string{}, Revision: a.Revision}
		for _, m := range a.Statement.Members {
			s.Members = append(s.Members, AdoptedMemberStatus{GUID: m.GUID.String(), Membership: string(m.Membership)})
		}
		for _, f := range a.Statement.Flags {
			s.Flags = append(s.Flags, strings.TrimSuffix(f.Name+"="+f.Value, "="))
		}
		out = append(out, s)
	}
	return out, nil
}

// printAdopted writes --status's line for each adopted partition.
func printAdopted(w io.Writer, adopted []AdoptedStatus) {
	for _, a := range adopted {
		owner := "no owner yet: written as the running file had it"
		if a.Owner != "" {
			owner = "owned by " + a.Owner + ": its members beside the owner's until released"
		}
		fmt.Fprintf(w, "adopted:\tpkey %s (%s), %d members, %s\n", a.PKey, a.Name, len(a.Members), owner)
	}
}
