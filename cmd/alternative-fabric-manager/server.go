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
)

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
