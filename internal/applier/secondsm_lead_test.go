package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// The second-SM verdict through a term: the lead rig's fake OpenSM and real
// SQLite store, with the fake SMP fabric (fakesmp_test.go) answering the
// looks.

// secondSMRig is a lead rig whose applier looks at smp; restarts counts
// the restarts of OpenSM for a second SM gone, each one the fake OpenSM's
// restart, and reloadsAtRestart the SIGHUPs before the last.
type secondSMRig struct {
	*leadRig
	smp              *fakeSMPFabric
	db               *flakySecondSMStore
	restarts         atomic.Int32
	reloadsAtRestart atomic.Int32
}

func newSecondSMRig(t *testing.T) *secondSMRig {
	r := &secondSMRig{leadRig: newLeadRig(t), smp: newFakeSMPFabric()}
	r.db = &flakySecondSMStore{Store: r.st}
	r.sm.remoteSMs = r.smp.remoteSMLines
	r.app.SecondSM = &SecondSMCheck{Dialer: r.smp, Own: ownSMGUID, Store: r.db, Restart: func(context.Context) error {
		_, _, reloads := r.sm.state()
		r.reloadsAtRestart.Store(int32(len(reloads)))
		r.restarts.Add(1)
		r.sm.crash()
		return nil
	}}
	return r
}

// flakySecondSMStore fails the verdict's reads and writes while told to, as
// a database that went away.
type flakySecondSMStore struct {
	*store.Store
	failRead, failRecord, failClear atomic.Bool
}

var errAway = fmt.Errorf("database: %w", syscall.ECONNREFUSED)

func (s *flakySecondSMStore) SecondSMs(ctx context.Context) ([]store.SecondSM, error) {
	if s.failRead.Load() {
		return nil, errAway
	}
	return s.Store.SecondSMs(ctx)
}

func (s *flakySecondSMStore) RecordSecondSM(ctx context.Context, term int64, sm store.SecondSM) error {
	if s.failRecord.Load() {
		return errAway
	}
	return s.Store.RecordSecondSM(ctx, term, sm)
}

func (s *flakySecondSMStore) ClearSecondSMs(ctx context.Context, term int64) (int64, error) {
	if s.failClear.Load() {
		return 0, errAway
	}
	return s.Store.ClearSecondSMs(ctx, term)
}

// term is a term of the rig's applier that the test drives by hand: no
// loop, no watch ticking; its verdict is restored as a term's start does.
func (r *secondSMRig) term() *term {
	r.t.Helper()
	id, err := r.st.NewTerm(r.t.Context(), "test")
	if err != nil {
		r.t.Fatal(err)
	}
	t := &term{Applier: r.app, id: id, applied: -1, gate: &gatekeeper{}}
	t.secondSM = &secondSMWatch{check: r.app.SecondSM}
	t.secondSM.restore(r.t.Context(), t.watchEnv())
	return t
}

// recordOther records sm as a previous leader's (another manager's) term did.
func (r *secondSMRig) recordOther(sm store.SecondSM) {
	r.t.Helper()
	old, err := r.st.NewTerm(r.t.Context(), "other-manager")
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.st.RecordSecondSM(r.t.Context(), old, sm); err != nil {
		r.t.Fatal(err)
	}
}

func (r *secondSMRig) secondSMs() []store.SecondSM {
	r.t.Helper()
	sms, err := r.st.SecondSMs(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	return sms
}

// waitDescribed polls the job until its description holds text; it must not
// complete meanwhile.
func (r *secondSMRig) waitDescribed(j store.Job, text string) {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := r.job(j)
		if got.Status == store.StatusCompleted {
			r.t.Fatalf("job %d Completed, want it waiting with %q\nlog:\n%s", j.ID, text, r.logs)
		}
		if strings.Contains(got.Description, text) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("job %d is %s (%s), want it waiting with %q\nlog:\n%s", j.ID, got.Status, got.Description, text, r.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var tenantRecorded = store.SecondSM{PortGUID: tenantGUID, Priority: 15, State: "MASTER", OwnState: "STANDBY"}

// A term starts from the second SM another manager's term recorded: while
// its looks fail (the other SM moved this OpenSM's port to another LID) no
// job completes and the record stays; once a look sees this OpenSM master
// OpenSM is restarted, the record cleared, and the job completes on a sweep
// after the restart.
func TestLeadRestoresTheRecordedSecondSM(t *testing.T) {
	r := newSecondSMRig(t)
	r.recordOther(tenantRecorded)
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[smpOwnLID].answersAs = 0x0002c90300000101 })
	_, end := r.lead()
	defer end()
	j := r.network(netA, 101)
	r.waitDescribed(j, "Second subnet manager: port "+tenantGUID.String())
	waitLog(t, r.logs, "which subnet manager is master could not be read", "answers as port")
	if got := r.secondSMs(); len(got) != 1 || got[0].PortGUID != tenantGUID {
		t.Fatalf("recorded second SMs %+v after failed looks; want the restored one kept", got)
	}
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[smpOwnLID].answersAs = 0 })
	r.wait(j, store.StatusCompleted)
	if n := r.restarts.Load(); n != 1 {
		t.Errorf("OpenSM restarted %d times for the second SM gone; want 1", n)
	}
	if _, _, reloads := r.sm.state(); len(reloads) <= int(r.reloadsAtRestart.Load()) {
		t.Errorf("job completed with %d SIGHUPs, none after the restart (%d before it)", len(reloads), r.reloadsAtRestart.Load())
	}
	if got := r.secondSMs(); len(got) != 0 {
		t.Errorf("recorded second SMs %+v after this OpenSM was seen master; want none", got)
	}
}

