// Package applier brings OpenSM to the recorded state, and completes jobs only
// once OpenSM has been seen applying it.
//
// One apply of revision R: snapshot the state at R, render the partitions file,
// check it with the strict parser, write it atomically, note the log position,
// SIGHUP, follow the log to the end of a heavy sweep that started after the
// position, then complete every job with revision <= R in one write fenced by
// the leadership term. Changes that arrive during a sweep ride the next one, so
// a burst of requests costs a few sweeps, not one per request.
package applier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Store is what the applier needs of the database.
type Store interface {
	Revision(ctx context.Context) (int64, error)
	Snapshot(ctx context.Context) (store.Snapshot, error)
	MarkJobsRunning(ctx context.Context, term, revision int64, now time.Time) (int64, error)
	CompleteJobs(ctx context.Context, term, revision int64, now time.Time) (int64, error)
	FailJobs(ctx context.Context, term, revision int64, reason string, now time.Time) (int64, error)
	RecordApply(ctx context.Context, a store.Apply) (bool, error)
	Wake(ctx context.Context) <-chan struct{}
	GateStore // gates.go
}

// SubnetManager is OpenSM as the applier drives it (opensm.Process).
type SubnetManager interface {
	Run(ctx context.Context) error
	WaitReady(ctx context.Context) error
	Reload(ctx context.Context) error
}

// Config is what the applier is told by [opensm] and [database].
type Config struct {
	PartitionsFile   string
	LogFile          string // OpenSM's log, where the sweep's end is read
	DefaultPartition string
	SweepTimeout     time.Duration
	CheckInterval    time.Duration // drift repair
	PollInterval     time.Duration // how often the revision is read without a wake-up
	SubnetDump       string        // OpenSM's opensm-subnet.lst, which the gates read
}

// Applier applies while its manager holds the applier lock.
type Applier struct {
	Store Store
	SM    SubnetManager
	Cfg   Config
	Log   *slog.Logger
}

// Outcomes recorded in the applies table besides opensm's.
const (
	outcomeCheckFailed = "check-failed"
	outcomeWriteFailed = "write-failed"
	outcomePKeyErrors  = "pkey-errors"
)

// term is the state of one leadership term.
type term struct {
	*Applier
	id      int64
	applied int64  // revision OpenSM was last seen applying; -1: none yet this term
	written []byte // what this term last wrote to the partitions file
	gate    *gatekeeper
}

// Lead runs OpenSM and applies until ctx ends (the term is over). A new term
// starts with a full apply, whatever the previous one did.
func (a *Applier) Lead(ctx context.Context, termID int64) error {
	t := &term{Applier: a, id: termID, applied: -1}
	// OpenSM must never start with a file that is not the recorded state: its
	// first sweep reads it.
	if err := t.writeCurrent(ctx); err != nil {
		return err
	}
	if err := t.startGates(); err != nil {
		return err
	}
	smCtx, stopSM := context.WithCancel(ctx)
	smDone := make(chan error, 1)
	go func() { smDone <- a.SM.Run(smCtx) }()
	defer func() {
		stopSM()
		<-smDone
	}()

	wake := a.Store.Wake(ctx)
	poll := time.NewTicker(a.Cfg.PollInterval)
	defer poll.Stop()
	check := time.NewTicker(a.Cfg.CheckInterval)
	defer check.Stop()
	retry := time.Duration(0)
	for {
		rev, err := a.Store.Revision(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			a.Log.Error("read revision", "error", err)
		case rev != t.applied:
			if ok := t.apply(ctx); ok {
				retry = 0
			} else {
				// Back off so a fabric that keeps failing is not swept in a loop.
				retry = min(max(2*retry, time.Second), 30*time.Second)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(retry):
				}
				continue
			}
		}
		t.pollGates(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-poll.C:
		case <-check.C:
			t.repairDrift(ctx)
		}
	}
}

