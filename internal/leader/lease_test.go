package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// manager is one manager's OpenSM for these tests: the real supervisor
// (opensm.Supervisor) supervising a stand-in OpenSM, a real child process whose
// life is read from the kernel, not from the supervisor.
type manager struct {
	name string
	sm   *opensmtest.StandIn
	proc *opensm.Supervisor
}

func newManager(t *testing.T, name string) *manager {
	sm := opensmtest.NewStandIn(t)
	p := opensm.NewProcess(opensm.ProcessConfig{Command: sm.Command, LogFile: sm.LogFile,
		Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return &manager{name: name, sm: sm, proc: p}
}

// Two managers with the lease on one database: one leads at a time; the
// leader that stops stops its OpenSM before it releases the lease, and the
// other takes over at once (well before the lease would have expired), with
// a newer term and the first named as the previous, released, holder. No
// leader's term starts while the other's OpenSM runs.
func TestLeaseOneLeaderAndReleaseAfterStop(t *testing.T) {
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // each engine on a database of its own
			stores := storetest.OpenManagers(t, engine, 2)
			managers := map[string]*manager{"A": newManager(t, "A"), "B": newManager(t, "B")}
			var leading atomic.Int32
			var mu sync.Mutex
			var events []string
			note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
			terms := make(chan Term, 4)
			elector := func(s *store.Store, m *manager) *LeaseElector {
				leases, err := s.Leases()
				if err != nil {
					t.Fatal(err)
				}
				return &LeaseElector{Leases: leases, TryLock: s.TryLock, Holder: m.name, Log: slog.New(slog.DiscardHandler),
					LeaseTimeout: 5 * time.Second, Stop: func(ctx context.Context, term int64) error {
						err := m.proc.StopTerm(ctx, term)
						if running := m.sm.Running(t); err == nil && len(running) > 0 {
							t.Errorf("%s: Stop returned while its OpenSM %v runs", m.name, running)
						}
						note(m.name + " stopped OpenSM")
						return err
					}}
			}
			lead := func(m *manager) func(ctx context.Context, term Term) error {
				return func(ctx context.Context, term Term) error {
					if n := leading.Add(1); n != 1 {
						t.Errorf("%d leaders at once", n)
					}
					for _, other := range managers {
						if running := other.sm.Running(t); other != m && len(running) > 0 {
							t.Errorf("%s leads while %s's OpenSM %v runs", m.name, other.name, running)
						}
					}
					note(m.name + " leads")
					if err := m.proc.Start(term.ID); err != nil {
						t.Errorf("%s: start OpenSM: %v", m.name, err)
					}
					terms <- term
					<-ctx.Done()
					leading.Add(-1)
					return nil
				}
			}
			ctxA, stopA := context.WithCancel(context.Background())
			ctxB, stopB := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); elector(stores[0], managers["A"]).Run(ctxA, lead(managers["A"])) }()
			first := waitTerm(t, terms)
			wg.Add(1)
			go func() { defer wg.Done(); elector(stores[1], managers["B"]).Run(ctxB, lead(managers["B"])) }()
			select {
			case term := <-terms:
				t.Fatalf("a second term %d started while the first leader holds the lease", term.ID)
			case <-time.After(time.Second):
			}
			stopA()
			second := waitTerm(t, terms)
			if second.ID <= first.ID || second.Taken.PreviousHolder != "A" || second.Taken.PreviousExpired {
				t.Errorf("takeover = %+v; want a newer term than %d, after A released it", second, first.ID)
			}
			stopB()
			wg.Wait()
			for _, m := range managers {
				if running := m.sm.Running(t); len(running) > 0 {
					t.Errorf("%s's OpenSM %v runs after its elector returned", m.name, running)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string{"A leads", "A stopped OpenSM", "B leads", "B stopped OpenSM"}
			if len(events) != len(want) {
				t.Fatalf("events %q; want %q", events, want)
			}
			for i := range want {
				if events[i] != want[i] {
					t.Fatalf("events %q; want %q", events, want)
				}
			}
		})
	}
}

// cutLeases is the lease tables of a database that stops answering renewals
// (a cut link) once cut is closed, and that checks, when the lease is
// released, that no OpenSM of this manager runs: the release lets another
// manager's OpenSM on the fabric at once.
type cutLeases struct {
	store.LeaseTables
	t        *testing.T
	sm       *opensmtest.StandIn
	cut      chan struct{}
	released atomic.Bool
}

func (c *cutLeases) RenewLease(ctx context.Context, term int64, ttl time.Duration) (bool, error) {
	select {
	case <-c.cut:
		return false, errors.New("the database does not answer")
	default:
		return c.LeaseTables.RenewLease(ctx, term, ttl)
	}
}