// A tenant's SM, MASTER on its own host but master of no port (on hardware
// the SM_Key and M_Keys keep it off them), holds no job and restarts
// nothing: it is recorded as foreign. Once the hosts' ports name it (it took
// them over), it is the second SM and the job waits.
func TestLeadTenantSMMasterOfNothingHoldsNothing(t *testing.T) {
	r := newSecondSMRig(t)
	master := pkeyread.SMMaster
	r.smp.tenantSM(&master, false)
	_, end := r.lead()
	defer end()
	r.wait(r.network(netA, 101), store.StatusCompleted)
	deadline := time.Now().Add(15 * time.Second)
	for {
		foreign, err := r.st.ForeignSMs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(foreign) == 1 && foreign[0].PortGUID == tenantGUID && foreign[0].State == "MASTER" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("foreign SMs %+v; want the tenant's\nlog:\n%s", foreign, r.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := r.secondSMs(); len(got) != 0 {
		t.Fatalf("second SMs %+v for an SM that masters nothing; want none", got)
	}
	r.smp.tenantSM(&master, true)
	j := r.port("p1", netA, guidA)
	r.waitDescribed(j, "Second subnet manager: port "+tenantGUID.String())
	r.smp.tenantSM(nil, false)
	r.wait(j, store.StatusCompleted)
	if n := r.restarts.Load(); n != 1 {
		t.Errorf("OpenSM restarted %d times; want 1 (for the SM over ports gone)", n)
	}
}

// Without M_Key protection on the ports (the simulator reports none: it
// ignores M_Keys), a tenant's SM can program them without rewriting their
// MasterSMLID: it is a second SM, and the job waits.
func TestLeadTenantSMOnUnprotectedPortsHoldsJobs(t *testing.T) {
	r := newSecondSMRig(t)
	r.smp.unprotect()
	_, end := r.lead()
	defer end()
	r.wait(r.network(netA, 101), store.StatusCompleted)
	master := pkeyread.SMMaster
	r.smp.tenantSM(&master, false)
	j := r.port("p1", netA, guidA)
	r.waitDescribed(j, "Second subnet manager: port "+tenantGUID.String())
	if foreign, err := r.st.ForeignSMs(t.Context()); err != nil || len(foreign) != 0 {
		t.Errorf("foreign SMs %+v, %v; want none: it may program the ports", foreign, err)
	}
}

// A tenant's stock OpenSM just started (DISCOVERING), or kept STANDBY, is
// not master yet; without M_Key protection on the ports it programs them
// the moment it is (the soak saw one rewrite a host's table right after a
// job completed): it is a second SM, in either state, and the job waits.
// Once it is gone the job completes, after the restart that rewrites every
// table.
func TestLeadTenantSMNotMasterYetOnUnprotectedPortsHoldsJobs(t *testing.T) {
	for _, state := range []pkeyread.SMState{pkeyread.SMDiscovering, pkeyread.SMStandby} {
		t.Run(state.String(), func(t *testing.T) {
			r := newSecondSMRig(t)
			r.smp.unprotect()
			_, end := r.lead()
			defer end()
			r.wait(r.network(netA, 101), store.StatusCompleted)
			r.smp.tenantSM(&state, false)
			j := r.port("p1", netA, guidA)
			r.waitDescribed(j, "Second subnet manager: port "+tenantGUID.String()+" (priority 0, "+state.String()+
				") may become master")
			r.smp.tenantSM(nil, false)
			r.wait(j, store.StatusCompleted)
			if n := r.restarts.Load(); n != 1 {
				t.Errorf("OpenSM restarted %d times; want 1 (for the tenant's SM gone)", n)
			}
		})
	}
}

// A tenant's OpenSM started since the last full look, still DISCOVERING
// (its first sweep), behind the port of a place the sweep just changed:
// finish's short look reads that port and holds the sweep's jobs, on ports
// without M_Key protection, before the tenant's OpenSM becomes master and
// rewrites the place.
func TestConfirmSeesATenantSMDiscoveringAtAPlace(t *testing.T) {
	r := newSecondSMRig(t)
	r.smp.unprotect()
	tm := r.term()
	tm.secondSM.detect(t.Context(), tm.watchEnv())
	if tm.secondSM.holds() {
		t.Fatalf("gate closed before the tenant's SM started: %v", tm.secondSM.reason())
	}
	discovering := pkeyread.SMDiscovering
	r.smp.tenantSM(&discovering, false)
	sent := r.smp.sent.Load()
	if rs := tm.secondSM.confirm(t.Context(), tm.watchEnv(), nil, []fabric.GUID{tenantGUID}); rs != "" {
		t.Fatalf("confirm = %q; want no failure (the look read the fabric)", rs)
	}
	if n := r.smp.sent.Load() - sent; n > 5 {
		t.Errorf("finish's look sent %d SMPs; want the short look's 5 (the own port's 3, the place's PortInfo and SMInfo; a full look sends 9)", n)
	}
	if !tm.secondSM.holds() {
		t.Fatalf("gate open after finish's look saw the tenant's SM DISCOVERING behind a place without M_Key protection"+
			"\nlog:\n%s", r.logs)
	}
	if got := r.secondSMs(); len(got) != 1 || got[0].PortGUID != tenantGUID || got[0].State != "DISCOVERING" {
		t.Errorf("recorded second SMs %+v; want the tenant's, DISCOVERING", got)
	}
}

// When the look before a sweep completes jobs (finish's confirm) is the
// one that sees the second SM gone, OpenSM is restarted and the loop must
// apply again: the sweep finish is about to judge is from before the
// restart, and its jobs complete on the restarted OpenSM's sweep.
func TestConfirmSecondSMGoneAppliesAgain(t *testing.T) {
	r := newSecondSMRig(t)
	r.recordOther(tenantRecorded)
	tm := r.term()
	tm.applied, tm.gate.blocked = 3, 3 // a sweep of revision 3 about to be judged, its jobs held
	if rs := tm.secondSM.confirm(t.Context(), tm.watchEnv(), nil, nil); len(rs) != 0 {
		t.Fatalf("confirm = %v; want no reason (the look read the fabric)", rs)
	}
	if r.restarts.Load() != 1 {
		t.Fatalf("OpenSM restarted %d times; want 1\nlog:\n%s", r.restarts.Load(), r.logs)
	}
	tm.takeReports() // as finish does right after its look
	if !tm.reapply || tm.gate.blocked != 0 {
		t.Fatalf("after detectNow saw the second SM gone: reapply %v, blocked %d; want the state applied again "+
			"(finish completes nothing on the sweep from before the restart)", tm.reapply, tm.gate.blocked)
	}
	if tm.secondSM.holds() {
		t.Errorf("gate still closed: %v", tm.secondSM.reason())
	}
}

// A look the term's end cuts short (the scan of the host ports waits) records
// nothing, clears nothing and restarts nothing: the ports it did not read
// may be the ones the second SM masters.
func TestSecondSMLookCutShortKeepsTheVerdict(t *testing.T) {
	r := newSecondSMRig(t)
	r.recordOther(tenantRecorded)
	tm := r.term()
	r.smp.hang, r.smp.hung = map[uint16]bool{smpOwnLID: true}, make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tm.secondSM.detect(ctx, tm.watchEnv())
	}()
	<-r.smp.hung // the scan waits on a host port
	cancel()
	<-done
	if !tm.secondSM.holds() || r.restarts.Load() != 0 {
		t.Fatalf("after a look cut short: gate closed %v, %d restarts; want closed, none", tm.secondSM.holds(), r.restarts.Load())
	}
	if got := r.secondSMs(); len(got) != 1 {
		t.Fatalf("recorded second SMs %+v; want the restored one kept", got)
	}
	if foreign, err := r.st.ForeignSMs(t.Context()); err != nil || len(foreign) != 0 {
		t.Fatalf("foreign SMs %+v, %v; want none recorded", foreign, err)
	}
}

// The database away: a verdict that cannot be restored keeps the gate
// closed until it is read or a look sees this OpenSM master; one that cannot
// be recorded or cleared keeps the verdict in memory (the gate closed) and
// is written at the next look; a look that fails keeps the last verdict.
func TestSecondSMDatabaseAway(t *testing.T) {
	r := newSecondSMRig(t)
	r.recordOther(tenantRecorded)
	r.db.failRead.Store(true)
	tm := r.term()
	if rs := tm.secondSM.reason(); len(rs) != 1 || rs[0].Text != verdict.SecondSMUnreadText {
		t.Fatalf("gate with the verdict unread: %v; want closed as unread", rs)
	}
	// A failed look: still unread, still closed.
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[smpOwnLID].answersAs = 0x0002c90300000101 })
	tm.secondSM.detect(t.Context(), tm.watchEnv())
	if !tm.secondSM.holds() {
		t.Fatal("gate opened by a look that failed, the verdict unread")
	}
	// The database back, the look still failing: the recorded verdict holds.
	r.db.failRead.Store(false)
	tm.secondSM.detect(t.Context(), tm.watchEnv())
	if rs := tm.secondSM.reason(); len(rs) != 1 || !strings.Contains(rs[0].Text, tenantGUID.String()) {
		t.Fatalf("gate after the verdict was read: %v; want the recorded second SM", rs)
	}
	// This OpenSM master, the clear failing: closed, restarted once.
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[smpOwnLID].answersAs = 0 })
	r.db.failClear.Store(true)
	tm.secondSM.detect(t.Context(), tm.watchEnv())
	if !tm.secondSM.holds() || r.restarts.Load() != 1 {
		t.Fatalf("clear failed: gate closed %v, %d restarts; want closed, 1", tm.secondSM.holds(), r.restarts.Load())
	}
	r.db.failClear.Store(false)
	tm.secondSM.detect(t.Context(), tm.watchEnv())
	if tm.secondSM.holds() || r.restarts.Load() != 1 || len(r.secondSMs()) != 0 {
		t.Fatalf("clear retried: gate closed %v, %d restarts, recorded %+v; want open, 1, none",
			tm.secondSM.holds(), r.restarts.Load(), r.secondSMs())
	}
	// A second SM over ports while the record fails: closed, recorded later.
	master := pkeyread.SMMaster
	r.smp.tenantSM(&master, true)
	r.db.failRecord.Store(true)
	tm.secondSM.detect(t.Context(), tm.watchEnv())
	if !tm.secondSM.holds() || len(r.secondSMs()) != 0 {
		t.Fatalf("record failed: gate closed %v, recorded %+v; want closed, none yet", tm.secondSM.holds(), r.secondSMs())
	}
	r.db.failRecord.Store(false)
	tm.secondSM.detect(t.Context(), tm.watchEnv())
	if got := r.secondSMs(); len(got) != 1 || got[0].PortGUID != tenantGUID || got[0].Term != tm.id {
		t.Fatalf("recorded %+v after the record was retried; want the tenant's SM by term %d", got, tm.id)
	}
}