// apply brings OpenSM to the newest revision; false when it should be retried.
func (t *term) apply(ctx context.Context) bool {
	started := time.Now().UTC()
	snap, text, checkErr, err := t.render(ctx)
	if err != nil {
		t.Log.Error("read recorded state", "error", err)
		return false
	}
	rev := snap.Revision
	log := t.Log.With("revision", rev, "term", t.id)
	record := func(outcome, detail string) {
		sum := sha256.Sum256(text)
		if _, err := t.Store.RecordApply(context.WithoutCancel(ctx), store.Apply{Revision: rev,
			SHA256: hex.EncodeToString(sum[:]), Term: t.id, Outcome: outcome, Detail: detail,
			StartedAt: started, FinishedAt: time.Now().UTC()}); err != nil {
			log.Error("record apply", "error", err)
		}
	}
	if checkErr != nil {
		// Never written: OpenSM would make every port a full member of the
		// default partition. The change stays recorded; a later apply that
		// passes the check applies it.
		log.Error("rendered partitions file fails the check; not written", "error", checkErr)
		t.failJobs(ctx, rev, "the partitions file for this change fails the check: "+checkErr.Error())
		record(outcomeCheckFailed, checkErr.Error())
		t.applied = rev
		return true
	}
	if _, err := t.Store.MarkJobsRunning(ctx, t.id, rev, started); err != nil {
		log.Error("mark jobs running", "error", err)
		return false
	}
	if err := t.SM.WaitReady(ctx); err != nil {
		return false
	}
	if err := opensm.WriteFileAtomic(t.Cfg.PartitionsFile, text, 0o644); err != nil {
		log.Error("write partitions file", "error", err)
		record(outcomeWriteFailed, err.Error())
		return false
	}
	t.written = text
	// The position is taken after the rename: a heavy sweep whose start is
	// logged after it began after the rename, so it parses the new file.
	pos, err := opensm.LogPosition(t.Cfg.LogFile)
	if err != nil {
		log.Error("OpenSM log position", "error", err)
		return false
	}
	if err := t.SM.Reload(ctx); err != nil {
		log.Warn("signal OpenSM", "error", err)
		return false
	}
	res, err := opensm.WaitSweep(ctx, t.Cfg.LogFile, pos, t.Cfg.SweepTimeout)
	if err != nil {
		return false // the term is over
	}
	switch {
	case res.Outcome == opensm.Applied && len(res.PKeyErrors) == 0:
		n, err := t.completeJobs(ctx, rev) // if the gates are open
		if err != nil {
			log.Error("complete jobs", "error", err)
			return false
		}
		log.Info("partitions applied", "jobs_completed", n, "took", time.Since(started))
		record(string(res.Outcome), "SUBNET UP")
		t.applied = rev
		return true
	case res.Outcome == opensm.Applied:
		// Some ports did not get their pkeys (e.g. a full pkey table): fail
		// closed, say which lines.
		reason := "OpenSM applied the partitions file with errors: " + strings.Join(res.PKeyErrors, "; ")
		log.Error("partitions applied with pkey errors", "errors", res.PKeyErrors)
		t.failJobs(ctx, rev, reason)
		record(outcomePKeyErrors, reason)
		t.applied = rev
		return true
	case res.Outcome == opensm.Rejected:
		log.Error("OpenSM rejected the partitions file and fell back to every port a full member of the default partition; re-applying",
			"detail", res.Detail)
	default:
		log.Warn("partitions not proven applied; will retry", "outcome", res.Outcome, "detail", res.Detail)
	}
	record(string(res.Outcome), res.Detail)
	return false
}

// failJobs fails the jobs up to rev that are still open.
func (t *term) failJobs(ctx context.Context, rev int64, reason string) {
	if _, err := t.Store.FailJobs(ctx, t.id, rev, reason, time.Now().UTC()); err != nil {
		t.Log.Error("fail jobs", "revision", rev, "error", err)
	}
}

// render reads the state and renders the file. checkErr is the check's verdict.
func (t *term) render(ctx context.Context) (snap store.Snapshot, text []byte, checkErr, err error) {
	snap, err = t.Store.Snapshot(ctx)
	if err != nil {
		return snap, nil, nil, err
	}
	st := State(snap, t.Cfg.DefaultPartition)
	text, checkErr = partitions.Render(st)
	if checkErr == nil {
		checkErr = partitions.Check(text, st)
	}
	return snap, text, checkErr, nil
}

// writeCurrent writes the file for the current state without signalling anyone,
// for an OpenSM about to start. A state that fails the check leaves the file
// as it is; the first apply reports it.
func (t *term) writeCurrent(ctx context.Context) error {
	_, text, checkErr, err := t.render(ctx)
	if err != nil {
		return fmt.Errorf("read recorded state: %w", err)
	}
	if checkErr != nil {
		return nil
	}
	if err := opensm.WriteFileAtomic(t.Cfg.PartitionsFile, text, 0o644); err != nil {
		return fmt.Errorf("write partitions file: %w", err)
	}
	t.written = text
	return nil
}

// repairDrift makes sure the file on disk is what this term last wrote; if
// someone edited or removed it, the next loop applies the state again.
func (t *term) repairDrift(ctx context.Context) {
	got, err := os.ReadFile(t.Cfg.PartitionsFile)
	if err == nil && bytes.Equal(got, t.written) {
		return
	}
	reason := "content differs"
	if errors.Is(err, os.ErrNotExist) {
		reason = "file is missing"
	} else if err != nil {
		reason = err.Error()
	}
	t.Log.Warn("partitions file drifted from what was applied; applying the recorded state again",
		"file", t.Cfg.PartitionsFile, "reason", reason)
	t.applied = -1
}

// State turns a snapshot into what the partitions file renders from.
func State(snap store.Snapshot, defaultPartition string) partitions.State {
	members := map[string][]fabric.GUID{}
	for _, m := range snap.Members {
		members[m.NetworkID] = append(members[m.NetworkID], m.GUID)
	}
	st := partitions.State{Revision: snap.Revision, DefaultPartition: defaultPartition}
	for _, n := range snap.Networks {
		if n.PKey == nil {
			continue
		}
		st.Networks = append(st.Networks, partitions.Network{ID: n.ID, PKey: *n.PKey, Members: members[n.ID]})
	}
	return st
}
