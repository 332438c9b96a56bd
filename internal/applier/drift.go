package applier

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
)

// The drift repair, a service of the term (services.go): every check
// interval, in the loop's idle turn (or an apply's back-off), it makes the
// term apply the recorded state again when OpenSM was restarted, or when the
// file on disk is not what the term last wrote or not what the recorded state
// renders to (someone edited or removed it). The audit runs it too, before
// reading a fabric whose file was edited (audit.go).

// driftRepair is the drift repair's state; only the holder of the loop's
// idle turn uses it, so the drift service and the audit never use it at
// once.
type driftRepair struct {
	log      *slog.Logger
	cfg      *Config
	sm       Supervisor
	store    Store
	restarts int // OpenSM restarts seen so far
}

// newDriftRepair is the term's drift repair, counting OpenSM's restarts
// from now.
func (t *term) newDriftRepair() *driftRepair {
	return &driftRepair{log: t.Log, cfg: &t.Cfg, sm: t.SM, store: t.Store, restarts: t.SM.Restarts()}
}

// repair asks the term (tv) to apply the recorded state again when OpenSM
// was restarted, or when the partitions file drifted.
func (d *driftRepair) repair(ctx context.Context, tv *idleTurn) {
	if n := d.sm.Restarts(); n != d.restarts {
		d.log.Warn("OpenSM was restarted; applying the recorded state again",
			"file", d.cfg.PartitionsFile, "restarts", n-d.restarts)
		d.restarts = n
		tv.forget("OpenSM was restarted")
		return
	}
	if tv.applied < 0 {
		return // an apply is due anyway
	}
	reason := d.fileDrift(ctx, tv.written)
	if reason == "" {
		reason = d.qosPolicyDrift(tv.qos)
	}
	if reason == "" {
		return
	}
	d.log.Warn("partitions file drifted from the recorded state; writing it again and applying it",
		"file", d.cfg.PartitionsFile, "reason", reason)
	tv.forget("the partitions file drifted: " + reason) // OpenSM may have swept the edited file
	tv.readAll = true                                   // the next apply reads everything
}

// fileEdited says whether the partitions file is not, byte for byte, written
// (fileDrift's first, cheap, look).
func (d *driftRepair) fileEdited(written []byte) bool {
	got, err := os.ReadFile(d.cfg.PartitionsFile)
	return err != nil || !bytes.Equal(got, written)
}

// fileDrift says what is wrong with the partitions file, "" when nothing;
// written is what the term last wrote to it.
func (d *driftRepair) fileDrift(ctx context.Context, written []byte) string {
	got, err := os.ReadFile(d.cfg.PartitionsFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "the file is missing"
	case err != nil:
		return "the file cannot be read: " + err.Error()
	case !bytes.Equal(got, written):
		return "the file is not what was last applied (edited by hand?)"
	}
	// A full read, not the term's incremental one: once a check interval
	// the file is held against every row of the database.
	snap, err := d.store.Snapshot(ctx)
	if err != nil {
		d.log.Error("read recorded state", "error", err)
		return ""
	}
	r, err := Render(ctx, snap, d.cfg.RenderInput())
	switch {
	case err != nil:
		d.log.Error("render recorded state", "error", err)
		return ""
	case r.Problems != nil:
		return "" // the state cannot be written; its apply has said so
	case !bytes.Equal(got, r.Text):
		return "the file is not what the recorded state renders to"
	}
	return ""
}

// qosPolicyDrift says what is wrong with the QoS policy file, "" when it is
// written, what the term last wrote (or none is written): OpenSM reads it at
// every heavy sweep, so an edited or removed file would change or drop the
// pkeys' limits without a change.
func (d *driftRepair) qosPolicyDrift(written []byte) string {
	if d.cfg.QoSPolicyFile == "" || written == nil {
		return ""
	}
	got, err := os.ReadFile(d.cfg.QoSPolicyFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "the QoS policy file is missing"
	case err != nil:
		return "the QoS policy file cannot be read: " + err.Error()
	case !bytes.Equal(got, written):
		return "the QoS policy file is not what was last applied (edited by hand?)"
	}
	return ""
}

// driftService is the drift repair as the term's service: every check
// interval it borrows the loop's idle turn and repairs what drifted.
func (t *term) driftService(d *driftRepair) *service {
	_, desk := t.turns.desks()
	return every("drift repair", t.Log, t.Cfg.CheckInterval, func(ctx context.Context) {
		tv, giveBack, ok := borrowTurn(ctx, desk)
		if !ok {
			return
		}
		defer giveBack()
		d.repair(ctx, tv)
	})
}