// Restarts for a second SM gone are rate-limited: an SM that comes and goes
// makes the production OpenSM restart once per secondSMRestartEvery check
// intervals, the others logged.
func TestSecondSMRestartsRateLimited(t *testing.T) {
	r := newSecondSMRig(t)
	r.app.Cfg.CheckInterval = time.Hour // the window: ten hours
	tm := r.term()
	master := pkeyread.SMMaster
	for i := range 3 {
		r.smp.tenantSM(&master, true)
		tm.secondSM.detect(t.Context(), tm.watchEnv())
		if !tm.secondSM.holds() {
			t.Fatalf("the tenant's SM over ports did not close the gate\nlog:\n%s", r.logs)
		}
		r.smp.tenantSM(nil, false)
		tm.secondSM.detect(t.Context(), tm.watchEnv())
		// The first time OpenSM is restarted and the gate opens; within
		// the window the restart waits, and the jobs with it: what the
		// other SM wrote stays until a new OpenSM writes every table.
		if held := tm.secondSM.holds(); held != (i > 0) {
			t.Fatalf("round %d: gate closed = %t after the SM went; want %t\nlog:\n%s", i, held, i > 0, r.logs)
		}
	}
	if n := r.restarts.Load(); n != 1 {
		t.Errorf("OpenSM restarted %d times for three second SMs gone within the window; want 1", n)
	}
	if got := GateTexts(tm.secondSM.reason()); len(got) != 1 || !strings.Contains(got[0], "is restarted to write every port's table again at") {
		t.Errorf("reason while the restart waits = %q; want it to say when OpenSM is restarted", got)
	}
	if !strings.Contains(r.logs.String(), "OpenSM not restarted yet") {
		t.Errorf("the deferred restart was not logged\nlog:\n%s", r.logs)
	}
	// Once the window has passed, the next look restarts OpenSM and opens.
	tm.secondSM.lastStart = tm.secondSM.lastStart.Add(-11 * time.Hour)
	tm.secondSM.detect(t.Context(), tm.watchEnv())
	if tm.secondSM.holds() || r.restarts.Load() != 2 {
		t.Errorf("after the window: gate closed %t, restarts %d; want open, 2\nlog:\n%s",
			tm.secondSM.holds(), r.restarts.Load(), r.logs)
	}
}

