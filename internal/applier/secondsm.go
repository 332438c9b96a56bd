package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// A second subnet manager: a master SM on the fabric that is not this
// manager's OpenSM and masters the ports programs their P_Key tables with
// partitions of its own, so nothing the manager applies proves anything while
// it is there. Every check interval the leader reads from the fabric which SM
// is master, as its OpenSM's port names it (pkeyread.ReadMasters: the port's
// MasterSMLID, the SMInfo there), and which SMs run behind the host ports
// (pkeyread.ScanSMs, whose PortInfo reads also give each port's MasterSMLID).
//
// A foreign SM closes the gate GateSecondSM only when it is master over
// ports: the own port's MasterSMLID names it (or names no SM of this
// manager's), this OpenSM is STANDBY or NOTACTIVE, a host port's
// MasterSMLID names it, or a host port has no M_Key protection. Then the leader logs it (the SM's port GUID, priority
// and state), records it for --status and the metrics, applies nothing (a
// STANDBY OpenSM does not sweep), and every open job says why it waits. Once
// this OpenSM is master again it is restarted (at most once every
// secondSMRestartEvery check intervals), the recorded state is applied again
// and the jobs complete on a sweep after that: whatever the other SM
// programmed is overwritten, and proven so.
//
// A foreign SM that is MASTER by its own SMInfo but masters none of that (a
// tenant's stock OpenSM on its own host: our SM_Key and M_Keys keep it off
// every port) programs nothing. It is named (recorded apart, for --status,
// the metrics and an alert), and holds no job: a tenant turning its SM on and
// off must neither stall the fabric's jobs nor restart the production OpenSM.
//
// The verdict lives in the database, as the audit's does: a term starts from
// the second SM recorded by the one before (this manager before a restart,
// or another leader), gate closed, and only a look that read the fabric and
// saw this OpenSM master clears it, once the database has forgotten it. A
// look that fails, or one the term's end cut short, changes nothing. A
// standby or discovering SM is not flagged while every host port is under
// M_Key protection: it programs nothing, and with HA the peers' OpenSMs wait
// so. Beside a host port without it, it is a second SM (mayMasterUnprotected):
// once master it may program that port before any look sees it master.

// SecondSMCheck is how the leader reads which SM is master.
type SecondSMCheck struct {
	// Dialer opens the SMP connection of each check (one, closed after;
	// a pkeyread.Pool keeps it for the next, until the term's end).
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
	// AfterLook is a test hook, nil in production: finish calls it with
	// the sweep's revision once its look before the jobs complete has
	// returned, before their transaction (with verify = tables, while the
	// read-back's reads may still run: settleApplied), so that an
	// end-to-end test can start an SM in that window on a real OpenSM.
	AfterLook func(ctx context.Context, revision int64)
}

// SecondSMStore records the second SM, the verdict, for the next term,
// --status and the metrics, and the foreign SMs that master nothing.
type SecondSMStore interface {
	RecordSecondSM(ctx context.Context, term int64, sm store.SecondSM) error
	ClearSecondSMs(ctx context.Context, term int64) (int64, error)
	// SecondSMs is the verdict a term starts from.
	SecondSMs(ctx context.Context) ([]store.SecondSM, error)
	// RecordForeignSMs replaces the SMs that master nothing.
	RecordForeignSMs(ctx context.Context, term int64, sms []store.SecondSM) error
}

// secondSMRead bounds the read of the own port and its master: an SMP
// answers in microseconds, or never.
const secondSMRead = 5 * time.Second

// secondSMWatch is a term's view of the masters, kept by detect, which runs
// beside the term's loop.
type secondSMWatch struct {
	check *SecondSMCheck
	tid   atomic.Uint32
	// detecting makes one look at a time (the watch's detect, and
	// finish's confirm); it guards the fields up to mu.
	detecting sync.Mutex
	clean     bool             // the database holds what found says
	err       string           // the last read's error, logged once
	restarted bool             // OpenSM was restarted for found's going
	deferred  bool             // the rate limit defers that restart (logged once)
	lastStart time.Time        // of the last restart for a second SM gone; zero: none
	foreign   []store.SecondSM // the foreign SMs the database holds
	foreignOK bool             // foreign is what the database holds
	// scanned: a full look (every host port) saw the masters this term;
	// covered is the count of OpenSM's SM entries (smEventLog) it covers,
	// and smPorts the ports behind which it found an SM. finish's look is
	// the short one (confirm) only while no entry came since.
	scanned bool
	covered uint64
	smPorts []pkeyread.PortLID
	// lastKeys are the M_Keys the last look was given (lookKeys): the
	// next one's SMPs start with them while it reads the keys again;
	// ownKey is the one this OpenSM's port answered to (scanAhead).
	lastKeys []uint64
	ownKey   uint64
	// mu guards what the term's loop reads.
	mu    sync.Mutex
	found *store.SecondSM // the second SM seen last, or restored; nil: none
	// unread: the verdict recorded by the term before could not be read;
	// the gate stays closed until it is, or a look sees this OpenSM master.
	unread bool
	// restartAt: found is gone, and the rate limit defers the restart
	// that must come before the gate opens until then; zero: none.
	restartAt time.Time
	// unreadLook: finish's look failed (confirm), its error; the gate
	// stays closed until a look reads the fabric. "": none.
	unreadLook string
	// settled is the count of OpenSM's entries naming another SM at which
	// finish's last look settled (settle).
	settled smEventMark
	// exposed: the last full look (or a short one since) read a host port
	// without M_Key protection, which an SM that appears may program.
	// Atomic: finish reads it (appeared) while the watch's look may run.
	exposed atomic.Bool
}

