package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/neutronimport"
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
// Exit 0: the records and Neutron agree; exitDiffers: what differs is listed;
// exitFailed: nothing could be compared, or the import stopped (what it did
// so far is listed).
func runImportNeutron(ctx context.Context, path string, opts neutronimport.Options, log *slog.Logger) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	rules, err := importRules(ctx, cfg)
	if err != nil {
		return err
	}
	client, err := neutronimport.Connect(ctx, cfg.Neutron.CloudsFile, cfg.Neutron.Cloud)
	if err != nil {
		return err
	}
	client.HTTPClient.Timeout = neutronTimeout
	st, err := openExisting(ctx, cfg, rules, operatorConnectTimeout, log)
	if err != nil {
		return err
	}
	defer st.Close()
	report, err := neutronimport.Import(ctx, st, neutronimport.API{Client: client}, rules, opts)
	if werr := report.Write(os.Stdout); werr != nil && err == nil {
		err = werr
	}
	switch {
	case err != nil:
		return fmt.Errorf("import from Neutron: %w", err)
	case !report.Agrees():
		return exitStatus{exitDiffers}
	}
	return nil
}

// importRules are the rules the API records networking-mlnx's requests by,
// but for the fabric's port limit, which the applier still holds every
// apply to: a network on a static partition's pkey and a port listed in the
// template are refused alike.
func importRules(ctx context.Context, cfg *config.Config) (store.Rules, error) {
	tpl, err := loadTemplate(cfg)
	if err != nil {
		return store.Rules{}, err
	}
	static, err := tpl.Static(ctx, cfg.OpenSM.DefaultPartition, cfg.OpenSM.FlatPKey)
	if err != nil {
		return store.Rules{}, fmt.Errorf("[opensm] partitions_template: %w", err)
	}
	rules := storeRules(cfg)
	rules.StaticPKey = static.Name
	rules.StaticMember = static.Listing
	return rules, nil
}
