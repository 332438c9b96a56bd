package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// --status: internal/status reads, prints and judges each fabric's status;
// this opens what it reads.

// runStatusOfEveryFabric is --status without --fabric: every configured
// fabric's status. With the database unreachable its error still says, after
// the database's, this host's OpenSM driver of each.
func runStatusOfEveryFabric(ctx context.Context, path string, log *slog.Logger, asJSON bool) error {
	cfg, err := loadCommandConfig(path)
	if err != nil {
		return err
	}
	fabrics := allFabrics(cfg)
	shown := make([]status.Fabric, len(fabrics))
	for i, f := range fabrics {
		shown[i] = f.status()
	}
	err = withOperatorDatabase(ctx, cfg, log, func(ctx context.Context, db *store.DB) error {
		views := make([]*store.Store, len(fabrics))
		for i, f := range fabrics {
			if views[i], err = f.view(db); err != nil {
				return err
			}
		}
		return status.Run(ctx, shown, views, os.Stdout, asJSON, wrapStatus)
	})
	if !asJSON {
		addDrivers(err, shown)
	}
	return err
}

// wrapStatus names a further fabric's section in the error of reading its
// status, as every operator's command does (operatorFabric.wrap).
func wrapStatus(f status.Fabric, err error) error {
	return operatorFabric{name: f.Name, section: f.Section, cfg: f.Config}.wrap(err)
}

// exitFailed is the exit status of a command that failed (configuration,
// database), as --status's verdicts number it.
const exitFailed = status.ExitFailed

// exitCode is the process' exit status for a command's error.
func exitCode(err error) int {
	var es status.ExitStatus
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &es):
		return es.Code
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitFailed
}
