package health

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// fakeDB is a database for readiness' logic; the end-to-end suite stops a real
// one under a running manager.
type fakeDB struct {
	err error
	l   store.Leadership
}

// A read after the check's deadline fails, as a real database's does.
func (f fakeDB) Revision(ctx context.Context) (int64, error) {
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return 1, f.err
}

func (f fakeDB) Leadership(ctx context.Context) (store.Leadership, error) {
	if ctx.Err() != nil {
		return store.Leadership{}, ctx.Err()
	}
	return f.l, f.err
}

type self struct {
	term   int64
	failed bool
}

func (s self) LeaderTerm() int64     { return s.term }
func (s self) LastApplyFailed() bool { return s.failed }

type sm struct {
	running bool
	err     error
}

func (s sm) Running() bool    { return s.running }
func (s sm) LastError() error { return s.err }

// defaultOnly is the fabrics of a manager that serves the default fabric
// alone.
func defaultOnly(db Database, s Self, o Supervisor) []Fabric {
	return []Fabric{{Name: store.DefaultFabric, DB: db, Self: s, SM: o}}
}

func at(d time.Duration) *time.Time { t := time.Now().Add(-d); return &t }

func TestReady(t *testing.T) {
	down := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	live := store.Leadership{Term: 4, Holder: "a pid 1", Heartbeat: at(time.Second)}
	for _, tt := range []struct {
		name  string
		c     *Checker
		role  string
		wants []string // reasons' prefixes; none: ready
	}{
		{"leader ready", &Checker{Fabrics: defaultOnly(fakeDB{}, self{term: 4}, sm{running: true})}, "leader", nil},
		{"leader without OpenSM", &Checker{Fabrics: defaultOnly(fakeDB{}, self{term: 4}, sm{})}, "leader",
			[]string{"OpenSM is not running"}},
		{"leader whose driver failed and last apply failed", &Checker{Fabrics: defaultOnly(fakeDB{}, self{term: 4, failed: true},
			sm{running: true, err: errors.New("SIGHUP: no such process")})}, "leader",
			[]string{"the OpenSM driver's last operation failed (the manager's log has the error)", "the last apply failed"}},
		{"leader without database", &Checker{Fabrics: defaultOnly(fakeDB{err: down}, self{term: 4}, sm{running: true})}, "leader",
			[]string{"the database does not answer (the manager's log has the error)"}},
		{"follower with a live leader", &Checker{Fabrics: defaultOnly(fakeDB{l: live}, self{}, sm{}), HeartbeatTimeout: 10 * time.Second},
			"follower", nil},
		{"follower with a dead leader", &Checker{Fabrics: defaultOnly(fakeDB{l: store.Leadership{Term: 4, Holder: "a pid 1", Heartbeat: at(time.Minute)}},
			self{}, sm{}), HeartbeatTimeout: 10 * time.Second}, "follower",
			[]string{"the leader of term 4 (a pid 1) last wrote its heartbeat 1m0s ago"}},
		{"follower before any leader", &Checker{Fabrics: defaultOnly(fakeDB{}, self{}, sm{}), HeartbeatTimeout: time.Second}, "follower",
			[]string{"no manager has held the applier lock yet"}},
		{"follower without database", &Checker{Fabrics: defaultOnly(fakeDB{err: down}, self{}, sm{})}, "follower",
			[]string{"the database does not answer"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.c.Ready(context.Background())
			if r.Role != tt.role || r.OK() != (len(tt.wants) == 0) || len(r.Reasons) != len(tt.wants) {
				t.Fatalf("Ready = %+v; want role %s and reasons %q", r, tt.role, tt.wants)
			}
			for i, w := range tt.wants {
				if !strings.HasPrefix(r.Reasons[i], w) {
					t.Errorf("reason %d = %q, want it to start with %q", i, r.Reasons[i], w)
				}
			}
			// The only fabric's verdict is the report's.
			want := map[string]string{store.DefaultFabric: ReadyVerdict}
			if !r.OK() {
				want[store.DefaultFabric] = strings.Join(r.Reasons, "; ")
			}
			if !maps.Equal(r.Fabrics, want) {
				t.Errorf("fabrics = %q, want %q", r.Fabrics, want)
			}
		})
	}
}

