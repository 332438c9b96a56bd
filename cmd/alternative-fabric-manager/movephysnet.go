package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// --move-physnet PHYSNET: after an operator gives a physical network to
// another fabric, the networks recorded on it stay on the old fabric and
// their changes are refused (409) until this moves them, with their ports
// and memberships, to the fabric the configuration now gives PHYSNET
// (docs/multi-fabric.md). The store decides and writes the move
// (store/physnetmove.go); this reads the configuration, checks --fabric if
// given, and says what moved.

// runMovePhysnet moves the networks of physnet; with dryRun it only says
// what would move. fab, if given, must be the fabric the configuration
// gives physnet: the operator's word of where it goes.
func runMovePhysnet(ctx context.Context, path string, fab *fabricChoice, physnet string, dryRun bool, log *slog.Logger, w io.Writer) error {
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
	if nc := (notReadyError{}); errors.As(err, &nc) {
		return nc
	}
	if err != nil {
		return fmt.Errorf("database %s is unreachable: %w", config.RedactURL(cfg.Database.Connection), err)
	}
	defer db.Close()
	if err := checkEveryStarted(ctx, db, fabrics); err != nil {
		return err
	}
	to := db.FabricOfPhysnet(physnet)
	if fab.given && fab.name != to {
		if _, err := selectFabric(cfg, fab.name); err != nil {
			return err
		}
		return usageError{fmt.Sprintf("--move-physnet %s --fabric %s: the configuration gives physical network %q to fabric %s; "+
			"nothing moved", physnet, fab.name, physnet, to)}
	}
	out, err := db.MovePhysnet(ctx, store.PhysnetMove{Physnet: physnet, DryRun: dryRun, CreatedBy: "--move-physnet"})
	if rej := (*store.RejectedError)(nil); errors.As(err, &rej) {
		return fmt.Errorf("--move-physnet %s: nothing moved: %s", physnet, rej.Reason)
	}
	if err != nil {
		return fmt.Errorf("--move-physnet %s: nothing moved: %w", physnet, err)
	}
	printMove(w, physnet, out, dryRun)
	return nil
}

// printMove writes one line per network moved (or to move), then each
// fabric's job.
func printMove(w io.Writer, physnet string, out store.PhysnetMoveOutcome, dryRun bool) {
	if len(out.Networks) == 0 {
		fmt.Fprintf(w, "physical network %s: every network recorded on it is on fabric %s, the one the configuration "+
			"gives it: nothing to move\n", physnet, out.To)
		return
	}
	verb := "moved"
	if dryRun {
		verb = "would move"
	}
	for _, n := range out.Networks {
		line := fmt.Sprintf("%s: network %s (%s, %d ports, %d members) from fabric %s to fabric %s",
			verb, n.Network.ID, partitionOf(n.Network), n.Ports, n.Members, n.From, out.To)
		if n.Note != "" {
			line += ": " + n.Note
		}
		fmt.Fprintln(w, line)
	}
	for _, j := range out.Jobs {
		fmt.Fprintf(w, "fabric %s: job %d at revision %d (%s)\n", j.Fabric, j.ID, j.Revision, strings.ToLower(j.Status))
	}
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing was written")
	}
}

// partitionOf says which partition a moved network has on its new fabric.
func partitionOf(n store.Network) string {
	switch {
	case !n.Managed:
		return "no partition"
	case n.PKey == nil:
		return "the flat partition"
	}
	return "pkey " + n.PKey.String()
}
