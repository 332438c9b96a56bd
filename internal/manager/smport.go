package manager

import (
	"context"
	"log/slog"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// recordSMPort records the port the fabric's OpenSM runs on ([opensm_conf]
// guid) as a subnet manager's, which no client may name: at every start,
// leader or not, since an HA standby's port is the master's once it leads.
// Without a guid, OpenSM picks a port the manager does not know, and none
// is recorded.
func recordSMPort(ctx context.Context, cfg config.FabricConfig, st *store.Store, holder string, log *slog.Logger) error {
	guid, err := cfg.OpenSMGUID()
	if err != nil {
		return err
	}
	if guid == 0 {
		log.Warn("the subnet manager's port is not reserved: [opensm_conf] guid names no port, so a client may name it " +
			"(set it, or list the port in [api] reserved_guids)")
		return nil
	}
	return st.RecordSMPort(ctx, guid, holder)
}