func (c *cutLeases) ReleaseLease(ctx context.Context, term int64) (bool, error) {
	if running := c.sm.Running(c.t); len(running) > 0 {
		c.t.Errorf("the lease of term %d is released while this manager's OpenSM %v runs", term, running)
	}
	c.released.Store(true)
	return c.LeaseTables.ReleaseLease(ctx, term)
}

// A leader cut from its database gives up the lease after half its timeout and
// stops OpenSM at once, while the term's work is still running. That work then
// reaches a Start of OpenSM (the applier's start after its first database
// reads, or a drift repair racing the cancelled context): the stop must hold.
// OpenSM must not run when the term ends, and the lease must not be released
// while it could.
func TestLeaseStopHoldsAgainstTheTermsLateStart(t *testing.T) {
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // each engine on a database of its own
			s := storetest.OpenManagers(t, engine, 1)[0]
			leases, err := s.Leases()
			if err != nil {
				t.Fatal(err)
			}
			m := newManager(t, "A")
			cut := &cutLeases{LeaseTables: leases, t: t, sm: m.sm, cut: make(chan struct{})}
			e := &LeaseElector{Leases: cut, Holder: "A", Log: slog.New(slog.DiscardHandler),
				LeaseTimeout: 2 * time.Second, Stop: m.proc.StopTerm}
			var lateStart error
			lead := func(ctx context.Context, term Term) error {
				if err := m.proc.Start(term.ID); err != nil {
					t.Errorf("start OpenSM: %v", err)
				}
				if err := m.proc.WaitReady(ctx); err != nil {
					t.Errorf("OpenSM not ready: %v", err)
				}
				close(cut.cut)
				<-ctx.Done()
				// The renewal stops OpenSM right after it cancels ctx: wait
				// until it has, as a term blocked on the database would.
				waitUntil(t, "the renewal to stop OpenSM", func() bool { return len(m.sm.Running(t)) == 0 })
				if lateStart = m.proc.Start(term.ID); lateStart == nil {
					// Started again: let it run before the term ends.
					_ = m.proc.WaitReady(context.WithoutCancel(ctx))
				}
				return nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = e.termOnce(ctx, lead)
			if err == nil {
				t.Error("the term ended without an error; want the lease not renewed in time")
			}
			if !errors.Is(lateStart, opensm.ErrTermStopped) {
				t.Errorf("the term's Start after its stop = %v, want opensm.ErrTermStopped", lateStart)
			}
			if running := m.sm.Running(t); len(running) > 0 {
				t.Errorf("OpenSM %v outlives its term", running)
			}
			if !cut.released.Load() {
				t.Error("the lease was not released though OpenSM is stopped")
			}
		})
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, 30*time.Second, cond)
}

// takeTimes is lease tables that note when this manager's take of the lease
// returned.
type takeTimes struct {
	store.LeaseTables
	tookAt atomic.Pointer[time.Time]
}

func (l *takeTimes) TakeLease(ctx context.Context, holder string, ttl time.Duration) (store.Lease, bool, error) {
	lease, won, err := l.LeaseTables.TakeLease(ctx, holder, ttl)
	now := time.Now()
	l.tookAt.Store(&now)
	return lease, won, err
}

// leasesAfterPrevious opens one manager's lease tables on engine, where a
// previous holder took the lease for 200 ms, then let it expire (expired) or
// released it.
func leasesAfterPrevious(t *testing.T, ctx context.Context, engine string, expired bool) store.LeaseTables {
	t.Helper()
	leases, err := storetest.OpenManagers(t, engine, 1)[0].Leases()
	if err != nil {
		t.Fatal(err)
	}
	before, won, err := leases.TakeLease(ctx, "previous", 200*time.Millisecond)
	if err != nil || !won {
		t.Fatalf("the previous holder's take = %v, %v", won, err)
	}
	if !expired {
		if ok, err := leases.ReleaseLease(ctx, before.Term); err != nil || !ok {
			t.Fatalf("release = %v, %v", ok, err)
		}
		return leases
	}
	waitUntil(t, "the previous lease to expire", func() bool {
		l, err := leases.ReadLease(ctx)
		return err == nil && !l.Held()
	})
	return leases
}