// smLook is one look at the subnet managers: the master the own port
// names, and the SMs behind the fabric's host ports and the masters those
// ports name.
type smLook struct {
	masters pkeyread.Masters
	sms     []pkeyread.SMInfo
	// masterLIDs counts the host ports by the MasterSMLID each names.
	masterLIDs map[uint16]int
	// unprotected counts the host ports without M_Key protection.
	unprotected int
	// unswept counts the host ports that answered with no MasterSMLID: no
	// master has swept them yet (a cold start, a port just up).
	unswept int
}

// look reads the subnet managers once, on a connection of its own (which a
// pkeyread.Pool may keep for the next look, closing it at the term's end:
// the simulator serves ten clients), or the one a pkeyread.Ahead prepared
// beside an apply's sweep (dialAhead), closed as its own would be. A look cut
// short (the term's end, or past its bound) is an error: the ports it did
// not read may be the ones a master programs.
func (w *secondSMWatch) look(ctx context.Context, t *watchEnv) (smLook, error) {
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
	ports := make([]pkeyread.PortLID, 0, len(topo.HostPorts()))
	for _, p := range topo.HostPorts() {
		if lid, _ := topo.LID(p); p != w.check.Own {
			ports = append(ports, pkeyread.PortLID{Port: p, LID: lid})
		}
	}
	return w.lookAt(ctx, lid, ports)
}

// lookAt is look's SMPs: the own port at lid, then the host ports. The
// recorded M_Keys are read from the database (MKeys) on the path of every
// change's completion: meanwhile the look goes out with the keys the last
// look was given, as the read-back's reads do (pkeyread.Reader.Read), and
// what it reads stands only if the keys are still those. Otherwise (a
// rotation) it is cut short as soon as the keys are read, and the fabric
// is looked at again with the keys recorded now, on a connection of its own
// (one whose SMPs were cut short may not serve another). A key the last
// look was given was one the manager held then, and is tried during a
// rotation anyway.
func (w *secondSMWatch) lookAt(ctx context.Context, lid uint16, ports []pkeyread.PortLID) (smLook, error) {
	fctx, fcancel := context.WithTimeout(ctx, secondSMRead)
	keys := w.fetchKeys(ctx, fctx) // beside the dial and the look's SMPs
	defer func() {
		fcancel()
		keys.wait() // on every path: nothing of the look outlives it
		keys.stop()
	}()
	if keys.last != nil {
		l, err := w.lookWith(keys.early, lid, ports, keys.last)
		if slices.Equal(keys.wait(), keys.last) {
			return l, err
		}
	}
	return w.lookWith(ctx, lid, ports, keys.wait())
}

// lookWith is lookAt's look with mkeys, on a connection of its own.
func (w *secondSMWatch) lookWith(ctx context.Context, lid uint16, ports []pkeyread.PortLID, mkeys []uint64) (smLook, error) {
	rctx, rcancel := context.WithTimeout(ctx, secondSMRead)
	defer rcancel()
	conn, err := w.check.Dialer.Dial(rctx)
	if err != nil {
		return smLook{}, err
	}
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var l smLook
	// A port that does not answer (down, gone) hides no master: a master
	// sweeps through its own port, which answers. One that answers IsSM
	// but not its SMInfo may fail the look (unreadSMs).
	ahead := w.scanAhead(ctx, conn, mkeys, ports)
	masters, mkey, err := pkeyread.ReadMastersWithKeys(rctx, conn, mkeys, &w.tid, w.check.Own, lid)
	l.masters = masters
	scan, scanned, cut := ahead(mkey, err == nil) // waited for on every path
	if err != nil {
		return l, err
	}
	w.ownKey = mkey
	if cut {
		// Its SMPs were cut short: the scan again on a connection of its own.
		conn.Close()
		if conn, err = w.check.Dialer.Dial(rctx); err != nil {
			conn = nil
			return l, err
		}
	}
	if !scanned {
		scan = pkeyread.ScanSMs(ctx, conn, mkey, &w.tid, ports, secondSMPort)
	}
	// The masters the ports name that were not among them (none, when
	// every host port was read): who they are decides whether they gate.
	named := scan.MasterLIDs
	l.unswept = len(ports) - scan.Unread
	for _, n := range named {
		l.unswept -= n
	}
	more := pkeyread.ScanSMs(ctx, conn, mkey, &w.tid, unscanned(named, ports, lid), secondSMPort)
	scan.SMs, scan.SMUnread = append(scan.SMs, more.SMs...), append(scan.SMUnread, more.SMUnread...)
	if err := ctx.Err(); err != nil {
		return l, fmt.Errorf("the scan of the host ports' subnet managers ended after %d of %d ports: %w",
			len(ports)-scan.Unread, len(ports), err)
	}
	if err := unreadSMs(scan, l.masters); err != nil {
		return l, err
	}
	l.sms, l.masterLIDs, l.unprotected = scan.SMs, named, scan.Unprotected
	return l, nil
}

