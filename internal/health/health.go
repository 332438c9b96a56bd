// Package health decides the manager's liveness (/healthz) and readiness
// (/readyz).
//
// Liveness is for a supervisor that restarts what is stuck: the process
// answers, and none of its loops has stopped turning. Readiness is for a load
// balancer and for alerts: the database answers and, on the leader, OpenSM
// runs and the last apply did not fail; on a follower, a live leader exists.
// Each answer carries every reason it is not ok.
package health

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Database is what readiness reads.
type Database interface {
	Revision(ctx context.Context) (int64, error)
	Leadership(ctx context.Context) (store.Leadership, error)
}

// Self is what this process knows of its own role (metrics.Metrics).
type Self interface {
	LeaderTerm() int64 // 0: not the leader
	LastApplyFailed() bool
}

// Supervisor is what runs OpenSM (opensm.Supervisor).
type Supervisor interface {
	Running() bool
}

// SupervisorError is read when the supervisor offers it: its last error, nil when
// none.
type SupervisorError interface {
	LastError() error
}

// LeaderLiveness is read when leadership offers it (a lease): whether a live
// leader holds it, and if not, why. Without it a follower reads the
// leadership row's heartbeat.
type LeaderLiveness interface {
	LiveLeader(ctx context.Context) (bool, string, error)
}

// Report is the JSON body of /healthz and /readyz.
type Report struct {
	Status  string   `json:"status"`         // "ok" or "fail"
	Role    string   `json:"role,omitempty"` // readiness: this process' role on the default fabric
	Reasons []string `json:"reasons"`
	// Fabrics is readiness' verdict on each fabric: "ready", or its reasons
	// joined by "; ".
	Fabrics map[string]string `json:"fabrics,omitempty"`
}

// ReadyVerdict is a ready fabric's verdict in Report.Fabrics.
const ReadyVerdict = "ready"

// OK says whether the report is a success.
func (r Report) OK() bool { return r.Status == "ok" }

func report(role string, reasons []string) Report {
	r := Report{Status: "ok", Role: role, Reasons: reasons}
	if r.Reasons == nil {
		r.Reasons = []string{}
	}
	if len(reasons) > 0 {
		r.Status = "fail"
	}
	return r
}

// Fabric is what one fabric's readiness reads.
type Fabric struct {
	Name   string
	DB     Database // the fabric's store view
	Self   Self     // the fabric's metrics handle
	SM     Supervisor
	Leader LeaderLiveness // nil: the heartbeat decides
}

// Checker answers both questions.
type Checker struct {
	// Fabrics are every fabric readiness judges, the default first, set
	// before the checker is used.
	Fabrics []Fabric
	// HeartbeatTimeout is how old the leader's heartbeat may be before a
	// follower deems it dead.
	HeartbeatTimeout time.Duration
	// Timeout bounds the database reads of one check; 0: 3 s.
	Timeout time.Duration
	// Log is where a reason's error goes (withheld); nil: nowhere.
	Log *slog.Logger

	mu     sync.Mutex
	loops  []*Loop
	now    func() time.Time  // the clock; nil: time.Now (tests set it)
	logged map[string]string // the error last logged for each fabric's reason
}

func (c *Checker) clock() func() time.Time {
	if c.now == nil {
		return time.Now
	}
	return c.now
}

// Loop is one of the process' loops, which calls Beat at every turn while it
// is active.
type Loop struct {
	name  string
	bound time.Duration
	now   func() time.Time
	mu    sync.Mutex
	on    bool
	last  time.Time
}

// Loop registers a loop that is wedged when, while active, it has not beaten
// for bound.
func (c *Checker) Loop(name string, bound time.Duration) *Loop {
	l := &Loop{name: name, bound: bound, now: c.clock()}
	c.mu.Lock()
	c.loops = append(c.loops, l)
	c.mu.Unlock()
	return l
}

// Active starts or stops watching the loop (a term begins or ends).
func (l *Loop) Active(on bool) {
	l.mu.Lock()
	l.on, l.last = on, l.now()
	l.mu.Unlock()
}

// Beat says the loop turned.
func (l *Loop) Beat() {
	l.mu.Lock()
	l.last = l.now()
	l.mu.Unlock()
}

func (l *Loop) wedged(now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	since := now.Sub(l.last)
	return since, l.on && since > l.bound
}

// Live is liveness: every active loop has turned within its bound. It reads
// nothing outside the process: a database outage is not a reason to restart.
func (c *Checker) Live() Report {
	now := c.clock()()
	var reasons []string
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.loops {
		if since, wedged := l.wedged(now); wedged {
			reasons = append(reasons, fmt.Sprintf("the %s loop has not turned for %s (bound %s)",
				l.name, since.Round(time.Second), l.bound))
		}
	}
	return report("", reasons)
}

// Ready is readiness of every fabric; see the package comment. The first
// fabric's (the default's) reasons and role are given as they are, another
// fabric's reasons after its name: with one fabric the answer is what it
// was before there were several.
func (c *Checker) Ready(ctx context.Context) Report {
	verdicts := c.judge(ctx, c.Fabrics)
	each := map[string]string{}
	var role string
	var reasons []string
	for i, f := range c.Fabrics {
		v := verdicts[i]
		each[f.Name] = v.summary()
		if i == 0 {
			role = v.role
			reasons = append(reasons, v.reasons...)
			continue
		}
		for _, why := range v.reasons {
			reasons = append(reasons, "fabric "+f.Name+": "+why)
		}
	}
	r := report(role, reasons)
	r.Fabrics = each
	return r
}

