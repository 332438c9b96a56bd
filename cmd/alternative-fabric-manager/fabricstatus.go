package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// --status of several fabrics: each fabric's status is read and judged as
// one fabric's always was; the command's verdict is the worst of theirs, so
// that a script reading the exit status hears of any fabric's held jobs.

// StatusReport is what --status --json prints: the status of the fabric
// shown first (the default fabric's without --fabric) at the top level,
// where scripts written before several fabrics read it, and every fabric
// shown in Fabrics.
type StatusReport struct {
	Status
	Fabrics []FabricStatus `json:"fabrics"`
}

// FabricStatus is one fabric's status.
type FabricStatus struct {
	Name string `json:"name"`
	Status
}

// runStatusOfEveryFabric is --status without --fabric: every configured
// fabric's status. With the database unreachable it still shows this host's
// OpenSM driver of each.
func runStatusOfEveryFabric(ctx context.Context, path string, log *slog.Logger, asJSON bool) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	fabrics := allFabrics(cfg)
	err = withOperatorDatabase(ctx, cfg, log, func(ctx context.Context, st *store.Store) error {
		views := make([]*store.Store, len(fabrics))
		for i, f := range fabrics {
			if views[i], err = f.view(st); err != nil {
				return err
			}
		}
		return runStatus(ctx, fabrics, views, os.Stdout, asJSON)
	})
	if ue := (*unreachableError)(nil); !asJSON && errors.As(err, &ue) {
		printDriverOf(os.Stdout, fabrics)
	}
	return err
}

// runStatus reads the status of each fabric from its view of the store and
// prints it; its verdict is the worst fabric's (none with asJSON, whose
// fields carry it).
func runStatus(ctx context.Context, fabrics []operatorFabric, views []*store.Store, w io.Writer, asJSON bool) error {
	statuses := make([]FabricStatus, len(fabrics))
	for i, f := range fabrics {
		s, err := readStatus(ctx, f.cfg, views[i])
		if err != nil {
			return f.wrap(err)
		}
		statuses[i] = FabricStatus{Name: f.name, Status: s}
	}
	if asJSON {
		return writeStatusJSON(w, statuses)
	}
	// A configuration of the default fabric alone prints as it always did.
	if len(fabrics) == 1 && fabrics[0].name == config.DefaultFabric && len(fabrics[0].cfg.Fabrics) == 0 {
		if err := printStatus(w, statuses[0].Status); err != nil {
			return err
		}
		return statusVerdict(statuses[0].Status)
	}
	return printFabricStatuses(w, fabrics, statuses)
}

// writeStatusJSON writes --status --json's object: the first fabric's
// status at the top level, every fabric's in fabrics.
func writeStatusJSON(w io.Writer, statuses []FabricStatus) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(StatusReport{Status: statuses[0].Status, Fabrics: statuses})
}

// printFabricStatuses writes a block per fabric, then which fabrics hold
// jobs, and returns the worst verdict.
func printFabricStatuses(w io.Writer, fabrics []operatorFabric, statuses []FabricStatus) error {
	var worst error
	var held, unchecked []string
	for i, s := range statuses {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "fabric %s (%s):\n", s.Name, fabrics[i].section)
		if err := printStatus(w, s.Status); err != nil {
			return err
		}
		v := statusVerdict(s.Status)
		switch exitCode(v) {
		case exitJobsHeld:
			held = append(held, s.Name)
		case exitCannotTell:
			unchecked = append(unchecked, s.Name)
		}
		worst = worseVerdict(worst, v)
	}
	if len(statuses) > 1 {
		fmt.Fprintln(w)
		switch {
		case len(held) > 0:
			fmt.Fprintf(w, "fabrics whose jobs do not complete: %s\n", strings.Join(held, ", "))
		case len(unchecked) > 0:
			fmt.Fprintf(w, "fabrics with something not checked from this host: %s\n", strings.Join(unchecked, ", "))
		default:
			fmt.Fprintln(w, "every fabric's jobs complete")
		}
	}
	return worst
}

// worseVerdict is the worse of two --status verdicts: held jobs, then
// something that could not be checked, then nothing.
func worseVerdict(a, b error) error {
	rank := map[int]int{exitJobsComplete: 0, exitCannotTell: 1, exitJobsHeld: 2}
	if rank[exitCode(b)] > rank[exitCode(a)] {
		return b
	}
	return a
}