// scanAhead starts the scan of ports beside the read of the own port, on a
// connection that takes overlapping Sends, with the key the own port
// answered to at the last look (else the first of mkeys): the look before
// every change's jobs complete then waits for one round of SMPs, not two.
// The scan's results are judged with the own port's (the look's verdict
// takes both together). done ends it: the scan stands (scanned) only when
// the own port answered (ok) to the key it was sent with; otherwise it is
// cut short (cut, when the own port answered: the caller scans again with
// the key that answered).
func (w *secondSMWatch) scanAhead(ctx context.Context, conn pkeyread.Conn, mkeys []uint64,
	ports []pkeyread.PortLID) (done func(mkey uint64, ok bool) (scan pkeyread.SMScan, scanned, cut bool)) {
	if !pkeyread.Concurrent(conn) || len(mkeys) == 0 {
		return func(uint64, bool) (pkeyread.SMScan, bool, bool) { return pkeyread.SMScan{}, false, false }
	}
	guess := mkeys[0]
	if slices.Contains(mkeys, w.ownKey) {
		guess = w.ownKey
	}
	sctx, cancel := context.WithCancel(ctx)
	got := make(chan pkeyread.SMScan, 1)
	go func() { got <- pkeyread.ScanSMs(sctx, conn, guess, &w.tid, ports, secondSMPort) }()
	return func(mkey uint64, ok bool) (pkeyread.SMScan, bool, bool) {
		stands := ok && mkey == guess
		if !stands {
			cancel() // not to be used: the own port did not answer, or to another key
		}
		scan := <-got
		cancel()
		return scan, stands, ok && !stands
	}
}

// unreadSMs fails a look in which an SM runs behind a port (its PortInfo
// says IsSM) but did not answer its SMInfo, where that SM may program
// ports: a host port lacks M_Key protection, or a port's MasterSMLID names
// its LID. Its state is unknown, so it may be master or about to be: a stock
// OpenSM drops every SMInfo Get until its first sweep has met its own port,
// then becomes master at that sweep's end and programs the unprotected
// ports. Where every host port is under M_Key protection and none names it,
// it programs nothing, as a foreign SM master of nothing: a tenant that
// opens its SM device and answers nothing must not hold every tenant's jobs.
func unreadSMs(scan pkeyread.SMScan, m pkeyread.Masters) error {
	for _, p := range scan.SMUnread {
		if scan.Unprotected > 0 || scan.MasterLIDs[p.LID] > 0 || m.MasterLID == p.LID {
			return fmt.Errorf("an SM runs behind port %s (LID %d: its PortInfo says IsSM) and its SMInfo did not "+
				"answer within %s", p.Port, p.LID, secondSMPort)
		}
	}
	return nil
}

// unscanned are the LIDs named in masterLIDs that are neither own nor one of
// ports'.
func unscanned(masterLIDs map[uint16]int, ports []pkeyread.PortLID, own uint16) []pkeyread.PortLID {
	var out []pkeyread.PortLID
	for lid := range masterLIDs {
		if lid != own && !slices.ContainsFunc(ports, func(p pkeyread.PortLID) bool { return p.LID == lid }) {
			out = append(out, pkeyread.PortLID{LID: lid})
		}
	}
	slices.SortFunc(out, func(a, b pkeyread.PortLID) int { return int(a.LID) - int(b.LID) })
	return out
}

// lookKeys are a look's M_Keys: the ones the last look was given (last; nil
// before the term's first look, or without MKeys), and the read of the ones
// to try now (wait): the recorded ones, else MKey alone. early is the
// look's context for the SMPs sent with last, cut short once the keys read
// differ.
type lookKeys struct {
	w     *secondSMWatch
	last  []uint64
	early context.Context
	stop  context.CancelFunc // ends early
	now   chan []uint64
	got   []uint64
	done  bool
}

// wait returns the keys to try now, once read, and keeps them for the next
// look (w.detecting held, as during every look).
func (k *lookKeys) wait() []uint64 {
	if !k.done {
		k.got, k.done = <-k.now, true
		k.w.lastKeys = k.got
	}
	return k.got
}

// fetchKeys starts the read of the M_Keys to try now within fctx
// (w.detecting held); the SMPs sent with the last ones meanwhile go under
// ctx, cut short once the keys read differ.
func (w *secondSMWatch) fetchKeys(ctx, fctx context.Context) *lookKeys {
	k := &lookKeys{w: w, early: ctx, stop: func() {}, now: make(chan []uint64, 1)}
	if w.check.MKeys == nil {
		k.now <- []uint64{w.check.MKey} // nothing to read: no look starts before it
		return k
	}
	k.last = w.lastKeys
	early, cancel := context.WithCancel(ctx)
	k.early, k.stop = early, cancel
	go func() {
		keys := []uint64{w.check.MKey}
		if recorded, err := w.check.MKeys(fctx); err == nil && len(recorded) > 0 {
			keys = slices.Clone(recorded)
		}
		if !slices.Equal(keys, k.last) {
			cancel() // what the SMPs sent with the last keys read is not to be used
		}
		k.now <- keys
	}()
	return k
}

// secondSMPort bounds each port's SMPs in the scan: an answer takes
// microseconds; a port down answers nothing and must not hold the rest.
const secondSMPort = 250 * time.Millisecond

// smVerdict is what a look shows.
type smVerdict struct {
	found   *store.SecondSM  // the master over ports, not this OpenSM; nil: this OpenSM
	foreign []store.SecondSM // MASTER by their SMInfo, master of nothing
	// known is false when the look gives nothing to go by: no master has
	// swept the own port yet, or this OpenSM is discovering (a restart).
	known bool
}

