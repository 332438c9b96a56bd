package applier

import (
	"context"
	"log/slog"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// deadlineFake is a fake of every store a term calls, faithful in what this
// test reads of it: whether each call's context had a deadline.
type deadlineFake struct {
	seen map[string]bool // method: its context had a deadline
}

// saw records its caller's method and whether ctx has a deadline.
func (f *deadlineFake) saw(ctx context.Context) {
	pc, _, _, _ := runtime.Caller(1)
	name := runtime.FuncForPC(pc).Name()
	_, ok := ctx.Deadline()
	f.seen[name[strings.LastIndex(name, ".")+1:]] = ok
}

func (f *deadlineFake) Revision(ctx context.Context) (int64, error) { f.saw(ctx); return 0, nil }
func (f *deadlineFake) Snapshot(ctx context.Context) (store.Snapshot, error) {
	f.saw(ctx)
	return store.Snapshot{}, nil
}
func (f *deadlineFake) ReadSnapshot(ctx context.Context, _ *store.SnapshotCache) (store.Snapshot, error) {
	f.saw(ctx)
	return store.Snapshot{}, nil
}
func (f *deadlineFake) MarkJobsRunning(ctx context.Context, _, _ int64) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) FinishApply(ctx context.Context, _ store.Apply, _ func(store.GateState) bool) (store.Finished, error) {
	f.saw(ctx)
	return store.Finished{}, nil
}
func (f *deadlineFake) FinishApplyProven(ctx context.Context, _ store.Apply, _ store.Proven, _ func(store.GateState) bool) (store.Finished, error) {
	f.saw(ctx)
	return store.Finished{}, nil
}
func (f *deadlineFake) FailJobs(ctx context.Context, _, _ int64, _ string) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) FailJob(ctx context.Context, _, _ int64, _ string) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) OpenJobs(ctx context.Context, _ int64) ([]store.OpenJob, error) {
	f.saw(ctx)
	return nil, nil
}
func (f *deadlineFake) GetJob(ctx context.Context, _ int64) (store.Job, error) {
	f.saw(ctx)
	return store.Job{}, nil
}
func (f *deadlineFake) RecordApply(ctx context.Context, _ store.Apply) (bool, error) {
	f.saw(ctx)
	return false, nil
}
func (f *deadlineFake) Wake(ctx context.Context) <-chan struct{} { f.saw(ctx); return nil }
func (f *deadlineFake) DeleteExpiredJobs(ctx context.Context, _ int64, _ time.Duration) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) DeleteExpiredApplies(ctx context.Context, _ int64, _ time.Duration) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) ExpectedSwitches(ctx context.Context) ([]store.ExpectedSwitch, error) {
	f.saw(ctx)
	return nil, nil
}
func (f *deadlineFake) EnforcementErrors(ctx context.Context) ([]store.EnforcementError, error) {
	f.saw(ctx)
	return nil, nil
}
func (f *deadlineFake) RecordEnforcementErrors(ctx context.Context, _ int64, _ []store.EnforcementSighting) error {
	f.saw(ctx)
	return nil
}
func (f *deadlineFake) RecordDuplicateGUIDs(ctx context.Context, _ int64, _ []store.DuplicateSighting) error {
	f.saw(ctx)
	return nil
}
func (f *deadlineFake) ClearDuplicateGUIDs(ctx context.Context, _ int64) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) DuplicateGUIDs(ctx context.Context) ([]store.DuplicateGUID, error) {
	f.saw(ctx)
	return nil, nil
}
func (f *deadlineFake) RecordGUIDPlaces(ctx context.Context, _ int64, _ []store.GUIDPlaceUpdate) ([]store.GUIDPlace, error) {
	f.saw(ctx)
	return nil, nil
}
func (f *deadlineFake) AddGUIDPlaces(ctx context.Context, _ int64, _ []store.GUIDPlaceUpdate) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) GUIDPlaces(ctx context.Context) ([]store.GUIDPlace, error) {
	f.saw(ctx)
	return nil, nil
}
func (f *deadlineFake) DescribeOpenJobs(ctx context.Context, _, _ int64, _ string) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) DescribeJob(ctx context.Context, _, _ int64, _ string) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) RecordSetFailures(ctx context.Context, _ int64, _ []store.SetFailure) error {
	f.saw(ctx)
	return nil
}
func (f *deadlineFake) SetFailures(ctx context.Context) ([]store.SetFailure, error) {
	f.saw(ctx)
	return nil, nil
}
func (f *deadlineFake) ReadLease(ctx context.Context) (store.Lease, error) {
	f.saw(ctx)
	return store.Lease{}, nil
}
func (f *deadlineFake) SetFreeze(ctx context.Context, _ int64, _ string) (bool, error) {
	f.saw(ctx)
	return false, nil
}
func (f *deadlineFake) LiftFreeze(ctx context.Context, _ int64) (bool, error) {
	f.saw(ctx)
	return false, nil
}
func (f *deadlineFake) RecordSecondSM(ctx context.Context, _ int64, _ store.SecondSM) error {
	f.saw(ctx)
	return nil
}
func (f *deadlineFake) ClearSecondSMs(ctx context.Context, _ int64) (int64, error) {
	f.saw(ctx)
	return 0, nil
}
func (f *deadlineFake) SecondSMs(ctx context.Context) ([]store.SecondSM, error) {
	f.saw(ctx)
	return nil, nil
}
func (f *deadlineFake) RecordForeignSMs(ctx context.Context, _ int64, _ []store.SecondSM) error {
	f.saw(ctx)
	return nil
}
func (f *deadlineFake) RecordAudit(ctx context.Context, _ store.Audit) error { f.saw(ctx); return nil }
func (f *deadlineFake) LastAudit(ctx context.Context) (store.Audit, bool, error) {
	f.saw(ctx)
	return store.Audit{}, false, nil
}