// FabricReady is the readiness of fabric name alone (its afm_ready).
func (c *Checker) FabricReady(ctx context.Context, name string) Report {
	for _, f := range c.Fabrics {
		if f.Name == name {
			v := c.judge(ctx, []Fabric{f})[0]
			out := report(v.role, v.reasons)
			out.Fabrics = map[string]string{name: v.summary()}
			return out
		}
	}
	return report("", []string{"no fabric named " + name})
}

// verdict is one fabric's readiness.
type verdict struct {
	role    string
	reasons []string
}

func (v verdict) summary() string {
	if len(v.reasons) == 0 {
		return ReadyVerdict
	}
	return strings.Join(v.reasons, "; ")
}

// judge reads every fabric at once, within one timeout: a fabric whose
// database reads hang does not make the others' answer late.
func (c *Checker) judge(ctx context.Context, fabrics []Fabric) []verdict {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	verdicts := make([]verdict, len(fabrics))
	var wg sync.WaitGroup
	for i, f := range fabrics {
		wg.Go(func() { verdicts[i] = c.fabricReady(ctx, f) })
	}
	wg.Wait()
	return verdicts
}

// fabricReady is one fabric's readiness: its store view answers and, where
// this process leads it, its OpenSM runs and its last apply did not fail;
// where it follows, the fabric has a live leader.
func (c *Checker) fabricReady(ctx context.Context, f Fabric) verdict {
	var reasons []string
	if _, err := f.DB.Revision(ctx); err != nil {
		reasons = append(reasons, c.withheld(f.Name, "the database does not answer", err))
	} else {
		c.forget(f.Name, "the database does not answer")
	}
	if f.Self.LeaderTerm() != 0 {
		if !f.SM.Running() {
			reasons = append(reasons, "OpenSM is not running")
		}
		if d, ok := f.SM.(SupervisorError); ok {
			if err := d.LastError(); err != nil {
				reasons = append(reasons, c.withheld(f.Name, "the OpenSM driver's last operation failed", err))
			} else {
				c.forget(f.Name, "the OpenSM driver's last operation failed")
			}
		}
		if f.Self.LastApplyFailed() {
			reasons = append(reasons, "the last apply failed (see --status)")
		}
		return verdict{"leader", reasons}
	}
	if len(reasons) > 0 {
		return verdict{"follower", reasons} // the leader cannot be read either
	}
	if f.Leader != nil {
		live, why, err := f.Leader.LiveLeader(ctx)
		switch {
		case err != nil:
			reasons = append(reasons, c.withheld(f.Name, "the leadership cannot be read", err))
		case !live:
			reasons = append(reasons, "no live leader: "+why)
		}
		return verdict{"follower", reasons}
	}
	l, err := f.DB.Leadership(ctx)
	if err != nil {
		reasons = append(reasons, c.withheld(f.Name, "the leadership cannot be read", err))
	} else if why := LeaderGone(l, time.Now(), c.HeartbeatTimeout); why != "" {
		reasons = append(reasons, why)
	}
	return verdict{"follower", reasons}
}

// forget makes the next error of what be logged, whatever it is: what
// ended (a database restarted), and its next error is news.
func (c *Checker) forget(fabric, what string) {
	c.mu.Lock()
	delete(c.logged, fabric+"\x00"+what)
	c.mu.Unlock()
}

// withheld is the reason what, for /readyz, which answers anyone: a driver's
// error names the database's host, port and user, a Docker engine's its
// socket. The error goes to the log when it differs from the last one
// logged for the reason (a probe asks every few seconds).
func (c *Checker) withheld(fabric, what string, err error) string {
	key, text := fabric+"\x00"+what, err.Error()
	c.mu.Lock()
	fresh := c.logged[key] != text
	if fresh {
		if c.logged == nil {
			c.logged = map[string]string{}
		}
		c.logged[key] = text
	}
	c.mu.Unlock()
	if fresh && c.Log != nil {
		c.Log.Warn("readiness: "+what, "fabric", fabric, "error", err)
	}
	return what + " (the manager's log has the error)"
}

// LeaderGone says why the leadership row shows no live leader at now: none
// ever held the applier lock, or its holder's heartbeat is older than timeout
// (the holder stopped, was killed or hangs); "" while the heartbeat is fresh.
// A follower's readiness and --status judge the row alike. The heartbeat is on
// the holder's clock, now on the reader's.
func LeaderGone(l store.Leadership, now time.Time, timeout time.Duration) string {
	switch {
	case l.Term == 0:
		return "no manager has held the applier lock yet"
	case l.Heartbeat == nil:
		return fmt.Sprintf("the leader of term %d (%s) has written no heartbeat", l.Term, l.Holder)
	case now.Sub(*l.Heartbeat) > timeout:
		return fmt.Sprintf("the leader of term %d (%s) last wrote its heartbeat %s ago (more than %s)",
			l.Term, l.Holder, now.Sub(*l.Heartbeat).Round(time.Second), timeout)
	}
	return ""
}