// judgeMasters says what a look shows. A master the own port names comes
// first, then one found behind a host port that masters ports (mastersPorts);
// the other masters behind host ports are foreign.
func judgeMasters(l smLook, own fabric.GUID) smVerdict {
	m := l.masters
	named := m.Master
	if named.GUID == 0 {
		// No master named, or the one named is silent (gone, leaving its
		// MasterSMLID behind): what the own OpenSM says decides.
		named = m.Own
	}
	var v smVerdict
	for _, sm := range l.sms {
		switch {
		case sm.GUID == own || sm.GUID == named.GUID || sm.State != pkeyread.SMMaster:
		case (named.GUID == own || named.GUID == 0) && mastersPorts(l, sm):
			named = sm
		default:
			v.foreign = append(v.foreign, smRecord(sm, m.Own))
		}
	}
	if sm, ok := mayMasterUnprotected(l, own); ok && (named.GUID == own || named.GUID == 0) {
		named = sm
	}
	switch {
	case named.GUID == 0 || m.MasterLID == 0 && named.GUID == own:
		return smVerdict{}
	case named.GUID == own && named.State == pkeyread.SMMaster:
		v.known = true
		return v
	case named.GUID == own && named.State == pkeyread.SMDiscovering:
		return smVerdict{}
	}
	found := smRecord(named, m.Own)
	v.found, v.known = &found, true
	return v
}

// mastersPorts says whether sm, MASTER behind a host port while the own port
// names this OpenSM (or no master), is master over ports: the own port's
// MasterSMLID names no SM of this manager's, this OpenSM is no longer
// master, a host port's MasterSMLID names sm, or a host port has no M_Key
// protection: sm may program that one without ever rewriting its
// MasterSMLID (OpenSM leaves a MasterSMLID it finds set; measured on the
// simulated fabric, which ignores M_Keys and reports none).
func mastersPorts(l smLook, sm pkeyread.SMInfo) bool {
	m := l.masters
	return m.MasterLID != 0 && m.MasterLID != m.OwnLID ||
		m.Own.State == pkeyread.SMStandby || m.Own.State == pkeyread.SMNotActive ||
		l.masterLIDs[sm.LID] > 0 || l.unprotected > 0
}

// mayMasterUnprotected is the first foreign SM behind a host port that is
// not MASTER yet but may be at any moment (DISCOVERING, or STANDBY, which
// takes over when it misses this OpenSM's answers) while a host port has no
// M_Key protection: once master it programs that port without a look
// between, the way a stock OpenSM a tenant just started does on the
// simulated fabric within its first sweep. Under M_Key protection such an SM
// can program nothing, as one MASTER of nothing: it is not flagged.
func mayMasterUnprotected(l smLook, own fabric.GUID) (pkeyread.SMInfo, bool) {
	if l.unprotected == 0 {
		return pkeyread.SMInfo{}, false
	}
	for _, sm := range l.sms {
		if sm.GUID != own && (sm.State == pkeyread.SMDiscovering || sm.State == pkeyread.SMStandby) {
			return sm, true
		}
	}
	return pkeyread.SMInfo{}, false
}

func smRecord(sm, own pkeyread.SMInfo) store.SecondSM {
	return store.SecondSM{PortGUID: sm.GUID, Priority: int(sm.Priority), State: sm.State.String(),
		OwnState: own.State.String()}
}

// detect reads the masters with a full look (every host port) and updates
// the verdict, the record and the jobs.
func (w *secondSMWatch) detect(ctx context.Context, t *watchEnv) {
	w.detecting.Lock()
	defer w.detecting.Unlock()
	_ = w.detectLocked(ctx, t, false)
}

// detectLocked is detect, w.detecting held; it returns why the look failed
// (or was cut short), nil when it read the fabric. A baseline's look
// (besideSweep) that failed changes nothing, and one read before this
// OpenSM was master over every host port it read judges nothing but a
// second SM: it may only close the gate (see besideSweep).
func (w *secondSMWatch) detectLocked(ctx context.Context, t *watchEnv, baseline bool) error {
	if w.isUnread() {
		w.restore(ctx, t)
	}
	seen := t.smEvents.count()
	l, err := w.look(ctx, t)
	if ctx.Err() != nil {
		return ctx.Err() // the term is over: nothing is recorded, nor cleared
	}
	if err != nil && baseline {
		return err // changes nothing: finish's look is the full one, which says why it failed
	}
	if err != nil {
		w.lookFailed(ctx, t, err)
		return err
	}
	v := judgeMasters(l, w.check.Own)
	if baseline && (!v.known || l.unswept > 0) {
		t.Log.Debug("second-SM baseline read before this OpenSM was master over every host port; finish looks at every port",
			"known", v.known, "unswept", l.unswept)
		if v.found != nil {
			w.hold(ctx, t, *v.found)
		}
		return nil
	}
	w.lookRead()
	if !v.known {
		return nil
	}
	w.scanned, w.covered, w.smPorts = true, seen, smPortsOf(l.sms)
	w.exposed.Store(l.unprotected > 0)
	w.recordForeign(ctx, t, v.foreign)
	if v.found != nil {
		w.hold(ctx, t, *v.found)
		return nil
	}
	w.release(ctx, t)
	return nil
}

// lookFailed logs a look's error once and tells the held jobs why they
// wait: the last verdict stands.
func (w *secondSMWatch) lookFailed(ctx context.Context, t *watchEnv, err error) {
	if err.Error() != w.err {
		t.Log.Warn("which subnet manager is master could not be read; the last verdict stands", "error", err)
	}
	w.err = err.Error()
	w.describeHeld(ctx, t)
}

// lookRead notes a look that read the fabric: finish's look no longer
// holds jobs for one that failed.
func (w *secondSMWatch) lookRead() {
	w.err = ""
	w.mu.Lock()
	w.unreadLook = ""
	w.mu.Unlock()
}

func smPortsOf(sms []pkeyread.SMInfo) []pkeyread.PortLID {
	ports := make([]pkeyread.PortLID, len(sms))
	for i, sm := range sms {
		ports[i] = pkeyread.PortLID{Port: sm.GUID, LID: sm.LID}
	}
	return ports
}