// The stores a term calls, each of whose methods the term's view bounds.
var boundedStores = []reflect.Type{reflect.TypeFor[Store](), reflect.TypeFor[LeaseStore](),
	reflect.TypeFor[SecondSMStore](), reflect.TypeFor[AuditRecorder]()}

// Every method of every store a term calls reaches the store with a
// deadline through the term's view, Wake aside (its channel lasts the
// term): a method added to an interface fails here until the view gives it
// one, and fails to compile until the view has it at all.
func TestDeadlineStoreBoundsEveryCall(t *testing.T) {
	f := &deadlineFake{seen: map[string]bool{}}
	view := reflect.ValueOf(deadlineStore{store: f, leases: f, secondSMs: f, audits: f, timeout: time.Minute})
	for _, iface := range boundedStores {
		for m := range iface.Methods() {
			t.Run(iface.Name()+"."+m.Name, func(t *testing.T) {
				call := view.MethodByName(m.Name)
				args := []reflect.Value{reflect.ValueOf(context.Background())}
				for i := 1; i < call.Type().NumIn(); i++ {
					args = append(args, reflect.Zero(call.Type().In(i)))
				}
				call.Call(args)
				bounded, called := f.seen[m.Name]
				switch {
				case !called:
					t.Errorf("the view did not pass %s to its store", m.Name)
				case m.Name == "Wake" && bounded:
					t.Errorf("Wake reached the store with a deadline: its channel would close when it passed")
				case m.Name != "Wake" && !bounded:
					t.Errorf("%s reached the store without a deadline", m.Name)
				}
			})
		}
	}
}

// The view names its stores: an embedded one would give every method added
// to it, unbounded, to the view.
func TestDeadlineStoreEmbedsNothing(t *testing.T) {
	for field := range reflect.TypeFor[deadlineStore]().Fields() {
		if field.Anonymous {
			t.Errorf("deadlineStore embeds %s", field.Type)
		}
	}
}

// A term sees every store of its applier through one view with the
// applier's timeout, and what the applier was given stays its own: the
// next term wraps the same stores, not the view.
func TestWithDeadlinesWrapsEveryStore(t *testing.T) {
	f := &deadlineFake{seen: map[string]bool{}}
	check := &SecondSMCheck{Store: f}
	a := &Applier{Store: f, Lease: f, SecondSM: check, Cfg: Config{Audit: AuditConfig{Recorder: f}}}
	b := a.withDeadlines()
	want := deadlineStore{store: f, leases: f, secondSMs: f, audits: f, timeout: DefaultDBTimeout}
	for name, got := range map[string]any{"Store": b.Store, "Lease": b.Lease, "SecondSM.Store": b.SecondSM.Store,
		"Cfg.Audit.Recorder": b.Cfg.Audit.Recorder} {
		if got != any(want) {
			t.Errorf("the term's %s is %#v, want %#v", name, got, want)
		}
	}
	if a.Store != f || a.Lease != f || a.SecondSM != check || check.Store != f || a.Cfg.Audit.Recorder != f {
		t.Errorf("withDeadlines changed the applier's own stores")
	}

	// Without the lease, the second-SM look or the audit's record, the
	// term has none either: their absence is what turns them off.
	b = (&Applier{Store: f, Cfg: Config{DBTimeout: time.Second}}).withDeadlines()
	if b.Lease != nil || b.SecondSM != nil || b.Cfg.Audit.Recorder != nil {
		t.Errorf("a term without them has Lease %v, SecondSM %v, Recorder %v", b.Lease, b.SecondSM, b.Cfg.Audit.Recorder)
	}
	if d := b.Store.(deadlineStore); d.timeout != time.Second {
		t.Errorf("timeout %v, want Config.DBTimeout's 1s", d.timeout)
	}
}

// blackHoledLeases is a fake of the lease's store on a connection that
// answers nothing (a cut link, a frozen server): each call returns only when
// its context ends.
type blackHoledLeases struct{}

func (blackHoledLeases) ReadLease(ctx context.Context) (store.Lease, error) {
	<-ctx.Done()
	return store.Lease{}, ctx.Err()
}
func (blackHoledLeases) SetFreeze(ctx context.Context, _ int64, _ string) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}
func (blackHoledLeases) LiftFreeze(ctx context.Context, _ int64) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

// The freeze watch records a freeze through the term's view: on a
// black-holed database the record fails at the term's deadline, and the
// watch's look ends with the term frozen, instead of holding the watch (and
// the term's loop, which takes its lock) until the term ends.
func TestFreezeWatchOnBlackHoledDatabase(t *testing.T) {
	a := (&Applier{Lease: blackHoledLeases{}, Cfg: Config{DBTimeout: 50 * time.Millisecond}}).withDeadlines()
	path := filepath.Join(t.TempDir(), "opensm.log")
	w := tailedFreezeWatch(t, path, opensm.Position{})
	w.leases = a.Lease
	opensmtest.AppendLog(t, path, "Nov 29 19:24:38 895800 [F5B2C6C0] 0x80 -> Entering STANDBY state\n")
	done := make(chan bool, 1)
	go func() { done <- w.detectLocked(t.Context(), &watchEnv{Log: slog.New(slog.DiscardHandler), id: 1}) }()
	select {
	case frozen := <-done:
		if !frozen {
			t.Errorf("the watch saw STANDBY but is not frozen")
		}
	case <-time.After(time.Minute): // a guard against a hang, far beyond the 50 ms deadline
		t.Fatal("the freeze's record on a black-holed database did not end")
	}
}
