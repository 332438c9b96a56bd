package applier

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tick"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// The term's background services: the freeze watch (freeze.go) and the
// second-SM look (secondsm.go) run beside the term's loop, each in a
// goroutine of its own. Each is a service: Start runs it, Stop ends it and
// returns only once its goroutine has, so a term that ends leaves nothing of
// its own running (no look that records a verdict, no watch that pumps the
// log after the term closed it). The audit and the deletion of expired jobs
// run in the loop itself.
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
	cancel context.CancelFunc
	done   chan struct{}
}

// every is a service that calls f every interval, the first time one
// interval after Start.
func every(name string, log *slog.Logger, interval time.Duration, f func(ctx context.Context)) *service {
	return &service{name: name, log: log, run: func(ctx context.Context) {
		tick.Every(ctx, interval, func() bool {
			f(ctx)
			return true
		})
	}}
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

// startServices starts the term's background services and returns what
// stops them all, each waited for, in the reverse order of their start.
func (t *term) startServices(ctx context.Context) (stop func()) {
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
