package applier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestAuditRecord: the record counts every finding but lists a bounded
// number, breaches first, so the ones a gate names survive a restart.
func TestAuditRecord(t *testing.T) {
	var s audit.Summary
	for i := range 250 {
		s.Findings = append(s.Findings, audit.Finding{Kind: audit.MissingPKey, Port: fabric.GUID(i + 1), PKey: 0x65})
	}
	for i := range 50 {
		s.Findings = append(s.Findings, audit.Finding{Kind: audit.ForeignPKey, Port: fabric.GUID(1000 + i), PKey: 0x66})
	}
	rec := AuditRecord(7, s)
	if rec.Term != 7 || rec.Findings != 300 || rec.Breaches != 50 {
		t.Errorf("record %+v, want term 7, 300 findings, 50 breaches", rec)
	}
	var back audit.Summary
	if err := json.Unmarshal(rec.Summary, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Findings) != maxRecordedFindings || len(back.Breaches()) != 50 || back.Findings[0].Port != 1000 {
		t.Errorf("recorded %d findings, %d breaches, first %v; want %d, 50, port 1000 first",
			len(back.Findings), len(back.Breaches()), back.Findings[0], maxRecordedFindings)
	}
}

// silentFabric is a fabric whose SMPs never answer: Dial waits for its
// context to end, having said on dialing that a read began.
type silentFabric struct {
	dialing chan struct{}
	once    sync.Once
	mu      sync.Mutex
	ends    []error // why each Dial ended
}

func (f *silentFabric) Dial(ctx context.Context) (pkeyread.Conn, error) {
	f.once.Do(func() { close(f.dialing) })
	<-ctx.Done()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends = append(f.ends, ctx.Err())
	return nil, ctx.Err()
}

// cancelled says whether every read ended cancelled, none at its own
// timeout.
func (f *silentFabric) cancelled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, err := range f.ends {
		if !errors.Is(err, context.Canceled) {
			return false
		}
	}
	return len(f.ends) > 0
}

// auditTurn runs one audit of a's in the term's idle turn, as the audit
// service does, and gives the term what it asked; it returns when the next
// audit is due.
func auditTurn(ctx context.Context, r *applyRig, a *auditor, wake <-chan struct{}) (next time.Duration) {
	tv := r.term.turnView(wake)
	next = a.runAudit(ctx, tv, func() {})
	r.term.takeTurn(tv)
	return next
}

// auditUntilDialed runs an audit of a's in the background until its read
// began; ended receives when the next audit is due once the audit returns.
func auditUntilDialed(ctx context.Context, t *testing.T, r *applyRig, a *auditor, wake <-chan struct{}, interval time.Duration) (f *silentFabric, ended chan time.Duration) {
	t.Helper()
	f = &silentFabric{dialing: make(chan struct{})}
	r.term.Cfg.Audit = AuditConfig{Interval: interval, Reader: &pkeyread.Reader{Dialer: f}}
	ended = make(chan time.Duration, 1)
	go func() {
		ended <- auditTurn(ctx, r, a, wake)
	}()
	select {
	case <-f.dialing:
	case <-ended:
		t.Fatal("the audit read nothing")
	}
	return f, ended
}

