package applier

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// A tenant's SM that appears after finish's second-SM look read the ports,
// before the sweep's jobs complete: no look of that finish saw it. OpenSM
// logs it (the trap 144 its port sends when the SM sets IsSM), and that
// entry, read after the look and again inside the jobs' transaction, holds
// them until a look of every host port after it shows the SM gone or
// harmless, where it may matter: a host port without M_Key protection, or
// this OpenSM deposed. Under M_Key protection a tenant's SM programs
// nothing, and holds nothing.

// trap144 is the entry OpenSM logs when a port's capabilities change, as
// when an SM opens it (measured on the simulated fabric, level ERROR).
func trap144(lid string) string {
	return logLine(0x01, "log_trap_info: Received Generic Notice type:4 num:144 (CapabilityMask, NodeDescription, "+
		"Link [Width|Speed] Enabled, SM priority changed) Producer:1 (Channel Adapter) from LID:"+lid+
		" TID:0x0000000000000000")
}

// finishHook is the term's store with before run inside the transaction
// that completes a sweep's jobs, ahead of the gates' verdict: what it
// changes comes after finish's look.
type finishHook struct {
	Store
	before func()
}

func (s *finishHook) FinishApply(ctx context.Context, a store.Apply, open func(store.GateState) bool) (store.Finished, error) {
	return s.Store.FinishApply(ctx, a, func(gs store.GateState) bool { s.before(); return open(gs) })
}

func (s *finishHook) FinishApplyProven(ctx context.Context, a store.Apply, p store.Proven,
	open func(store.GateState) bool) (store.Finished, error) {
	return s.Store.FinishApplyProven(ctx, a, p, func(gs store.GateState) bool { s.before(); return open(gs) })
}

// FinishesBesideProof and FinishApplyAwaiting are the store's, with before
// run in the same place: on PostgreSQL and MariaDB the jobs' transaction
// begins beside the read-back (early.go).
func (s *finishHook) FinishesBesideProof() bool {
	a, ok := s.Store.(awaitingFinisher)
	return ok && a.FinishesBesideProof()
}

func (s *finishHook) FinishApplyAwaiting(ctx context.Context, a store.Apply, proof func(context.Context) *store.Proven,
	within time.Duration, open func(store.GateState) bool) (store.Finished, error) {
	return s.Store.(awaitingFinisher).FinishApplyAwaiting(ctx, a, proof, within, func(gs store.GateState) bool { s.before(); return open(gs) })
}

// On every engine: on PostgreSQL and MariaDB the jobs' transaction begins
// beside the read-back, and an SM appearing during the reads, or inside it,
// holds the jobs as on SQLite.
func TestSMAppearingAfterTheLookHoldsTheJobs(t *testing.T) {
	for _, engine := range []string{config.EngineSQLite, config.EnginePostgres, config.EngineMySQL} {
		t.Run(engine, func(t *testing.T) { testSMAppearingAfterTheLook(t, engine) })
	}
}

func testSMAppearingAfterTheLook(t *testing.T, engine string) {
	discovering, master := pkeyread.SMDiscovering, pkeyread.SMMaster
	for _, tc := range []struct {
		name string
		// during: the SM appears while the look reads H2's port (the
		// changed one); otherwise inside the jobs' transaction.
		during    bool
		protected bool // every host port under M_Key protection
		deposed   bool // the SM takes the subnet over: this OpenSM goes STANDBY
		// every: OpenSM logs a trap 144 during every look (a port whose
		// capabilities keep changing), no SM staying.
		every bool
		state pkeyread.SMState
		want  string // the job's status after that sweep
		says  string // in its text
		// after: the job's status once a full look and a sweep followed.
		after, afterSays string
	}{
		{name: "DISCOVERING during the look, unprotected ports", during: true, state: discovering,
			want: store.StatusRunning, says: "Second subnet manager: port " + hostPort(3).String() + " (priority 0, DISCOVERING) may become master"},
		{name: "MASTER of nothing during the look", during: true, protected: true, state: master,
			want: store.StatusCompleted},
		{name: "traps during every look, unprotected ports", during: true, every: true,
			want: store.StatusRunning, says: "OpenSM kept logging another subnet manager"},
		{name: "traps during every look, protected ports", during: true, every: true, protected: true,
			want: store.StatusCompleted},
		{name: "DISCOVERING before the jobs complete, unprotected ports", state: discovering,
			want: store.StatusRunning, says: "OpenSM logged another subnet manager after the look",
			after: store.StatusRunning, afterSays: "Second subnet manager: port " + hostPort(3).String()},
		// Under M_Key protection an SM with another SM_Key programs
		// nothing: a tenant opening its SM device holds no job.
		{name: "MASTER of nothing before the jobs complete", protected: true, state: master,
			want: store.StatusCompleted},
		// One with this OpenSM's SM_Key that outranks it is handed the
		// subnet: this OpenSM logs its STANDBY entry, protection or not.
		{name: "this OpenSM deposed before the jobs complete", protected: true, state: master, deposed: true,
			want: store.StatusRunning, says: `OpenSM logged another subnet manager after the look before these jobs complete ("Entering STANDBY state")`,
			after: store.StatusRunning, afterSays: "Second subnet manager: port " + hostPort(3).String() + " (priority 0, MASTER) is master"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLookRigOn(t, engine, 40)
			const tenantLID = 2 + 3 // H3's
			if !tc.protected {
				r.smp.unprotect()
			}
			var once sync.Once
			appear := func() {
				once.Do(func() {
					entry := trap144("5")
					r.smp.set(func(p map[uint16]*fakeSMPPort) {
						p[tenantLID].sm = &pkeyread.SMInfo{GUID: hostPort(3), Priority: 0, State: tc.state}
						if tc.deposed {
							p[2+1].sm.State = pkeyread.SMStandby // this OpenSM's port, H1's
							for _, port := range p {
								port.masterLID = tenantLID
							}
						}
					})
					if tc.deposed {
						entry = logLine(0x80, "Entering STANDBY state")
					}
					if err := opensmtest.Append(r.sm.log, entry); err != nil {
						t.Error(err)
					}
				})
			}
			if tc.during {
				r.smp.answered = func(lid, attr uint16) {
					switch {
					case lid != 2+2 || attr != 0x0015: // H2's PortInfo: the look has read it
					case tc.every:
						if err := opensmtest.Append(r.sm.log, trap144("5")); err != nil {
							t.Error(err)
						}
					default:
						appear()
					}
				}
			} else {
				r.term.Store = &finishHook{Store: r.term.Store, before: appear}
			}
			j := r.portIn(r.netID, "port-h2", hostPort(2))
			r.applied("H2's port")
			got := wantStatus(t, r.applyRig, "H2's port", j, tc.want)
			if !strings.Contains(got.Description, tc.says) {
				t.Fatalf("H2's job says %q; want %q", got.Description, tc.says)
			}
			if tc.after == "" {
				return
			}
			r.term.secondSM.detect(t.Context(), r.term.watchEnv()) // the check interval's full look
			r.term.pollGates(t.Context())
			r.applied("H2's port again")
			got = wantStatus(t, r.applyRig, "H2's port after a full look", j, tc.after)
			if !strings.Contains(got.Description, tc.afterSays) {
				t.Fatalf("H2's job says %q after a full look; want %q", got.Description, tc.afterSays)
			}
		})
	}
}