// A scan cut short by its bound (or the term's end) is no look: the host
// ports it did not read may be the ones a second SM masters.
func TestSecondSMScanCutShortIsAnError(t *testing.T) {
	smp := newFakeSMPFabric()
	smp.hang, smp.hung = map[uint16]bool{smpOwnLID: true}, make(chan struct{}, 1)
	w := &secondSMWatch{check: &SecondSMCheck{Dialer: smp, Own: ownSMGUID}}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-smp.hung
		cancel()
	}()
	_, err := w.lookAt(ctx, smpOwnLID, []pkeyread.PortLID{{Port: tenantGUID, LID: smpTenantLID}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("lookAt cut short = %v; want an error (context canceled)", err)
	}
}

// A tenant's OpenSM that just opened its port (IsSM set, trap 144) and is
// busy in its first sweep answers no SMInfo: finish's look must not take
// that port for one without an SM. On ports without M_Key protection it
// becomes master within that sweep and programs them (the soak saw a job
// complete 250 ms after the tenant's OpenSM was master, on a full look
// whose SMInfo read of its port had timed out): the look fails, and the
// sweep's jobs wait for a look that reads it.
func TestConfirmFailsOnAnSMWhoseSMInfoDoesNotAnswer(t *testing.T) {
	r := newSecondSMRig(t)
	r.smp.unprotect()
	tm := r.term()
	discovering := pkeyread.SMDiscovering
	r.smp.tenantSM(&discovering, false)
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[smpTenantLID].smSilent = true })
	rs := tm.secondSM.confirm(t.Context(), tm.watchEnv(), nil, nil) // the term's first: a full look
	if rs == "" || !strings.Contains(rs, tenantGUID.String()) {
		t.Fatalf("confirm = %q; want the look failed on the tenant's port %s (IsSM, its SMInfo unanswered)\nlog:\n%s",
			rs, tenantGUID, r.logs)
	}
	if !strings.Contains(strings.Join(GateTexts(tm.secondSM.reason()), ""), "could not be read") {
		t.Fatalf("reason %v; want the jobs held until a look reads the fabric", tm.secondSM.reason())
	}
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[smpTenantLID].smSilent = false })
	if rs := tm.secondSM.confirm(t.Context(), tm.watchEnv(), nil, nil); rs != "" {
		t.Fatalf("confirm once the tenant's SM answers = %q; want a look that read the fabric", rs)
	}
	if got := r.secondSMs(); len(got) != 1 || got[0].PortGUID != tenantGUID {
		t.Errorf("recorded second SMs %+v; want the tenant's", got)
	}
}

// The same silent SM behind a tenant's port, every host port under M_Key
// protection and none naming it master: it programs nothing, whatever its
// state, and the look reads the fabric (a tenant holding its SM device open
// without answering must not hold every tenant's jobs).
func TestConfirmSilentSMOnProtectedPortsHoldsNothing(t *testing.T) {
	r := newSecondSMRig(t)
	tm := r.term()
	discovering := pkeyread.SMDiscovering
	r.smp.tenantSM(&discovering, false)
	r.smp.set(func(p map[uint16]*fakeSMPPort) { p[smpTenantLID].smSilent = true })
	if rs := tm.secondSM.confirm(t.Context(), tm.watchEnv(), nil, nil); rs != "" {
		t.Fatalf("confirm = %q; want a look that read the fabric\nlog:\n%s", rs, r.logs)
	}
	if rs := tm.secondSM.reason(); len(rs) != 0 {
		t.Fatalf("reason %v; want the gate open", rs)
	}
}