// release opens the gate once a look saw this OpenSM master: OpenSM is
// restarted for a second SM gone, and the verdict is cleared from the
// database before the gate opens, so that --status and the next term never
// see a verdict the gate no longer holds. A clear that fails keeps the gate
// closed; the next look tries again (without a second restart).
func (w *secondSMWatch) release(ctx context.Context, t *watchEnv) {
	w.mu.Lock()
	was, unread := w.found, w.unread
	w.mu.Unlock()
	if was == nil && !unread && w.clean {
		return
	}
	if was != nil && !w.restarted {
		// The jobs stay held meanwhile: found is still set. A restart the
		// rate limit defers keeps them held until it runs: the other SM
		// programmed the ports, and only a new OpenSM writes every table.
		if !w.restart(ctx, t, *was) {
			w.describeHeld(ctx, t)
			return
		}
		w.restarted = true
	}
	if _, err := w.check.Store.ClearSecondSMs(ctx, t.id); err != nil {
		if ctx.Err() == nil {
			t.Log.Error("clear the recorded second subnet manager; jobs wait until it is cleared", "error", err)
		}
		w.clean = false
		return
	}
	w.mu.Lock()
	w.found, w.unread = nil, false
	w.mu.Unlock()
	w.clean, w.restarted = true, false
	if was != nil {
		// As after a lifted freeze: the jobs complete on a sweep of the
		// OpenSM restarted for it, not on one from before.
		t.report.forgetLater("the second subnet manager is gone")
	}
}

// restart starts OpenSM again so that it writes every port's table, at most
// once every secondSMRestartEvery check intervals: an SM that comes and goes
// must not make the production OpenSM restart in a loop. False when the limit
// defers it: the caller keeps the gate closed (what the other SM wrote stays
// until a new OpenSM writes every table) and asks again at the next look.
// A restart that fails is logged, and the apply that follows goes to OpenSM
// as it is.
func (w *secondSMWatch) restart(ctx context.Context, t *watchEnv, was store.SecondSM) bool {
	if w.check.Restart == nil {
		return true
	}
	every := secondSMRestartEvery * t.Cfg.CheckInterval
	if since := time.Since(w.lastStart); !w.lastStart.IsZero() && since < every {
		if !w.deferred {
			t.Log.Warn("second subnet manager gone: OpenSM not restarted yet, it was restarted for one shortly before "+
				"(at most once every "+every.String()+"); jobs wait for the restart",
				"port_guid", was.PortGUID.String(), "since", since.Round(time.Second).String(),
				"restart_in", (every - since).Round(time.Second).String())
			w.deferred = true
		}
		w.mu.Lock()
		w.restartAt = w.lastStart.Add(every)
		w.mu.Unlock()
		return false
	}
	t.Log.Info("second subnet manager gone: this manager's OpenSM is master again; restarting it and applying the recorded state again",
		"port_guid", was.PortGUID.String())
	w.lastStart, w.deferred = time.Now(), false
	w.mu.Lock()
	w.restartAt = time.Time{}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, secondSMRestart)
	defer cancel()
	if err := w.check.Restart(ctx); err != nil {
		t.Log.Error("restart OpenSM after the second subnet manager", "error", err)
	}
	return true
}

// secondSMRestartEvery bounds the restarts for a second SM gone, in check
// intervals.
const secondSMRestartEvery = 10

// secondSMRestart bounds a restart: OpenSM's stop, the supervisor's back-off
// and the new OpenSM's start.
const secondSMRestart = time.Minute

// hold closes the gate for sm: logs and records it when new, and tells every
// open job (those sent since too) why it waits. A record that fails is
// tried again at the next look; the gate is closed meanwhile.
func (w *secondSMWatch) hold(ctx context.Context, t *watchEnv, sm store.SecondSM) {
	w.mu.Lock()
	if w.found == nil || *w.found != sm {
		t.Log.Error("second subnet manager: no job completes while it is master, or may be over ports without M_Key protection", "port_guid", sm.PortGUID.String(),
			"priority", sm.Priority, "state", sm.State, "own_port_guid", w.check.Own.String(), "own_state", sm.OwnState)
		w.found, w.clean = &sm, false
	}
	w.unread = false // this look's verdict replaces the unread one
	w.mu.Unlock()
	w.restarted = false
	if !w.clean {
		err := w.check.Store.RecordSecondSM(ctx, t.id, sm)
		w.clean = err == nil
		if err != nil && !errors.Is(err, store.ErrFenced) && ctx.Err() == nil {
			t.Log.Error("record the second subnet manager; it is recorded again at the next look", "error", err)
		}
	}
	// Applies wait (holds): the jobs sent meanwhile are marked Running by
	// hand, so that they say, like the others, that the manager has them.
	w.describe(ctx, t)
}

// describe tells every open job that it waits, the second SM among the
// reasons: the term describes them with the whole verdict.
func (w *secondSMWatch) describe(ctx context.Context, t *watchEnv) {
	if rev, err := t.Store.Revision(ctx); err == nil {
		_, err = t.Store.MarkJobsRunning(ctx, t.id, rev)
		if err != nil {
			t.Log.Error("mark the jobs waiting for the second subnet manager running", "error", err)
		}
	}
	t.report.describeHeld(ctx)
}

// describeHeld tells the open jobs why they wait while the gate stays
// closed on a look that failed (a verdict restored, or unread): the jobs
// sent since say it too.
func (w *secondSMWatch) describeHeld(ctx context.Context, t *watchEnv) {
	if text := secondSMReason(w.evidence()); text != "" {
		w.describe(ctx, t)
	}
}

