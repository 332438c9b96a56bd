package manager

import (
	"context"
	"log/slog"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Parts are the pieces of a fabric's wiring that the operator's commands
// share (--status, --render, --audit, the keys commands) and that live
// beside them: the manager calls them and does not own them, so that each
// is written once. Every field is required.
type Parts struct {
	// Version is the binary's version, which the pkeys API reports.
	Version string
	// CheckSites refuses fabrics whose OpenSMs would meet: one subnet, one
	// HCA port, one cache directory.
	CheckSites func(cfg *config.Config) error
	// CheckRecordedState refuses a start whose configuration the recorded
	// state fails (what --render prints).
	CheckRecordedState func(ctx context.Context, cfg config.FabricConfig, st *store.Store, tpl *partitions.Template,
		flavour fabric.Flavour) ([]byte, error)
	// Keys are OpenSM's keys, as the fabric's database keeps them.
	Keys func(st *store.Store) opensm.KeySource
	// Readback is the reader of the ports' P_Key tables the applier proves
	// jobs with; nil for [opensm] verify = log.
	Readback func(ctx context.Context, cfg config.FabricConfig, keys opensm.KeySource) (*pkeyread.Reader, error)
	// Audit is the applier's audit of the fabric; SecondSM its look for a
	// second subnet manager (nil: none).
	Audit    func(ctx context.Context, cfg config.FabricConfig, st *store.Store, sm *opensm.Supervisor, log *slog.Logger) applier.AuditConfig
	SecondSM func(ctx context.Context, cfg config.FabricConfig, st *store.Store, sm *opensm.Supervisor, log *slog.Logger) *applier.SecondSMCheck
}