// TestReadyOfTwoFabrics: /readyz is ready when every fabric is; a fabric that
// is not names itself in the reasons and has its own verdict, the other's
// stays "ready"; each fabric's own readiness (its afm_ready) is its alone.
// This process leads the default fabric and follows the storage fabric.
func TestReadyOfTwoFabrics(t *testing.T) {
	live := store.Leadership{Term: 9, Holder: "b pid 2", Heartbeat: at(time.Second)}
	dead := store.Leadership{Term: 9, Holder: "b pid 2", Heartbeat: at(time.Minute)}
	for _, tt := range []struct {
		name     string
		def      sm
		storage  store.Leadership
		reasons  []string
		fabrics  map[string]string
		defReady bool
	}{
		{"both ready", sm{running: true}, live, nil,
			map[string]string{"default": "ready", "storage": "ready"}, true},
		{"storage without a live leader", sm{running: true}, dead,
			[]string{"fabric storage: the leader of term 9 (b pid 2) last wrote its heartbeat 1m0s ago (more than 10s)"},
			map[string]string{"default": "ready", "storage": "the leader of term 9 (b pid 2) last wrote its heartbeat 1m0s ago (more than 10s)"}, true},
		{"default without OpenSM", sm{}, live, []string{"OpenSM is not running"},
			map[string]string{"default": "OpenSM is not running", "storage": "ready"}, false},
		{"neither", sm{}, dead, []string{"OpenSM is not running",
			"fabric storage: the leader of term 9 (b pid 2) last wrote its heartbeat 1m0s ago (more than 10s)"},
			map[string]string{"default": "OpenSM is not running", "storage": "the leader of term 9 (b pid 2) last wrote its heartbeat 1m0s ago (more than 10s)"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Checker{HeartbeatTimeout: 10 * time.Second, Fabrics: []Fabric{
				{Name: "default", DB: fakeDB{}, Self: self{term: 4}, SM: tt.def},
				{Name: "storage", DB: fakeDB{l: tt.storage}, Self: self{}, SM: sm{}}}}
			r := c.Ready(context.Background())
			if r.OK() != (len(tt.reasons) == 0) || r.Role != "leader" || !slices.Equal(r.Reasons, tt.reasons) {
				t.Errorf("Ready = %+v; want role leader and reasons %q", r, tt.reasons)
			}
			if !maps.Equal(r.Fabrics, tt.fabrics) {
				t.Errorf("fabrics = %q, want %q", r.Fabrics, tt.fabrics)
			}
			if got := c.FabricReady(context.Background(), "default"); got.OK() != tt.defReady || got.Role != "leader" {
				t.Errorf("FabricReady(default) = %+v, want ok %t as the leader", got, tt.defReady)
			}
			if got := c.FabricReady(context.Background(), "storage"); got.OK() != (tt.fabrics["storage"] == "ready") || got.Role != "follower" {
				t.Errorf("FabricReady(storage) = %+v, want ok %t as a follower", got, tt.fabrics["storage"] == "ready")
			}
		})
	}
	c := &Checker{Fabrics: defaultOnly(fakeDB{}, self{term: 4}, sm{running: true})}
	if r := c.FabricReady(context.Background(), "compute"); r.OK() || len(r.Reasons) != 1 || r.Reasons[0] != "no fabric named compute" {
		t.Errorf("FabricReady of an unknown fabric = %+v, want a failure naming it", r)
	}
}

// TestLiveWedgedLoop: an active loop that stops beating makes liveness fail,
// naming it; an inactive one (a follower's applier) never does.
func TestLiveWedgedLoop(t *testing.T) {
	now := time.Unix(1700000000, 0)
	c := Checker{now: func() time.Time { return now }}
	l := c.Loop("applier", time.Minute)
	if r := c.Live(); !r.OK() {
		t.Fatalf("inactive loop: %+v", r)
	}
	l.Active(true)
	for range 4 {
		now = now.Add(50 * time.Second)
		l.Beat()
		if r := c.Live(); !r.OK() {
			t.Fatalf("beating loop: %+v", r)
		}
	}
	now = now.Add(61 * time.Second)
	if r := c.Live(); r.OK() || len(r.Reasons) != 1 || r.Reasons[0] != "the applier loop has not turned for 1m1s (bound 1m0s)" {
		t.Fatalf("wedged loop: %+v", r)
	}
	l.Active(false)
	if r := c.Live(); !r.OK() {
		t.Fatalf("loop made inactive: %+v", r)
	}
}

// hungDB answers nothing until the check's deadline, as a database whose
// server stopped answering does.
type hungDB struct{}

