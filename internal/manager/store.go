package manager

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// OpenStore opens the configured database, migrating it when asked to, with
// a view per fabric (fabrics: each one's rules, the default first).
func OpenStore(ctx context.Context, cfg *config.Config, migrate bool, fabrics []store.FabricRules, log *slog.Logger) (*store.DB, error) {
	conn, err := config.ParseConnection(cfg.Database.Connection)
	if err != nil {
		return nil, err
	}
	if conn.Engine == config.EngineSQLite {
		if err := privateSQLite(conn.DSN); err != nil {
			return nil, fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
		}
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A session cut off inside a transaction ends well before a lease can
	// expire (driver.IdleTransactionFor), with or without [ha].
	st, err := storeopen.OpenFabrics(octx, conn.Engine, conn.DSN, migrate, fabrics, log,
		store.IdleTransactionFor(cfg.HA.LeaseTimeout))
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", config.RedactURL(cfg.Database.Connection), err)
	}
	return st, nil
}

// PartitionFlags is store.Rules.PartitionFlags for fabric cfg's template:
// s, one owner's partition, rendered beside the configured default and flat
// partitions.
func PartitionFlags(cfg config.FabricConfig, tpl *partitions.Template) func(context.Context, partitions.State, fabric.PKey) ([]partitions.Flag, bool, error) {
	return func(ctx context.Context, s partitions.State, pkey fabric.PKey) ([]partitions.Flag, bool, error) {
		s.DefaultPartition, s.Flat.PKey = cfg.OpenSM.DefaultPartition, cfg.OpenSM.FlatPKey
		return tpl.HeaderFlags(ctx, s, pkey)
	}
}

// LoadTemplate reads [opensm] partitions_template, once, or returns the built-in
// template when it is not set.
func LoadTemplate(cfg config.FabricConfig) (*partitions.Template, error) {
	path := cfg.OpenSM.PartitionsTemplate
	if path == "" {
		return partitions.BuiltinTemplate(), nil
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("[opensm] partitions_template: %w", err)
	}
	return partitions.ParseTemplate(path, text)
}

// CheckRules are the partitions check's configurable rules, for the OpenSM
// that reads the file: only NVIDIA's knows ALL_VCAS.
func CheckRules(cfg config.FabricConfig, flavour fabric.Flavour) partitions.Rules {
	return partitions.Rules{SharedDefaultPartition: cfg.OpenSM.SharedDefaultPartition, Flavour: flavour}
}