// recordForeign records the foreign SMs that master nothing when they
// changed, logging each new one: no gate, no job held.
func (w *secondSMWatch) recordForeign(ctx context.Context, t *watchEnv, sms []store.SecondSM) {
	if w.foreignOK && slices.Equal(sms, w.foreign) {
		return
	}
	for _, sm := range sms {
		if !slices.ContainsFunc(w.foreign, func(o store.SecondSM) bool { return o.PortGUID == sm.PortGUID }) {
			t.Log.Warn("foreign subnet manager: MASTER by its own SMInfo but master of no port (the SM_Key and the M_Keys "+
				"keep it off them); no job waits for it; stop it (docs/runbooks.md)", "port_guid", sm.PortGUID.String(),
				"priority", sm.Priority, "state", sm.State)
		}
	}
	err := w.check.Store.RecordForeignSMs(ctx, t.id, sms)
	w.foreign, w.foreignOK = sms, err == nil
	if err != nil && !errors.Is(err, store.ErrFenced) && ctx.Err() == nil {
		t.Log.Error("record the foreign subnet managers", "error", err)
	}
}

// restore starts the term's verdict from the one recorded: a second SM the
// previous term saw keeps the gate closed until a look sees this OpenSM
// master. A database that cannot be read keeps it closed too (unread).
func (w *secondSMWatch) restore(ctx context.Context, t *watchEnv) {
	sms, err := w.check.Store.SecondSMs(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if !w.unread && ctx.Err() == nil {
			t.Log.Error("read the recorded second subnet manager; jobs wait until it is read, or a look sees this OpenSM master",
				"error", err)
		}
		w.unread, w.clean = true, false
		return
	}
	w.unread, w.clean = false, true
	if len(sms) == 0 {
		return
	}
	sm := store.SecondSM{PortGUID: sms[0].PortGUID, Priority: sms[0].Priority, State: sms[0].State, OwnState: sms[0].OwnState}
	w.found = &sm
	t.Log.Warn("second subnet manager recorded by a previous term: no job completes until a look sees this manager's OpenSM master",
		"port_guid", sm.PortGUID.String(), "priority", sm.Priority, "state", sm.State, "term", sms[0].Term,
		"seen_at", sms[0].SeenAt)
}

func (w *secondSMWatch) isUnread() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.unread
}

// confirm is finish's look before a sweep completes jobs: a second SM that
// took the subnet over since the last check (up to a check interval ago)
// would otherwise see them completed on a sweep it is about to overwrite.
// It costs O(1) SMPs and those of the ports just read (places): the full
// look runs on its own schedule (every check interval), and here only while
// a second SM is held (its going is seen at once), before the term's first
// full look, or when OpenSM's log named another SM since the last full look
// (smEventLog). Otherwise the short look (quick) reads this OpenSM's port,
// the ports of places, the SMs the last full look found and the masters
// those ports name; why that is enough is said at quick. An SM OpenSM logs
// while the look reads makes it look again (settle); one logged after it,
// before the jobs complete, holds them (appeared, finish's).
//
// A look that fails holds the sweep's jobs (fail closed): the reason it
// returns keeps them waiting, and the gate stays closed (reason) until a look
// reads the fabric. One the term's end cuts short records nothing. One that
// sees the second SM gone makes the loop apply again (takeSecondSMGone)
// before finish reads reapply: the jobs complete on a sweep of the OpenSM
// restarted for it, not on the one from before.
func (w *secondSMWatch) confirm(ctx context.Context, t *watchEnv, topo *topology.Topology, places []fabric.GUID) (lookFailed string) {
	if w == nil {
		return ""
	}
	w.detecting.Lock()
	full, looks, err := w.settle(ctx, t, topo, places)
	w.detecting.Unlock()
	t.Log.Debug("second-SM look before the jobs complete", "full", full, "looks", looks, "ports", len(places), "error", err)
	if err == nil {
		return ""
	}
	if ctx.Err() == nil {
		w.mu.Lock()
		w.unreadLook = err.Error()
		w.mu.Unlock()
	}
	return err.Error()
}

// besideSweep starts the term's first full look (the baseline) when an
// apply's sweep starts, so that finish's look after that sweep is the short
// one: at 1,500 hosts a full look costs tens of milliseconds, which would
// otherwise sit between the sweep's end and the jobs' completion. wait
// returns once the look has ended (the apply waits for it on every path:
// nothing of the apply outlives it); finish's confirm waits for it anyway,
// on w.detecting, so a baseline slower than the sweep still runs beside
// it, begun at its start, and finish looks after it.
//
// The baseline is a full look like the scheduled one and gives finish's
// look what one of those gives any later apply. What it reads comes before
// the sweep's end, as a scheduled look's did: an SM OpenSM logs from the
// look's start on moves the count past covered and finish's look is a full
// one; one that opens a port after the look read it is caught by finish's
// short look (its places' MasterSMLID, this OpenSM's state), the trap 144
// OpenSM logs (settle, appeared) or the next full look. A baseline that
// fails, or that the term's end cuts short, records nothing and leaves the
// term unscanned: finish's look is then the full one after the sweep, as
// before. One read before this OpenSM is master (a cold start: its port
// names no master, or host ports name none yet: unswept) clears nothing
// and leaves the term unscanned too: it may only hold (detectLocked).
// Nothing starts once the term has scanned, while a second SM is held
// (finish then looks at every port after the sweep: the SM's going must be
// seen after it) or while a scheduled look runs (a full look itself).
func (w *secondSMWatch) besideSweep(ctx context.Context, t *watchEnv) (wait func()) {
	if w == nil || w.holds() || !w.detecting.TryLock() {
		return func() {}
	}
	if w.scanned {
		w.detecting.Unlock()
		return dialAhead(ctx, w.check.Dialer)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.detecting.Unlock()
		err := w.detectLocked(ctx, t, true)
		t.Log.Debug("second-SM baseline beside the sweep", "scanned", w.scanned, "error", err)
	}()
	return func() { <-done }
}