// A change that arrives while the audit reads the whole fabric does not wait
// for that read: the read ends, the change is applied and its job completes,
// and the audit reads again a moment later. An audit that has given way for
// an interval already reads to the end, changes or not: a fabric that never
// stops changing is still audited.
func TestAuditGivesWayToAChange(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	r.network(101)
	r.applied("the network")
	wake := make(chan struct{}, 1)
	a := r.term.newAuditor(r.term.newDriftRepair())
	f, ended := auditUntilDialed(t.Context(), t, r, a, wake, time.Hour)
	job := r.port("p1", 0x0002c90300000101)
	wake <- struct{}{}
	next := <-ended
	if !f.cancelled() || r.term.audit.last != nil {
		t.Fatalf("the audit's reads ended by %v, recording %+v; want every one cancelled by the change, nothing recorded",
			f.ends, r.term.audit.last)
	}
	if next > time.Minute {
		t.Fatalf("the audit that gave way is due again in %s, not within a minute (interval %s)", next, r.term.Cfg.Audit.Interval)
	}
	r.applied("the change")
	if j := r.job(job.ID); j.Status != store.StatusCompleted {
		t.Fatalf("the change's job after its apply: %+v, want Completed", j)
	}

	a.yieldedSince = time.Now().Add(-2 * time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	_, ended = auditUntilDialed(ctx, t, r, a, wake, time.Hour)
	r.port("p2", 0x0002c90300000201)
	wake <- struct{}{}
	select {
	case <-ended:
		t.Fatal("an audit that gave way for more than its interval gave way again")
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	<-ended
}

// An audit that gave way reads again after auditYieldRetry, or after its
// interval when that is shorter: it is never put off past its interval.
func TestAuditGivesWayWithinItsInterval(t *testing.T) {
	for _, interval := range []time.Duration{time.Hour, 200 * time.Millisecond} {
		t.Run(interval.String(), func(t *testing.T) {
			r := newApplyRig(t, true, func() string { return heavySweep("") })
			var logged bytes.Buffer
			r.term.Log = slog.New(slog.NewJSONHandler(&logged, nil))
			r.network(101)
			r.applied("the network")
			wake := make(chan struct{}, 1)
			a := r.term.newAuditor(r.term.newDriftRepair())
			_, ended := auditUntilDialed(t.Context(), t, r, a, wake, interval)
			r.port("p1", 0x0002c90300000101)
			wake <- struct{}{}
			<-ended
			want := fmt.Sprintf(`"retry_in":%d`, min(interval, auditYieldRetry))
			if !strings.Contains(logged.String(), want) {
				t.Errorf("the audit gave way saying %s; want %s", logged.String(), want)
			}
		})
	}
}

// A partitions file edited by hand since the term wrote it is drift: the
// audit names it as the drift repair does (a hand edit made OpenSM sweep),
// the term applies the recorded state again, and the audit, which still
// reads what OpenSM swept, reads again soon after that apply rather than an
// interval later: what it found holds jobs only until then.
func TestAuditNamesAnEditedFileAsDrift(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	var logged bytes.Buffer
	r.term.Log = slog.New(slog.NewJSONHandler(&logged, nil))
	r.network(101)
	r.applied("the network")
	if err := os.WriteFile(r.term.Cfg.PartitionsFile, []byte("Default=0x7fff, ipoib : ALL=full ;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &silentFabric{dialing: make(chan struct{})}
	r.term.Cfg.Audit = AuditConfig{Interval: time.Hour, Reader: &pkeyread.Reader{Dialer: f}}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	next := auditTurn(ctx, r, r.term.newAuditor(r.term.newDriftRepair()), make(chan struct{}))
	if r.term.applied != -1 || !strings.Contains(logged.String(), "partitions file drifted") {
		t.Fatalf("after the audit met an edited file: applied %d, log %s; want the drift named and repaired (applied -1)",
			r.term.applied, logged.String())
	}
	if next > time.Minute {
		t.Fatalf("the audit is due again %s after the drift's repair, not within a minute (interval 1h)", next)
	}
}

// A change that arrives while the audit reads does not wait for that read
// to drain: the turn goes back to the loop as the read is cut short, and
// the change is applied while the audit's SMP under way (one the fake
// holds, as the simulator answers a cancelled read's SMPs in its own time)
// has not returned; the read that gave way records nothing once it has.
func TestAuditGivesTheTurnBackBeforeItsReadDrains(t *testing.T) {
	r := newApplyRig(t, true, func() string { return heavySweep("") })
	r.network(101)
	r.applied("the network")
	f := newFakeSMPFabric()
	f.held, f.holding = make(chan struct{}), make(chan struct{}, 1)
	released := sync.OnceFunc(func() { close(f.held) })
	r.term.Cfg.Audit = AuditConfig{Interval: time.Hour, Reader: &pkeyread.Reader{Dialer: f}, Recorder: r.st}
	a := r.term.newAuditor(r.term.newDriftRepair())
	ctx, cancel := context.WithCancel(t.Context())
	audited := make(chan struct{})
	go func() {
		defer close(audited)
		a.run(ctx)
	}()
	defer func() {
		released()
		cancel()
		<-audited
	}()
	desk, _ := r.term.turns.desks()
	wake := make(chan struct{}, 1)
	back := make(chan struct{})
	req := <-desk
	go func() {
		defer close(back)
		r.term.lendTurn(ctx, req, wake)
	}()
	<-f.holding // the audit's read has an SMP under way
	job := r.port("p1", 0x0002c90300000101)
	wake <- struct{}{}
	select {
	case <-back:
	case <-time.After(30 * time.Second):
		t.Fatal("the loop's turn did not come back while the audit's read drained")
	}
	r.applied("the change")
	if n := f.heldOver.Load(); n != 0 {
		t.Fatalf("%d of the audit's SMPs returned before the change's apply ended; want it applied while they drain", n)
	}
	if j := r.job(job.ID); j.Status != store.StatusCompleted {
		t.Fatalf("the change's job: %+v, want Completed", j)
	}
	released()
	cancel()
	<-audited
	if f.heldOver.Load() == 0 {
		t.Fatal("the audit's read returned without its SMP")
	}
	if _, ok, err := r.st.LastAudit(t.Context()); err != nil || ok || r.term.audit.last != nil {
		t.Fatalf("a read that gave way recorded an audit (%v, %v) or gave the term one (%+v); want none",
			ok, err, r.term.audit.last)
	}
}

// revisionReads counts the reads of the revision.
type revisionReads struct {
	Store
	n atomic.Int64
}

func (s *revisionReads) Revision(ctx context.Context) (int64, error) {
	s.n.Add(1)
	return s.Store.Revision(ctx)
}

// The audit gives way on a wake-up that comes during its read without
// reading the revision (a round trip on the change's path: the loop reads
// it once it has its turn back), and reads to the end past a wake-up from
// before its read, after reading that the revision did not move: the
// term's own commit (a job completed) wakes the loop too.
func TestAuditWakeUps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  bool // the wake-up is pending when the read begins, no change made
		yielded bool
	}{
		{name: "a change during the read", yielded: true},
		{name: "a wake-up from before the read", before: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newApplyRig(t, true, func() string { return heavySweep("") })
			r.network(101)
			r.applied("the network")
			f := newFakeSMPFabric()
			f.held, f.holding = make(chan struct{}), make(chan struct{}, 1)
			r.term.Cfg.Audit = AuditConfig{Interval: time.Hour, Reader: &pkeyread.Reader{Dialer: f}, Recorder: r.st}
			a := r.term.newAuditor(r.term.newDriftRepair())
			reads := &revisionReads{Store: a.store}
			a.store = reads
			wake := make(chan struct{}, 1)
			if tc.before {
				wake <- struct{}{}
			}
			tv := r.term.turnView(wake)
			gaveBack := make(chan struct{})
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				a.runAudit(t.Context(), tv, sync.OnceFunc(func() { close(gaveBack) }))
			}()
			<-f.holding
			if !tc.before {
				r.port("p1", 0x0002c90300000101)
				wake <- struct{}{}
				<-gaveBack
				if n := reads.n.Load(); n != 0 {
					t.Errorf("the audit read the revision %d times before giving way; want none", n)
				}
			}
			close(f.held)
			<-ended
			r.term.takeTurn(tv)
			if yielded := r.term.audit.last == nil; yielded != tc.yielded {
				t.Fatalf("the audit gave way: %v (recorded %+v); want %v", yielded, r.term.audit.last, tc.yielded)
			}
			if tc.before && reads.n.Load() == 0 {
				t.Error("the audit read past a wake-up from before its read without reading the revision")
			}
		})
	}
}
