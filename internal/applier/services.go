package applier

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tick"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// The term's background services: the freeze watch (freeze.go) and the
// second-SM look (secondsm.go) run beside the term's loop, each in a
// goroutine of its own. Each is a service: Start runs it, Stop ends it and
// returns only once its goroutine has, so a term that ends leaves nothing of
// its own running (no look that records a verdict, no watch that pumps the
// log after the term closed it, no audit that reads on after the lease was
// lost). The drift repair (drift.go), the audit (audit.go) and the retention
// (retention.go) are services too; the first two borrow the loop's idle
// turn for their work (borrowTurn, below).
//
// A service never holds the term: it sees it as a watchEnv (what it reads,
// fixed for the term's life) and reports what it finds through findings,
// which the loop takes at its next turn.

// findings is how a background service reports to its term.
type findings interface {
	// forgetLater asks the term to apply everything again (forget); the
	// loop takes it at its next turn, and the sweep it is judging, if any,
	// completes nothing.
	forgetLater(why string)
	// describeHeld tells every open job why it waits, in the words of the
	// whole verdict (every reason that holds it, not the service's alone).
	describeHeld(ctx context.Context)
}

// jobMarker is what a service may write of the jobs themselves: the
// second-SM look marks the jobs sent while no apply runs Running, so that
// they say, like the others, that the manager has them.
type jobMarker interface {
	Revision(ctx context.Context) (int64, error)
	MarkJobsRunning(ctx context.Context, term, revision int64) (int64, error)
}

// watchEnv is the term as its background services see it.
type watchEnv struct {
	Log      *slog.Logger
	Cfg      *Config
	id       int64
	dump     *topology.Dump // the term's reader of OpenSM's subnet dump
	smEvents *smEventLog    // the term's count of OpenSM's entries naming another SM
	Store    jobMarker
	report   findings
}

// subnetDump is the term's reader of OpenSM's subnet dump.
func (e *watchEnv) subnetDump() *topology.Dump { return e.dump }

// watchEnv is the term's view for its services, built once: the services'
// goroutines and the loop ask for it concurrently.
func (t *term) watchEnv() *watchEnv {
	t.envOnce.Do(func() {
		t.env = &watchEnv{Log: t.Log, Cfg: &t.Cfg, id: t.id, dump: t.subnetDump(), smEvents: &t.smEvents,
			Store: t.Store, report: t}
	})
	return t.env
}

// subnetDump is the reader of OpenSM's subnet dump: Cfg.Dump, or the term's
// own, chosen once (the second-SM look reads it beside the loop).
func (t *term) subnetDump() *topology.Dump {
	t.dumpOnce.Do(func() {
		if t.dump == nil {
			t.dump = t.Cfg.Dump
		}
		if t.dump == nil {
			t.dump = topology.NewDump(t.Cfg.SubnetDump)
		}
	})
	return t.dump
}

// service runs one background task of the term in a goroutine of its own.
type service struct {
	name   string
	log    *slog.Logger
	run    func(ctx context.Context) // returns once ctx ends
	first  bool                      // every: f runs at Start too
	cancel context.CancelFunc
	done   chan struct{}
}

// every is a service that calls f every interval, the first time one
// interval after Start (at Start, when first is set before it).
func every(name string, log *slog.Logger, interval time.Duration, f func(ctx context.Context)) *service {
	s := &service{name: name, log: log}
	s.run = func(ctx context.Context) {
		if s.first {
			f(ctx)
		}
		tick.Every(ctx, interval, func() bool {
			f(ctx)
			return true
		})
	}
	return s
}

// Start runs the service until ctx ends or Stop.
func (s *service) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.run(ctx)
	}()
}

// Stop ends the service and returns once its goroutine has ended: a look
// under way ends with its context. Stop of a service never started does
// nothing.
func (s *service) Stop() {
	if s == nil || s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
	s.log.Debug("service stopped", "service", s.name)
}

// startServices starts the term's background services, d the term's drift
// repair, and returns what stops them all, each waited for, in the reverse
// order of their start.
func (t *term) startServices(ctx context.Context, d *driftRepair) (stop func()) {
	var started []*service
	if t.freeze != nil {
		w, env := t.freeze, t.watchEnv()
		started = append(started, every("freeze watch", t.Log, t.Cfg.PollInterval, func(ctx context.Context) {
			w.detect(ctx, env)
		}))
	}
	if t.secondSM != nil {
		w, env := t.secondSM, t.watchEnv()
		started = append(started, every("second-SM look", t.Log, t.Cfg.CheckInterval, func(ctx context.Context) {
			w.detect(ctx, env)
		}))
	}
	// The drift repair, the audit (which runs the drift repair on a
	// hand-edited file: they share it, each in its turn) and the retention.
	started = append(started, t.driftService(d))
	for _, s := range []*service{t.auditService(d), t.retentionService()} {
		if s != nil {
			started = append(started, s)
		}
	}
	for _, s := range started {
		s.Start(ctx)
	}
	return func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].Stop()
		}
	}
}

// inbox keeps what the services asked of the term until its loop takes it;
// its zero value is empty.
type inbox struct {
	mu      sync.Mutex
	forgets []string
}

// forgetLater is findings' (services.go).
func (t *term) forgetLater(why string) {
	t.inbox.mu.Lock()
	t.inbox.forgets = append(t.inbox.forgets, why)
	t.inbox.mu.Unlock()
}

// takeReports takes what the services reported since the last turn: each
// forget asked for is the term's transition now (state.go).
func (t *term) takeReports() {
	t.inbox.mu.Lock()
	whys := t.inbox.forgets
	t.inbox.forgets = nil
	t.inbox.mu.Unlock()
	for _, why := range whys {
		t.forget(why)
	}
}