// afterLook runs the check's test hook (AfterLook), if any.
func (w *secondSMWatch) afterLook(ctx context.Context, revision int64) {
	if w != nil && w.check.AfterLook != nil {
		w.check.AfterLook(ctx, revision)
	}
}

// settle is confirm's look, w.detecting held, repeated while an entry of
// OpenSM's log naming another SM (smEventLog) came during it: such an entry
// may name an SM behind a port the look had read already, or one the short
// look does not read. The look after it is a full one, which reads every
// host port after the entry. Entries that cannot matter (mayMatter) are
// left to the next finish's look, a full one; past settleLooks, entries
// that still come hold the sweep's jobs. The count it
// settled on is kept (settled): an entry after it, before the jobs
// complete, holds them too (appeared).
func (w *secondSMWatch) settle(ctx context.Context, t *watchEnv, topo *topology.Topology, places []fabric.GUID) (full bool, looks int, err error) {
	before := t.smEvents.pump(t.Log)
	full = w.holds() || !w.scanned || before.all != w.covered
	for looks = 1; looks <= settleLooks; looks++ {
		if full {
			err = w.detectLocked(ctx, t, false)
		} else {
			err = w.quick(ctx, t, topo, places)
		}
		if err != nil {
			return full, looks, err
		}
		after := t.smEvents.pump(t.Log)
		if !w.mayMatter(before, after) {
			w.setSettled(after)
			return full, looks, nil
		}
		before, full = after, true
	}
	return full, settleLooks, fmt.Errorf("OpenSM kept logging another subnet manager (%q) during %d looks in a row",
		t.smEvents.lastEntry(), settleLooks)
}

func (w *secondSMWatch) setSettled(m smEventMark) {
	w.mu.Lock()
	w.settled = m
	w.mu.Unlock()
}

// settleLooks bounds settle's looks: an SM that OpenSM names at every look
// holds the jobs rather than the loop.
const settleLooks = 3

// mayMatter says whether OpenSM's entries between from and to may name an
// SM that programs ports no look read after them: this OpenSM left MASTER,
// or a host port lacks M_Key protection (exposed). Where every host port
// is under M_Key protection an SM that appears programs none (one with
// another SM_Key masters nothing, and only one with this OpenSM's SM_Key is
// handed the subnet, which this OpenSM's STANDBY entry then says): a
// tenant opening its SM device, or making its port send traps, must not
// hold every tenant's jobs there.
func (w *secondSMWatch) mayMatter(from, to smEventMark) bool {
	return to.deposed != from.deposed || to.all != from.all && w.exposed.Load()
}

// appeared is the entry of OpenSM's log naming another SM that came since
// confirm's look settled and may matter (mayMatter), read at the last
// moment before the jobs complete (inside their transaction); "" when none
// came, or there is no watch. Such an SM was behind a port no look read
// after it: the jobs wait for the next finish, whose look is a full one
// (the count moved past covered).
func (w *secondSMWatch) appeared(t *watchEnv) string {
	if w == nil {
		return ""
	}
	now := t.smEvents.pump(t.Log)
	w.mu.Lock()
	settled := w.settled
	w.mu.Unlock()
	if !w.mayMatter(settled, now) {
		return ""
	}
	return t.smEvents.lastEntry()
}

// quick is confirm's short look, w.detecting held: this OpenSM's port (its
// MasterSMLID, its SM's state, the master it names), the PortInfo of the
// ports of places (each one's MasterSMLID, IsSM and M_Key protection), the
// SMInfo of the SMs the last full look found behind ports, and that of each
// master those ports name. It can only close the gate: it reads too little
// to clear a verdict or name the foreign SMs (the full look does).
//
// Enough, because a master over ports shows in it. One that took the
// subnet over (a higher priority, our SM_Key) made this OpenSM STANDBY and
// rewrote MasterSMLID on every port it swept, this OpenSM's port and the
// places among them. One with another SM_Key that programs ports rewrites
// their MasterSMLID where it can, the places' too, and where it does not
// (ports without M_Key protection) the places show that and an SM found
// before is read again. One that started since the last full look was met by
// this OpenSM's own heavy sweep, which asks every port with IsSM its SMInfo
// and logs another SM_Key (smEventLog): the full look runs then. One that
// opens its port while the look reads, or after it before the jobs
// complete, sends a trap 144 that OpenSM logs: settle looks again, appeared
// holds the jobs. Past that (an SM OpenSM has not logged by the jobs'
// transaction), the full look every check interval finds it.
func (w *secondSMWatch) quick(ctx context.Context, t *watchEnv, topo *topology.Topology, places []fabric.GUID) error {
	if topo == nil {
		var err error
		if topo, err = t.subnetDump().Load(); err != nil {
			err = fmt.Errorf("OpenSM's subnet dump: %w", err)
			w.lookFailed(ctx, t, err)
			return err
		}
	}
	lid, ok := topo.LID(w.check.Own)
	if !ok || lid == 0 {
		err := fmt.Errorf("port %s has no LID in OpenSM's subnet dump (not swept yet?)", w.check.Own)
		w.lookFailed(ctx, t, err)
		return err
	}
	ports := slices.Clone(w.smPorts)
	for _, p := range places {
		if plid, ok := topo.LID(p); ok && plid != 0 && p != w.check.Own &&
			!slices.ContainsFunc(ports, func(q pkeyread.PortLID) bool { return q.LID == plid }) {
			ports = append(ports, pkeyread.PortLID{Port: p, LID: plid})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, secondSMRead)
	defer cancel()
	l, err := w.lookAt(ctx, lid, ports)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		w.lookFailed(ctx, t, err)
		return err
	}
	w.lookRead()
	if l.unprotected > 0 {
		w.exposed.Store(true)
	}
	if v := judgeMasters(l, w.check.Own); v.known && v.found != nil {
		w.hold(ctx, t, *v.found)
	}
	return nil
}

