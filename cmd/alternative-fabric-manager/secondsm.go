package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// secondSMCheck is the applier's look for a second subnet manager: SMPs sent
// from OpenSM's port ([opensm_conf] guid) on the fabric OpenSM's environment
// names. nil, with a warning, where it cannot run: no guid (OpenSM picks a
// port the manager does not know) or no SMP transport.
func secondSMCheck(ctx context.Context, cfg *config.Config, st *store.Store, sm *opensm.Supervisor, log *slog.Logger) *applier.SecondSMCheck {
	own, err := openSMGUID(cfg)
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

// openSMGUID is [opensm_conf] guid: the port OpenSM runs on; 0 when not set.
func openSMGUID(cfg *config.Config) (fabric.GUID, error) {
	for _, kv := range cfg.OpenSMConf {
		if strings.EqualFold(kv.Key, "guid") {
			g, err := fabric.ParseGUID(kv.Value)
			if err != nil {
				return 0, fmt.Errorf("[opensm_conf] guid %q: %w", kv.Value, err)
			}
			return g, nil
		}
	}
	return 0, nil
}

// ForeignSMStatus is a foreign subnet manager as --status --json shows it:
// MASTER by its own SMInfo, master of no port.
type ForeignSMStatus struct {
	PortGUID string    `json:"port_guid"`
	Priority int       `json:"priority"`
	State    string    `json:"state"`
	OwnState string    `json:"own_state"` // the leader's OpenSM's then
	Term     int64     `json:"term"`      // the term that saw it
	SeenAt   time.Time `json:"seen_at"`
}

// readSecondSMs adds the foreign subnet managers to the status, which hold
// no job; the recorded second SM, which holds every one, is the verdict's
// (readVerdict).
func readSecondSMs(ctx context.Context, st *store.Store, s *Status) error {
	foreign, err := st.ForeignSMs(ctx)
	if err != nil {
		return err
	}
	s.ForeignSMs = make([]ForeignSMStatus, 0, len(foreign))
	for _, sm := range foreign {
		s.ForeignSMs = append(s.ForeignSMs, ForeignSMStatus{PortGUID: sm.PortGUID.String(), Priority: sm.Priority,
			State: sm.State, OwnState: sm.OwnState, Term: sm.Term, SeenAt: sm.SeenAt})
	}
	return nil
}

// printForeignSMs writes the foreign SMs' line of --status: none, or each
// one, master of no port (no job waits for it), to be stopped all the same.
func printForeignSMs(w io.Writer, sms []ForeignSMStatus) {
	if len(sms) == 0 {
		fmt.Fprintln(w, "foreign SMs:\tnone")
		return
	}
	for _, sm := range sms {
		fmt.Fprintf(w, "foreign SM:\tport %s (priority %d, %s), master of no port (this manager's OpenSM %s), "+
			"seen by term %d at %s; no job waits for it; stop it (docs/runbooks.md)\n", sm.PortGUID, sm.Priority, sm.State,
			sm.OwnState, sm.Term, sm.SeenAt.Format(time.RFC3339))
	}
}
