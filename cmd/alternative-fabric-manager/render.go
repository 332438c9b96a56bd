package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/manager"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// runRender is --render [--fabric NAME]: the partitions file of one fabric.
func runRender(ctx context.Context, path, fabricName string, log *slog.Logger) error {
	cfg, err := loadCommandConfig(path)
	if err != nil {
		return err
	}
	return renderFabric(ctx, cfg, fabricName, os.Stdout, log)
}

// renderFabric writes to out the partitions file fabric name's recorded
// state renders to with its template, once it passes the check; otherwise it
// writes nothing and returns the template's error or every problem the check
// found. The database is never created nor migrated, whatever [database]
// auto_migrate says: trying a template with a new binary must not upgrade
// the schema.
func renderFabric(ctx context.Context, cfg *config.Config, name string, out io.Writer, log *slog.Logger) error {
	f, err := selectFabric(cfg, name)
	if err != nil {
		return err
	}
	tpl, err := loadTemplate(f.cfg)
	if err != nil {
		return f.wrap(err)
	}
	db, err := openExisting(ctx, cfg, fabricRules(cfg), 30*time.Second, log)
	if nc := (notReadyError{}); errors.As(err, &nc) {
		return nc
	}
	if err != nil {
		return fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
	}
	defer db.Close()
	view, err := f.view(db)
	if err != nil {
		return err
	}
	// The check reads the file as the fabric's OpenSM would; if it cannot be
	// asked, as the distributions' OpenSM, the stricter one.
	flavour, err := opensm.DetectFlavour(ctx, f.cfg.OpenSM.Command)
	if err != nil {
		flavour = fabric.Upstream
	}
	text, err := manager.CheckRecordedState(ctx, f.cfg, view, tpl, flavour)
	if err != nil {
		return f.wrap(err)
	}
	_, err = out.Write(text)
	return err
}
