package manager

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// AuditReader is the SMP reader of the audit (the leader's and --audit's). checkEnforcement is false on
// the simulated fabric, which keeps no switch port's enforcement bits (they
// read 0 whatever OpenSM set): judging them there would close the gate for
// good. Two connections: the simulator serves ten clients at once, OpenSM and
// the read-back proof included, and leaves room for an --audit beside it.
func AuditReader(ctx context.Context, cfg config.FabricConfig, st *store.Store) (r *pkeyread.Reader, checkEnforcement bool, err error) {
	mkeys, err := newReadbackMKeys(ctx, cfg, opensm.DatabaseKeys{Store: st})
	if err != nil {
		return nil, false, fmt.Errorf("the M_Key to audit the fabric with: %w", err)
	}
	r, simulated, err := fabricReader(ctx, cfg, mkeys, 2)
	if err != nil {
		return nil, false, fmt.Errorf("no SMP transport to audit the fabric: %w", err)
	}
	return r, !simulated, nil
}

// auditConfig is the applier's audit: [opensm] audit_interval, with the
// reader this host has; none (and a warning) without one.
func auditConfig(ctx context.Context, cfg config.FabricConfig, st *store.Store, sm *opensm.Supervisor, log *slog.Logger) applier.AuditConfig {
	if cfg.OpenSM.AuditInterval <= 0 {
		return applier.AuditConfig{}
	}
	r, enforcement, err := AuditReader(ctx, cfg, st)
	if err != nil {
		log.Warn("the fabric audit is off", "reason", err.Error())
		return applier.AuditConfig{}
	}
	return applier.AuditConfig{Interval: cfg.OpenSM.AuditInterval, Reader: r, CheckEnforcement: enforcement, Recorder: st,
		RestartOpenSM: sm.Restart}
}