// evidence is the watch's verdict, as the gates judge it: the second SM
// seen last (or restored), the recorded one unread, the restart deferred.
func (w *secondSMWatch) evidence() verdict.SecondSMEvidence {
	if w == nil {
		return verdict.SecondSMEvidence{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e := verdict.SecondSMEvidence{Master: w.found, Own: w.check.Own, Unread: w.unread, RestartAt: w.restartAt,
		LookFailed: w.unreadLook}
	if !w.restartAt.IsZero() {
		e.RestartEvery = secondSMRestartEvery
	}
	return e
}

// reason is the gate's reason while a second SM is seen (or the recorded
// one unread); none otherwise.
func (w *secondSMWatch) reason() []GateReason {
	return verdict.Judge(verdict.Evidence{SecondSM: w.evidence()}).Of(GateSecondSM)
}

// secondSMReason is the text of e's reason; "" when it holds nothing.
func secondSMReason(e verdict.SecondSMEvidence) string {
	if rs := verdict.Judge(verdict.Evidence{SecondSM: e}).Of(GateSecondSM); len(rs) > 0 {
		return rs[0].Text
	}
	return ""
}

// holds says whether a second SM is seen (or the recorded one unread): the
// term applies nothing then. A look of finish's that failed holds jobs, not
// applies.
func (w *secondSMWatch) holds() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.found != nil || w.unread
}

// newSecondSMWatch restores the recorded verdict into the term's watch, when
// the applier has a check; startServices runs its look every check interval.
func (t *term) newSecondSMWatch(ctx context.Context) {
	if t.SecondSM == nil || t.SecondSM.Dialer == nil || t.SecondSM.Own == 0 {
		return
	}
	t.secondSM = &secondSMWatch{check: t.SecondSM}
	t.secondSM.restore(ctx, t.watchEnv())
}

// smEventLog counts the entries of OpenSM's log that say another SM is on
// the fabric, as the term's tail hands them out: OpenSM's heavy sweep asks
// every port whose IsSM is set its SMInfo, and logs an SM whose SM_Key is
// not its own (which it ignores: both sweep as master), and a trap 144 (a
// port's capabilities changed: an SM opened it). Such an entry since the
// last full look makes finish's look a full one (confirm); one while that
// look reads makes it look again (settle), and one after it, before the
// jobs complete, holds them (appeared).
type smEventLog struct {
	n       atomic.Uint64 // every such entry
	deposed atomic.Uint64 // of them, this OpenSM leaving MASTER
	mu      sync.Mutex    // observe runs in whichever goroutine pumps the tail
	last    string        // the last such entry's message, for the jobs' texts
	// tail is the term's reader of OpenSM's log (startLog sets it before
	// any service starts); nil when the log could not be opened.
	tail *opensm.Tail
}

// smEventMark is smEventLog's counts at a moment.
type smEventMark struct{ all, deposed uint64 }

// observe is the tail's handler.
func (l *smEventLog) observe(e opensm.Entry) {
	if e.Level&(opensm.LevelError|opensm.LevelSys) == 0 {
		return
	}
	deposed := smDeposed(e.Message)
	if !deposed && !smEvent(e.Message) {
		return
	}
	l.mu.Lock()
	l.last = e.Message
	l.mu.Unlock()
	if deposed {
		l.deposed.Add(1)
	}
	l.n.Add(1)
}

func (l *smEventLog) count() uint64 { return l.n.Load() }

// pump reads what OpenSM logged since the tail's last read and returns the
// counts then. A log that cannot be read is logged; the counts stay what
// was read (the look's own reads still judge what it read).
func (l *smEventLog) pump(log *slog.Logger) smEventMark {
	if l.tail != nil {
		if err := l.tail.Pump(); err != nil {
			log.Warn("read OpenSM's log for entries naming another subnet manager", "error", err)
		}
	}
	return smEventMark{deposed: l.deposed.Load(), all: l.n.Load()}
}

func (l *smEventLog) lastEntry() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// smEvent says whether an ERROR or SYS entry's message names another SM:
// one with another SM_Key met by a heavy sweep, one that failed the M_Key
// check, or a port's capabilities changed (trap 144: an SM opened it, or
// raised its priority).
func smEvent(msg string) bool {
	for _, s := range []string{"Found remote SM", "ERR 2F18:", "ERR 2F1A:", "ERR 2F1B:"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return strings.Contains(msg, "Generic Notice") && strings.Contains(msg, " num:144 ")
}

// smDeposed says whether an entry says this OpenSM left MASTER: another SM
// took the subnet over.
func smDeposed(msg string) bool {
	return strings.Contains(msg, "Entering STANDBY state") || strings.Contains(msg, "Entering NOTACTIVE state")
}
