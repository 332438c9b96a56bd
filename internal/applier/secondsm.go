package applier

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tick"
)

// A second subnet manager: any master SM on the fabric that is not this
// manager's OpenSM programs every port's P_Key table with partitions of its
// own, so nothing the manager applies proves anything while it is there. Every
// check interval the leader reads from the fabric which SM is master, as its
// OpenSM's port names it (pkeyread.ReadMasters: the port's MasterSMLID, the
// SMInfo there): a handful of SMPs, whatever the fabric's size. A master that
// is not this OpenSM, or this OpenSM STANDBY or NOTACTIVE, closes the gate
// GateSecondSM: the leader logs it (the SM's port GUID, priority and state),
// records it for --status and the metrics, applies nothing (a STANDBY OpenSM
// does not sweep), and every open job says why it waits. Once this OpenSM is
// master again the recorded state is applied again and the jobs complete on
// that sweep: whatever the other SM programmed is overwritten, and proven so.
//
// A standby SM is not flagged: it programs nothing, and with HA the peers'
// OpenSMs wait so. A foreign SM of a lower priority stays standby (OpenSM
// hands the subnet over only to a higher priority): it is not flagged until it
// becomes master, when this OpenSM is gone. A read that fails (the simulator
// or the HCA busy, this OpenSM restarting) changes nothing: the last verdict
// stands until a read says otherwise.

// SecondSMCheck is how the leader reads which SM is master.
type SecondSMCheck struct {
	// Dialer opens the SMP connection of each check (one, closed after).
	Dialer pkeyread.Dialer
	MKey   uint64 // sent in every SMP; 0 where none is set
	// MKeys, when set, gives the M_Keys to try in place of MKey, the
	// recorded one first: after --rotate-keys the ports move to the new key
	// one sweep at a time.
	MKeys func(ctx context.Context) ([]uint64, error)
	Own   fabric.GUID // this manager's OpenSM's port ([opensm_conf] guid)
	Store SecondSMStore
	// Restart starts this manager's OpenSM again, returning once the new
	// one may be signalled: OpenSM sends a P_Key Set only for the blocks
	// its own copy of a port's table says differ, and what the other SM
	// wrote is not in that copy; a new OpenSM has no copy and writes every
	// table at its first sweep. nil: none (the recorded state is applied
	// again all the same).
	Restart func(ctx context.Context) error
}

// SecondSMStore records the second SM for --status and the metrics.
type SecondSMStore interface {
	RecordSecondSM(ctx context.Context, term int64, sm store.SecondSM) error
	ClearSecondSMs(ctx context.Context, term int64) (int64, error)
}

// secondSMRead bounds the read of the own port and its master: an SMP
// answers in microseconds, or never.
const secondSMRead = 5 * time.Second

// secondSMWatch is a term's view of the masters, kept by detect, which runs
// beside the term's loop.
type secondSMWatch struct {
	check *SecondSMCheck
	tid   atomic.Uint32
	// detecting makes one detect at a time (the watch's, and finish's
	// detectNow); it guards clean and err.
	detecting sync.Mutex
	clean     bool   // the database holds what found says
	err       string // the last read's error, logged once
	// mu guards found and gone, which the term's loop reads.
	mu    sync.Mutex
	found *store.SecondSM // the second SM seen last; nil: none
	gone  bool            // found went away: the loop applies again (takeSecondSMGone)
}

// smLook is one look at the subnet managers: the master the own port
// names, and the SMs behind the fabric's host ports.
type smLook struct {
	masters pkeyread.Masters
	sms     []pkeyread.SMInfo
}

// look reads the subnet managers once, on a connection of its own: the
// simulator serves ten clients, so none is kept between checks.
func (w *secondSMWatch) look(ctx context.Context, t *term) (smLook, error) {
	topo, err := t.subnetDump().Load()
	if err != nil {
		return smLook{}, fmt.Errorf("OpenSM's subnet dump: %w", err)
	}
	lid, ok := topo.LID(w.check.Own)
	if !ok || lid == 0 {
		return smLook{}, fmt.Errorf("port %s has no LID in OpenSM's subnet dump (not swept yet?)", w.check.Own)
	}
	// The scan's ports each have secondSMPort; all of it ends with the
	// check interval, so that a look never runs into the next.
	ctx, cancel := context.WithTimeout(ctx, max(t.Cfg.CheckInterval, secondSMRead))
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, secondSMRead)
	defer rcancel()
	conn, err := w.check.Dialer.Dial(rctx)
	if err != nil {
		return smLook{}, err
	}
	defer conn.Close()
	var l smLook
	mkey, err := w.readMasters(rctx, conn, lid, &l)
	if err != nil {
		return l, err
	}
	ports := make([]pkeyread.PortLID, 0, len(topo.HostPorts()))
	for _, p := range topo.HostPorts() {
		if lid, _ := topo.LID(p); p != w.check.Own {
			ports = append(ports, pkeyread.PortLID{Port: p, LID: lid})
		}
	}
	// A port that does not answer (down, gone) hides no master: a master
	// sweeps through its own port, which answers.
	l.sms, _ = pkeyread.ReadSMs(ctx, conn, mkey, &w.tid, ports, secondSMPort)
	return l, nil
}

