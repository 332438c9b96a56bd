package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/api"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/health"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/leader"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/metrics"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// electedFabric is a fabric of the default configuration on st (no lease:
// the applier lock elects) whose terms run the services of services. No
// OpenSM runs: what is under test is the term's services, so opensm.conf
// is not written.
func electedFabric(st *store.Store, services func(term leader.Term) []Service) *Fabric {
	cfg := config.Default()
	m := metrics.New()
	checker := &health.Checker{Fabrics: []health.Fabric{{Name: config.DefaultFabric, DB: st, Self: m.Fabric(config.DefaultFabric)}}}
	return &Fabric{name: config.DefaultFabric, cfg: cfg.FabricConfig(cfg.Fabrics[0]), log: slog.New(slog.DiscardHandler), st: st,
		holder: "test pid 1", writeOpenSMConf: func(context.Context) error { return nil },
		applierLoop: checker.Loop("applier", time.Hour), metrics: m.Fabric(config.DefaultFabric), services: services}
}

// recordingService records its life on events: its Start, its work
// returning, its Stop called and returned. Its work, once cancelled,
// returns only when release is closed: a service slow to stop.
type recordingService struct {
	name    string
	events  chan<- string
	release <-chan struct{}
	work    *routine
}

func (s *recordingService) Start(ctx context.Context) error {
	s.events <- "start " + s.name
	s.work = newRoutine(s.name, func(ctx context.Context) error {
		<-ctx.Done()
		<-s.release
		s.events <- "returned " + s.name
		return nil
	})
	return s.work.Start(ctx)
}

func (s *recordingService) Stop() {
	s.events <- "stop called " + s.name
	if s.work != nil {
		s.work.Stop()
	}
	s.events <- "stopped " + s.name
}

// stoppedAndWaited says whether events are the life of one service name,
// started, then stopped and waited for: its Stop returned after its work.
// The work may return before Stop is called: the term's context, which it
// ends with, is cancelled first.
func stoppedAndWaited(events []string, name string) bool {
	if len(events) != 4 || events[0] != "start "+name || events[3] != "stopped "+name {
		return false
	}
	middle := slices.Sorted(slices.Values(events[1:3]))
	return slices.Equal(middle, []string{"returned " + name, "stop called " + name})
}

// next is the next event, or a failure after a minute.
func next(t *testing.T, events <-chan string) string {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(time.Minute):
		t.Fatal("no event in a minute")
		return ""
	}
}

// A term whose election is lost stops its services and waits for each
// before it ends: the next term, here or on another manager, begins only
// once the last one's work has returned. The applier lock is lost when
// another manager starts a newer term; the HA lease when its row no longer
// names this term (released under it), which the next renewal finds.
func TestFabricStopsAndWaitsForItsServicesWhenItsTermIsLost(t *testing.T) {
	for _, c := range []struct {
		name, engine string
		ha           bool
		lose         func(ctx context.Context, st *store.Store, term int64) error
	}{
		{name: "lock", engine: config.EngineSQLite, lose: func(ctx context.Context, st *store.Store, _ int64) error {
			_, err := st.NewTerm(ctx, "another manager pid 2")
			return err
		}},
		{name: "lease", engine: config.EnginePostgres, ha: true, lose: func(ctx context.Context, st *store.Store, term int64) error {
			leases, err := st.Leases()
			if err == nil {
				_, err = leases.ReleaseLease(ctx, term)
			}
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := storetest.Open(t, c.engine)
			events := make(chan string, 64)
			terms := make(chan int64, 64)
			release := make(chan struct{})
			f := electedFabric(st, func(term leader.Term) []Service {
				terms <- term.ID
				return []Service{&recordingService{name: fmt.Sprint("term ", term.ID), events: events, release: release}}
			})
			if c.ha {
				withLease(t, f)
			}
			if err := f.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer f.Stop()
			first := next(t, events)
			if err := c.lose(t.Context(), st, <-terms); err != nil {
				t.Fatal(err)
			}
			waitedForStop(t, events, first[len("start "):], release)
		})
	}
}

// withLease makes f elect by the HA lease, with a lease short enough that
// its loss is found within a second. Its OpenSM is never started: the
// elector stops it at each term's end, which costs nothing then.
func withLease(t *testing.T, f *Fabric) {
	t.Helper()
	f.cfg.HA.HA, f.cfg.HA.LeaseTimeout = true, 2*time.Second
	var err error
	if f.leases, err = f.st.Leases(); err != nil {
		t.Fatal(err)
	}
	f.sm = opensm.NewProcess(opensm.ProcessConfig{Command: []string{"/bin/false"}, Dir: t.TempDir(), Logger: f.log})
}

// waitedForStop checks, once the term of the service name was lost, that
// its Stop is called, that no term begins while its work has not returned
// (held until release closes), and that the next term begins after it.
func waitedForStop(t *testing.T, events <-chan string, name string, release chan struct{}) {
	t.Helper()
	if e := next(t, events); e != "stop called "+name {
		t.Fatalf("after %q began and its election was lost: %q, want its Stop", name, e)
	}
	// Held past the elector's retry: a term that did not wait for its
	// service would have let the next one begin by now.
	select {
	case e := <-events:
		t.Fatalf("while the lost term's service is still stopping: %q", e)
	case <-time.After(3 * time.Second):
	}
	close(release)
	var got []string
	for len(got) < 3 {
		got = append(got, next(t, events))
	}
	want := []string{"returned " + name, "stopped " + name}
	if !slices.Equal(got[:2], want) || got[2] == "start "+name || !strings.HasPrefix(got[2], "start ") {
		t.Errorf("after the release: %q, want %q and then the next term's start", got, want)
	}
}