func (hungDB) Revision(ctx context.Context) (int64, error) { <-ctx.Done(); return 0, ctx.Err() }
func (hungDB) Leadership(ctx context.Context) (store.Leadership, error) {
	<-ctx.Done()
	return store.Leadership{}, ctx.Err()
}

// TestReadyFabricsReadAtOnce: a fabric whose reads hang until the check's
// timeout fails alone; a fabric listed after it is still read within the
// timeout and judged ready.
func TestReadyFabricsReadAtOnce(t *testing.T) {
	live := store.Leadership{Term: 2, Holder: "b pid 2", Heartbeat: at(time.Second)}
	c := &Checker{HeartbeatTimeout: 10 * time.Second, Timeout: 200 * time.Millisecond, Fabrics: []Fabric{
		{Name: "default", DB: fakeDB{}, Self: self{term: 4}, SM: sm{running: true}},
		{Name: "hung", DB: hungDB{}, Self: self{}, SM: sm{}},
		{Name: "storage", DB: fakeDB{l: live}, Self: self{}, SM: sm{}},
	}}
	var log strings.Builder
	c.Log = slog.New(slog.NewTextHandler(&log, nil))
	r := c.Ready(context.Background())
	if r.OK() || r.Fabrics["default"] != ReadyVerdict || r.Fabrics["storage"] != ReadyVerdict ||
		!strings.HasPrefix(r.Fabrics["hung"], "the database does not answer") ||
		!strings.Contains(log.String(), `fabric=hung error="context deadline exceeded"`) {
		t.Errorf("Ready = %+v, logged %q; want only the hung fabric failing, on its deadline", r, log.String())
	}
}

// TestReadyWithholdsErrors: /readyz answers anyone, so its reasons carry no
// database driver's, lease's or OpenSM driver's error text (a host, a port, a
// user); the manager's log has each, once while it stays the same.
func TestReadyWithholdsErrors(t *testing.T) {
	secret := errors.New(`failed to connect to host=db7.internal user=afm database=afm: password authentication failed`)
	for _, tt := range []struct {
		name string
		fab  Fabric
	}{
		{"the database", Fabric{Name: "default", DB: fakeDB{err: secret}, Self: self{term: 4}, SM: sm{running: true}}},
		{"the OpenSM driver", Fabric{Name: "default", DB: fakeDB{}, Self: self{term: 4}, SM: sm{running: true, err: secret}}},
		{"the leadership", Fabric{Name: "default", DB: fakeDB{}, Self: self{}, SM: sm{}, Leader: leaseErr{secret}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log strings.Builder
			c := &Checker{Fabrics: []Fabric{tt.fab}, Log: slog.New(slog.NewTextHandler(&log, nil))}
			for range 3 {
				r := c.Ready(context.Background())
				if body, _ := json.Marshal(r); r.OK() || strings.Contains(string(body), "db7") {
					t.Fatalf("/readyz answers %s", body)
				}
			}
			if n := strings.Count(log.String(), "db7.internal"); n != 1 {
				t.Errorf("the log has the error %d times, want once:\n%s", n, log.String())
			}
		})
	}
}

// TestReadyLogsTheErrorAgainAfterARecovery: a database that comes back and
// fails again alike (a restart, then another outage) is logged again: the
// second outage is news, though its error reads the same.
func TestReadyLogsTheErrorAgainAfterARecovery(t *testing.T) {
	down := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	db := &flakyDB{err: down}
	var log strings.Builder
	c := &Checker{Fabrics: []Fabric{{Name: "default", DB: db, Self: self{term: 4}, SM: sm{running: true}}},
		Log: slog.New(slog.NewTextHandler(&log, nil))}
	for _, err := range []error{down, down, nil, down} {
		db.err = err
		if r := c.Ready(context.Background()); r.OK() != (err == nil) {
			t.Fatalf("Ready = %+v with the database's error %v", r, err)
		}
	}
	if n := strings.Count(log.String(), "connection refused"); n != 2 {
		t.Errorf("the log has the error %d times, want twice (each outage once):\n%s", n, log.String())
	}
}

// flakyDB answers with err, which a test changes between checks.
type flakyDB struct{ err error }

func (f *flakyDB) Revision(context.Context) (int64, error) { return 1, f.err }

func (f *flakyDB) Leadership(context.Context) (store.Leadership, error) {
	return store.Leadership{}, f.err
}

// leaseErr is a lease that cannot be read.
type leaseErr struct{ err error }

func (l leaseErr) LiveLeader(context.Context) (bool, string, error) { return false, "", l.err }