// readMasters reads who is master from the own port at lid into l, with
// each M_Key in turn until one answers; it returns the key that did.
func (w *secondSMWatch) readMasters(ctx context.Context, conn pkeyread.Conn, lid uint16, l *smLook) (uint64, error) {
	keys := []uint64{w.check.MKey}
	if w.check.MKeys != nil {
		if recorded, err := w.check.MKeys(ctx); err == nil && len(recorded) > 0 {
			keys = recorded
		}
	}
	masters, key, err := pkeyread.ReadMastersWithKeys(ctx, conn, keys, &w.tid, w.check.Own, lid)
	l.masters = masters
	return key, err
}

// secondSMPort bounds each port's SMPs in the scan: an answer takes
// microseconds; a port down answers nothing and must not hold the rest.
const secondSMPort = 250 * time.Millisecond

// judgeMasters says what a look shows: a second SM (found), this OpenSM the
// master (found nil), or nothing to go by (known false: no master has swept
// the port yet, or this OpenSM is discovering, as after a restart). A master
// the own port names comes first, then one found behind another port.
func judgeMasters(l smLook, own fabric.GUID) (found *store.SecondSM, known bool) {
	m := l.masters
	named := m.Master
	if named.GUID == 0 {
		// No master named, or the one named is silent (gone, leaving its
		// MasterSMLID behind): what the own OpenSM says decides.
		named = m.Own
	}
	if named.GUID == own || named.GUID == 0 {
		for _, sm := range l.sms {
			if sm.GUID != own && sm.State == pkeyread.SMMaster {
				named = sm
				break
			}
		}
	}
	switch {
	case named.GUID == 0 || m.MasterLID == 0 && named.GUID == own:
		return nil, false
	case named.GUID == own && named.State == pkeyread.SMMaster:
		return nil, true
	case named.GUID == own && named.State == pkeyread.SMDiscovering:
		return nil, false
	}
	return &store.SecondSM{PortGUID: named.GUID, Priority: int(named.Priority), State: named.State.String(),
		OwnState: m.Own.State.String()}, true
}

// secondSMText is the gate's reason for sm, as the jobs, the log and --status
// say it.
func secondSMText(sm store.SecondSM, own fabric.GUID) string {
	if sm.PortGUID == own {
		return fmt.Sprintf("Second subnet manager: this manager's OpenSM (port %s) is %s and no other SM is named master; "+
			"find the SM that deposed it (docs/runbooks.md)", own, sm.State)
	}
	return fmt.Sprintf("Second subnet manager: port %s (priority %d, %s) is master on the fabric, not this manager's OpenSM "+
		"(port %s, %s): it programs the ports with partitions of its own; stop it (docs/runbooks.md)",
		sm.PortGUID, sm.Priority, sm.State, own, sm.OwnState)
}

// detect reads the masters and updates the verdict, the record and the jobs.
func (w *secondSMWatch) detect(ctx context.Context, t *term) {
	w.detecting.Lock()
	defer w.detecting.Unlock()
	l, err := w.look(ctx, t)
	if err != nil {
		if err.Error() != w.err {
			t.Log.Warn("which subnet manager is master could not be read; the last verdict stands", "error", err)
		}
		w.err = err.Error()
		return
	}
	w.err = ""
	found, known := judgeMasters(l, w.check.Own)
	if !known {
		return
	}
	if found != nil {
		w.hold(ctx, t, *found)
		return
	}
	w.mu.Lock()
	was := w.found
	w.mu.Unlock()
	if was != nil {
		t.Log.Info("second subnet manager gone: this manager's OpenSM is master again; restarting it and applying the recorded state again",
			"port_guid", was.PortGUID.String())
		w.restart(ctx, t) // the jobs stay held meanwhile: found is still set
		w.mu.Lock()
		w.found, w.gone, w.clean = nil, true, false
		w.mu.Unlock()
	}
	if !w.clean {
		ctx, cancel := context.WithTimeout(ctx, t.dbTimeout())
		defer cancel()
		_, err := w.check.Store.ClearSecondSMs(ctx, t.id)
		w.clean = err == nil
		if err != nil {
			t.Log.Error("clear the recorded second subnet manager", "error", err)
		}
	}
}