// A manager that takes a lease that expired instead of being released leads
// only half the lease timeout after its take, renewing it meanwhile: the
// previous leader (whoever the row names, after a restore put an old row
// back) may still run its OpenSM until then. A lease that was released is led
// at once.
func TestLeaseTakenAfterExpiryLeadsOnlyOnceThePreviousLeaderGaveUp(t *testing.T) {
	const timeout = 4 * time.Second
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		for _, tc := range []struct {
			name    string
			expired bool
		}{{"expired", true}, {"released", false}} {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				t.Parallel() // each case on a database of its own
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				leases := leasesAfterPrevious(t, ctx, engine, tc.expired)
				times := &takeTimes{LeaseTables: leases}
				e := &LeaseElector{Leases: times, Holder: "A", Log: slog.New(slog.DiscardHandler),
					LeaseTimeout: timeout, Stop: func(context.Context, int64) error { return nil }}
				var led time.Time
				var taken, atLead store.Lease
				err := e.termOnce(ctx, func(ctx context.Context, term Term) error {
					led, taken = time.Now(), term.Taken
					if term.Taken.PreviousExpired != tc.expired {
						t.Errorf("took a lease with PreviousExpired %v; want %v", term.Taken.PreviousExpired, tc.expired)
					}
					var err error
					if atLead, err = leases.ReadLease(ctx); err != nil {
						t.Errorf("read the lease: %v", err)
					}
					return nil
				})
				if err != nil || led.IsZero() {
					t.Fatalf("the term = %v, led %v; want it led", err, !led.IsZero())
				}
				waited := led.Sub(*times.tookAt.Load())
				if !tc.expired {
					if waited >= timeout/2 {
						t.Errorf("led %s after taking a released lease; want at once", waited)
					}
					return
				}
				if waited < timeout/2 {
					t.Errorf("led %s after taking an expired lease; want at least %s", waited, timeout/2)
				}
				if atLead.Term != taken.Term || !atLead.Held() || !atLead.Heartbeat.After(*taken.Heartbeat) {
					t.Errorf("the lease when leading = %+v; want term %d held and renewed since its take at %s",
						atLead, taken.Term, taken.Heartbeat)
				}
			})
		}
	}
}

// A term that ends while it waits out an expired lease's previous leader (the
// manager stops, or the lease is lost) never leads, and leaves the lease to
// expire instead of releasing it: the next taker must wait as well, since the
// previous leader may not have given up yet.
func TestLeaseTermEndedDuringTheWaitNeitherLeadsNorReleases(t *testing.T) {
	const timeout = 4 * time.Second
	for _, engine := range []string{config.EnginePostgres, config.EngineMySQL} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // each engine on a database of its own
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			leases := leasesAfterPrevious(t, ctx, engine, true)
			e := &LeaseElector{Leases: leases, Holder: "A", Log: slog.New(slog.DiscardHandler),
				LeaseTimeout: timeout, Stop: func(context.Context, int64) error { return nil }}
			stopping, stop := context.WithTimeout(ctx, timeout/4) // the manager stops during the wait
			defer stop()
			led := false
			_ = e.termOnce(stopping, func(context.Context, Term) error { led = true; return nil })
			if led {
				t.Error("led a term that ended while waiting out the previous leader")
			}
			l, err := leases.ReadLease(ctx)
			if err != nil || l.Holder != "A" || l.ExpiresAt == nil {
				t.Errorf("the lease after the term = %+v, %v; want A's, left to expire, not released", l, err)
			}
		})
	}
}

// lostLeases answers every renewal after lose is closed as a lost lease: the
// row names another term (another manager took it, or a restore put an older
// row back).
type lostLeases struct {
	store.LeaseTables
	lose chan struct{}
}

func (l *lostLeases) RenewLease(ctx context.Context, term int64, ttl time.Duration) (bool, error) {
	select {
	case <-l.lose:
		return false, nil
	default:
	}
	return l.LeaseTables.RenewLease(ctx, term, ttl)
}

// A leader whose lease is lost gives its OpenSM no grace period: another
// manager may lead already, so the renewal's Stop has a deadline already
// past, at which the supervisor kills an OpenSM that did not exit at once (a
// stopped or hung one, opensm.TestSupervisorKillsAtOnceWhenTheStopsTimeIsUp).
// A lease not renewed in time gives it until the lease can expire.
func TestLeaseLostStopsOpenSMWithoutGrace(t *testing.T) {
	s := storetest.OpenManagers(t, config.EnginePostgres, 1)[0]
	leases, err := s.Leases()
	if err != nil {
		t.Fatal(err)
	}
	lost := &lostLeases{LeaseTables: leases, lose: make(chan struct{})}
	type stopCall struct {
		at, deadline time.Time
		ok           bool
	}
	var mu sync.Mutex
	var first *stopCall
	e := &LeaseElector{Leases: lost, Holder: "A", Log: slog.New(slog.DiscardHandler), LeaseTimeout: 2 * time.Second,
		Stop: func(ctx context.Context, term int64) error {
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				d, ok := ctx.Deadline()
				first = &stopCall{at: time.Now(), deadline: d, ok: ok}
			}
			return nil
		}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = e.termOnce(ctx, func(ctx context.Context, term Term) error {
		close(lost.lose)
		<-ctx.Done()
		return nil
	})
	if err == nil {
		t.Error("the term ended without an error; want the lease lost")
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case first == nil:
		t.Fatal("OpenSM was never stopped")
	case !first.ok || first.deadline.After(first.at):
		t.Errorf("the lost lease's Stop had deadline %v (set: %v), called at %v: want one already past",
			first.deadline, first.ok, first.at)
	}
}
