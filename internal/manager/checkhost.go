package manager

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// warnCheckHostUnconfirmed warns at start when [api] check_host is on but
// no host of the fabric is confirmed: the check ties a port's GUID to its
// host through the confirmed hosts alone, so until --confirm-hosts records
// them it refuses nothing, and an operator who turned it on would believe
// otherwise.
func warnCheckHostUnconfirmed(ctx context.Context, cfg config.FabricConfig, st *store.Store, log *slog.Logger) error {
	if !cfg.API.CheckHost {
		return nil
	}
	hosts, err := st.ConfirmedHosts(ctx)
	if err != nil {
		return fmt.Errorf("check [api] check_host's confirmed hosts: %w", err)
	}
	if len(hosts) == 0 {
		log.Warn("[api] check_host is on but no host of this fabric is confirmed: it refuses no port until " +
			"--confirm-hosts records the hosts of OpenSM's sweep")
	}
	return nil
}