// describeHeld is findings': every open job, up to the newest, says why it
// waits in the words of the whole verdict, as finish's holdJobs says it:
// the rows as recorded, the subnet dump, the last audit, the second SM and
// the freeze. It runs beside the loop: it reads the database, and the
// term's own evidence under the locks of its owners. A verdict that cannot
// be read leaves the descriptions as they are, until the next look.
func (t *term) describeHeld(ctx context.Context) {
	ev, err := Gates{Store: t.Store, SubnetDump: t.Cfg.SubnetDump, Dump: t.subnetDump()}.Evidence(ctx)
	if err != nil {
		if ctx.Err() == nil {
			t.Log.Error("read the verdict's evidence to describe the held jobs", "error", err)
		}
		return
	}
	ev.Audit = t.auditEvidence()
	ev.SecondSM = t.secondSM.evidence()
	ev.Freeze = t.freeze.reason()
	v := verdict.Judge(ev)
	if v.Open() {
		return
	}
	said := "Not completing: " + strings.Join(GateTexts(v.Reasons), "; ")
	if _, err := t.Store.DescribeOpenJobs(ctx, t.id, math.MaxInt64, said); err != nil && ctx.Err() == nil {
		t.Log.Error("describe the held jobs", "error", err)
	}
}

// auditEvidence is the last audit as the term holds it, for a service.
func (t *term) auditEvidence() *verdict.Audit {
	t.audit.mu.Lock()
	defer t.audit.mu.Unlock()
	return t.audit.last
}

// The drift repair and the audit read what the last apply left (the file it
// wrote, the revision OpenSM swept) and must not read while an apply is
// under way: each runs in a goroutine of its own, and for its work borrows
// the loop's idle turn (borrowTurn): the loop lends it at its idle wait,
// hands the service what it reads of the term (idleTurn) and waits until
// the service gives it back, then takes what the service asked (forgets, a
// full read, the audit's verdict) through the transitions of state.go. So
// no apply starts while they read, as when they ran in the loop, and they
// never write the term's fields.

// idleTurn is the loop's idle turn lent to one service: what the service
// reads of the term, fixed while the loop waits, and what it asks of it.
type idleTurn struct {
	written   []byte            // what the term last wrote to the partitions file
	qos       []byte            // what the term last wrote to the QoS policy file; nil: none
	applied   int64             // the revision OpenSM was last seen applying; -1: none
	owners    map[uint16]string // the networks of the last apply's file (Owners)
	notMaster bool              // frozen, or held for a second SM: no change is applied
	wake      <-chan struct{}   // the loop's wake-ups, which the audit watches for a change

	forgets []string       // "apply everything again", in order (forget)
	readAll bool           // the next apply reads every row, not what changed
	audit   *verdict.Audit // the audit's record, the gates' evidence from now on; nil: none
}

// forget asks the term to apply everything again; the rest of the turn sees
// the term as it will be (nothing applied).
func (tv *idleTurn) forget(why string) {
	tv.forgets = append(tv.forgets, why)
	tv.applied = -1
}

// turnRequest is a service's request for the loop's idle turn: the loop
// sends the turn on lent and waits for it on back (both buffered).
type turnRequest struct {
	lent, back chan *idleTurn
}

// turnDesk is where the services ask for the loop's idle turn: the drift
// repair also in an apply's back-off (as its check ran there), the audit
// only when the loop is idle.
type turnDesk struct {
	once         sync.Once
	audit, drift chan turnRequest
}

func (d *turnDesk) desks() (audit, drift chan turnRequest) {
	d.once.Do(func() { d.audit, d.drift = make(chan turnRequest), make(chan turnRequest) })
	return d.audit, d.drift
}

// borrowTurn waits for the loop's idle turn on desk; giveBack returns it
// with what the service asked. ok is false when ctx ended first.
func borrowTurn(ctx context.Context, desk chan<- turnRequest) (tv *idleTurn, giveBack func(), ok bool) {
	req := turnRequest{lent: make(chan *idleTurn, 1), back: make(chan *idleTurn, 1)}
	select {
	case desk <- req:
	case <-ctx.Done():
		return nil, nil, false
	}
	// The loop sends the turn as soon as it took the request.
	tv = <-req.lent
	giveBack = func() { req.back <- tv }
	if ctx.Err() != nil {
		giveBack() // the service is stopping: nothing asked
		return nil, nil, false
	}
	return tv, giveBack, true
}

// lendTurn lends the loop's idle turn to the service that asked (req), and
// takes what it asked once it gives the turn back; wake is the loop's
// wake-ups (nil: the loop is in a back-off, not waiting for changes).
func (t *term) lendTurn(ctx context.Context, req turnRequest, wake <-chan struct{}) {
	req.lent <- t.turnView(wake)
	select {
	case tv := <-req.back:
		t.takeTurn(tv)
	case <-ctx.Done():
		// The term is over; the service ends with it and writes nothing.
	}
}

// turnView is the term as a service reads it in the loop's idle turn.
func (t *term) turnView(wake <-chan struct{}) *idleTurn {
	return &idleTurn{written: t.written, qos: t.writtenQoS, applied: t.applied, owners: Owners(t.rendered), notMaster: t.notMaster(),
		wake: wake}
}

// takeTurn takes what a service asked in its turn, in the order it asked:
// its forgets, then the audit's verdict (state.go).
func (t *term) takeTurn(tv *idleTurn) {
	for _, why := range tv.forgets {
		t.forget(why)
	}
	if tv.readAll {
		t.snapshots = store.SnapshotCache{}
	}
	if tv.audit != nil {
		t.setAudit(tv.audit)
	}
}