// restart starts OpenSM again so that it writes every port's table. Jobs
// stay held meanwhile (w.found is still set); a restart that fails leaves
// the apply that follows to OpenSM as it is.
func (w *secondSMWatch) restart(ctx context.Context, t *term) {
	if w.check.Restart == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, secondSMRestart)
	defer cancel()
	if err := w.check.Restart(ctx); err != nil {
		t.Log.Error("restart OpenSM after the second subnet manager", "error", err)
	}
}

// secondSMRestart bounds a restart: OpenSM's stop, the supervisor's back-off
// and the new OpenSM's start.
const secondSMRestart = time.Minute

// hold closes the gate for sm: logs and records it when new, and tells every
// open job (those sent since too) why it waits.
func (w *secondSMWatch) hold(ctx context.Context, t *term, sm store.SecondSM) {
	text := secondSMText(sm, w.check.Own)
	ctx, cancel := context.WithTimeout(ctx, t.dbTimeout())
	defer cancel()
	w.mu.Lock()
	if w.found == nil || *w.found != sm {
		t.Log.Error("second subnet manager: no job completes while it is master", "port_guid", sm.PortGUID.String(),
			"priority", sm.Priority, "state", sm.State, "own_port_guid", w.check.Own.String(), "own_state", sm.OwnState)
		w.found, w.clean = &sm, false
	}
	w.mu.Unlock()
	if !w.clean {
		err := w.check.Store.RecordSecondSM(ctx, t.id, sm)
		w.clean = err == nil
		if err != nil && !errors.Is(err, store.ErrFenced) {
			t.Log.Error("record the second subnet manager", "error", err)
		}
	}
	// Applies wait (holds): the jobs sent meanwhile are marked Running by
	// hand, so that they say, like the others, that the manager has them.
	if rev, err := t.Store.Revision(ctx); err == nil {
		_, err = t.Store.MarkJobsRunning(ctx, t.id, rev)
		if err != nil {
			t.Log.Error("mark the jobs waiting for the second subnet manager running", "error", err)
		}
	}
	if _, err := t.Store.DescribeOpenJobs(ctx, t.id, math.MaxInt64, "Not completing: "+text); err != nil {
		t.Log.Error("describe the jobs waiting for the second subnet manager", "error", err)
	}
}

// detectNow looks once more before a sweep completes jobs: a second SM that
// took the subnet over since the last check (up to a check interval ago)
// would otherwise see them completed on a sweep it is about to overwrite.
func (w *secondSMWatch) detectNow(ctx context.Context, t *term) {
	if w != nil {
		w.detect(ctx, t)
	}
}

// reason is the gate's reason while a second SM is seen; none otherwise.
func (w *secondSMWatch) reason() []GateReason {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.found == nil {
		return nil
	}
	return []GateReason{{GateSecondSM, secondSMText(*w.found, w.check.Own)}}
}

// holds says whether a second SM is seen: the term applies nothing then.
func (w *secondSMWatch) holds() bool { return len(w.reason()) > 0 }

// startSecondSMWatch starts detect every check interval, when the applier
// has a check, and returns what stops it.
func (t *term) startSecondSMWatch(ctx context.Context) (stop func()) {
	if t.SecondSM == nil || t.SecondSM.Dialer == nil || t.SecondSM.Own == 0 {
		return func() {}
	}
	t.secondSM = &secondSMWatch{check: t.SecondSM}
	ctx, stop = context.WithCancel(ctx)
	go tick.Every(ctx, t.Cfg.CheckInterval, func() bool {
		t.secondSM.detect(ctx, t)
		return true
	})
	return stop
}

// takeSecondSMGone makes the loop apply the recorded state again once a
// second SM is gone, as after a lifted freeze: the jobs complete on that
// sweep, not on one from before.
func (t *term) takeSecondSMGone() {
	w := t.secondSM
	if w == nil {
		return
	}
	w.mu.Lock()
	gone := w.gone
	w.gone = false
	w.mu.Unlock()
	if gone {
		t.reapply = true
		t.gate.blocked, t.gate.said = 0, ""
	}
}
