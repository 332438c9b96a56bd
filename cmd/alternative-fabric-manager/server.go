package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/manager"
)

// The commands read the configuration and the database as the manager's
// wiring does: through its helpers, so that a command and the running
// manager never disagree on a fabric's rules, template or database.
var (
	openStore    = manager.OpenStore
	loadTemplate = manager.LoadTemplate
	checkRules   = manager.CheckRules
	fabricRules  = manager.FabricRules
	// partitionFlags is the template's flags of an owner's partition
	// (store.Rules.PartitionFlags).
	partitionFlags = manager.PartitionFlags
)

// loadCommandConfig reads the configuration for a command and refuses what
// the manager's start would refuse between fabrics once their env files are
// read (manager.FabricSiteConflicts): two OpenSMs on one HCA port, one
// simulated fabric or cache directory. The configuration's own checks cannot
// open the env files; without this a command would act on a configuration
// the manager refuses to start with. An env file that cannot be read is not
// the command's error: --status is how an operator sees the OpenSM it stops.
func loadCommandConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := manager.FabricSiteConflicts(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// run is the manager: wired from its configuration, serving its HTTP
// listeners, and applying while elected, until ctx ends or a server fails.
func run(ctx context.Context, path string, level slog.Level, hup <-chan os.Signal) error {
	cfg, log, err := loadRunConfig(path, level)
	if err != nil {
		return err
	}
	mgr, err := manager.New(ctx, cfg, log, versionString())
	if err != nil {
		return err
	}
	return mgr.Run(ctx, path, hup)
}

// loadRunConfig reads the configuration and logs as it says, from now on.
func loadRunConfig(path string, level slog.Level) (*config.Config, *slog.Logger, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	if cfg.File, err = filepath.Abs(path); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	log := newLogger(cfg.Log.Format, level)
	slog.SetDefault(log)
	if err := cfg.CheckToken(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	log.Info("starting", "config", cfg)
	return cfg, log, nil
}