// blockingStart is a Service whose Start waits until its context ends:
// the term's context cancelled while it starts.
type blockingStart struct{ entered chan<- struct{} }

func (b blockingStart) Start(ctx context.Context) error {
	close(b.entered)
	<-ctx.Done()
	return ctx.Err()
}

func (blockingStart) Stop() {}

// A Stop while a term is starting its services is safe: the services
// started are stopped and waited for, those after the one starting are
// never started, and Stop returns once all that is done.
func TestFabricStopDuringStart(t *testing.T) {
	st := storetest.Open(t, config.EngineSQLite)
	events := make(chan string, 64)
	release := make(chan struct{})
	close(release)
	entered := make(chan struct{})
	f := electedFabric(st, func(term leader.Term) []Service {
		return []Service{&recordingService{name: "first", events: events, release: release},
			blockingStart{entered: entered},
			&recordingService{name: "last", events: events, release: release}}
	})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-entered
	f.Stop()
	close(events)
	var got []string
	for e := range events {
		got = append(got, e)
	}
	if !stoppedAndWaited(got, "first") {
		t.Errorf("a Stop during the services' start: %q, want the first service started, stopped and waited for, "+
			"and no other", got)
	}
	if err := f.Start(t.Context()); !errors.Is(err, errStopped) {
		t.Errorf("Start after Stop = %v, want %v", err, errStopped)
	}
}

// A service whose work ends by itself ends the term with its error, and the
// term's other services are stopped and waited for.
func TestAServiceThatEndsEndsTheTerm(t *testing.T) {
	events := make(chan string, 64)
	release := make(chan struct{})
	close(release)
	boom := errors.New("the database refuses the term's reads")
	err := runServices(t.Context(), []Service{
		&recordingService{name: "watcher", events: events, release: release},
		newRoutine("applier term", func(context.Context) error { return boom }),
	})
	if !errors.Is(err, boom) {
		t.Errorf("the term ended with %v, want %v", err, boom)
	}
	close(events)
	var got []string
	for e := range events {
		got = append(got, e)
	}
	if !stoppedAndWaited(got, "watcher") {
		t.Errorf("the other service: %q, want it started, stopped and waited for", got)
	}
}

// A routine's Stop is safe before its Start, and twice; a Start after its
// Stop starts nothing.
func TestRoutineStopBeforeStartAndTwice(t *testing.T) {
	ran := false
	r := newRoutine("work", func(context.Context) error { ran = true; return nil })
	r.Stop()
	r.Stop()
	if err := r.Start(t.Context()); !errors.Is(err, errStopped) {
		t.Errorf("Start after Stop = %v, want %v", err, errStopped)
	}
	if ran {
		t.Error("the work ran after Stop")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r = newRoutine("work", func(context.Context) error { ran = true; return nil })
	if err := r.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled context = %v, want %v", err, context.Canceled)
	}
	r.Stop()
	if ran {
		t.Error("the work ran with a cancelled context")
	}
}

// A manager asked to stop while it starts (its context cancelled once its
// listeners are bound, before its fabrics campaign) stops as it would
// later: nothing of it runs on, and it is no failure.
func TestRunCancelledWhileStartingStops(t *testing.T) {
	st := storetest.Open(t, config.EngineSQLite)
	events := make(chan string, 64)
	f := electedFabric(st, func(term leader.Term) []Service {
		return []Service{&recordingService{name: "term", events: events, release: make(chan struct{})}}
	})
	// Never started: the test is about the manager's own start.
	f.sm = opensm.NewProcess(opensm.ProcessConfig{Command: []string{"/bin/false"}, Dir: t.TempDir(), Logger: f.log})
	cfg := config.Default()
	cfg.API.Listen = "127.0.0.1:0"
	log := slog.New(slog.DiscardHandler)
	mgr := &Manager{cfg: &cfg, log: log, fabrics: []*Fabric{f},
		servers: listeners(&cfg, api.New(api.Options{Token: "s3cret-token-0123456789"}, st, log), http.NotFoundHandler(), nil, time.Minute, log)}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := mgr.Run(ctx, "", nil); err != nil {
		t.Errorf("Run cancelled while starting = %v, want nil", err)
	}
	addr := mgr.servers[0].ln.Addr().String()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("the API's listener %s still accepts after Run returned", addr)
	}
	select {
	case e := <-events:
		t.Errorf("a term ran: %q", e)
	default:
	}
}

// A Stop that races the fabric's Start (a manager stopped as it starts its
// fabrics) leaves nothing running: whichever comes first, once both have
// returned no term runs, nor will.
func TestFabricStopRacingStart(t *testing.T) {
	st := storetest.Open(t, config.EngineSQLite)
	events := make(chan string, 64)
	release := make(chan struct{})
	close(release)
	f := electedFabric(st, func(term leader.Term) []Service {
		return []Service{&recordingService{name: "term", events: events, release: release}}
	})
	started := make(chan error, 1)
	go func() { started <- f.Start(t.Context()) }()
	f.Stop()
	if err := <-started; err != nil && !errors.Is(err, errStopped) {
		t.Fatalf("Start racing Stop = %v, want nil or %v", err, errStopped)
	}
	f.Stop() // waits for the campaign a Start after the first Stop could not begin
	close(events)
	var got []string
	for e := range events {
		got = append(got, e)
	}
	if len(got) > 0 && !stoppedAndWaited(got, "term") {
		t.Errorf("a term of a fabric stopped as it started: %q, want none or one stopped and waited for", got)
	}
}
