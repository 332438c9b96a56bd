package manager

import (
	"context"
	"log/slog"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// secondSMCheck is the applier's look for a second subnet manager: SMPs sent
// from OpenSM's port ([opensm_conf] guid) on the fabric OpenSM's environment
// names. nil, with a warning, where it cannot run: no guid (OpenSM picks a
// port the manager does not know) or no SMP transport.
func secondSMCheck(ctx context.Context, cfg config.FabricConfig, st *store.Store, sm *opensm.Supervisor, mkeys *readbackMKeys,
	log *slog.Logger) *applier.SecondSMCheck {
	own, err := cfg.OpenSMGUID()
	if err != nil || own == 0 {
		log.Warn("no second subnet manager is looked for: [opensm_conf] guid names no port", "error", err)
		return nil
	}
	// One connection, kept from look to look within a term (fabricReader).
	r, _, err := fabricReader(ctx, cfg, mkeys, 1)
	if err != nil {
		log.Warn("no second subnet manager is looked for: no SMP transport for this fabric", "error", err)
		return nil
	}
	return &applier.SecondSMCheck{Dialer: r.Dialer, MKey: r.MKey, MKeys: r.MKeys, Own: own, Store: st, Restart: sm.Restart,
		AfterLook: pauseAfterSMLook(log)}
}
