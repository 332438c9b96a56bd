package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// secondSMCheck is the applier's look for a second subnet manager: SMPs sent
// from OpenSM's port ([opensm_conf] guid) on the fabric OpenSM's environment
// names. nil, with a warning, where it cannot run: no guid (OpenSM picks a
// port the manager does not know) or no SMP transport.
func secondSMCheck(ctx context.Context, cfg *config.Config, st *store.Store, sm *opensm.Supervisor, log *slog.Logger) *applier.SecondSMCheck {
	own, err := cfg.OpenSMGUID()
	if err != nil || own == 0 {
		log.Warn("no second subnet manager is looked for: [opensm_conf] guid names no port", "error", err)
		return nil
	}
	// One connection at each look, closed after it.
	r, _, err := fabricReader(ctx, cfg, databaseKeys{st}, 1)
	if err != nil {
		log.Warn("no second subnet manager is looked for: no SMP transport for this fabric", "error", err)
		return nil
	}
	return &applier.SecondSMCheck{Dialer: r.Dialer, MKey: r.MKey, MKeys: r.MKeys, Own: own, Store: st, Restart: func(ctx context.Context) error {
		return restartOpenSM(ctx, sm)
	}}
}

// restartOpenSM ends the current OpenSM (SIGTERM) and waits until the
// supervisor has started the next one and it may be signalled.
func restartOpenSM(ctx context.Context, sm *opensm.Supervisor) error {
	inst := sm.Current()
	if inst == nil {
		return errors.New("OpenSM is not running")
	}
	restarts := sm.Restarts()
	if err := inst.Signal(ctx, syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop OpenSM: %w", err)
	}
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for sm.Restarts() == restarts {
		select {
		case <-ctx.Done():
			return fmt.Errorf("OpenSM not started again: %w", ctx.Err())
		case <-poll.C:
		}
	}
	return sm.WaitReady(ctx)
}
