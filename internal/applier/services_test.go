package applier

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The term's reader of the subnet dump is chosen once, though the second-SM
// look asks for it from its own goroutine while the loop reads the dump for
// an apply: chosen on first use without a lock, each took a reader of its
// own, and -race saw the two writes.
func TestSubnetDumpChosenOnceBesideTheLoop(t *testing.T) {
	tm := &term{Applier: &Applier{Cfg: Config{SubnetDump: copySubnetDump(t, t.TempDir())}}}
	var wg sync.WaitGroup
	got := make([]*topology.Dump, 2)
	for i := range got {
		wg.Add(1)
		go func() { // the look's goroutine, and the loop's
			defer wg.Done()
			got[i] = tm.subnetDump()
		}()
	}
	wg.Wait()
	if got[0] == nil || got[0] != got[1] {
		t.Errorf("the term's readers of the subnet dump: %p and %p; want one", got[0], got[1])
	}
}

// hangingDialer is the SMP connection of the looks: once told to hang, a
// look's dial hangs until its context ends (a port that never answers), then
// takes a while to return; returned says whether it has.
type hangingDialer struct {
	pkeyread.Dialer
	hang     atomic.Bool
	entered  chan struct{}
	once     sync.Once
	returned atomic.Bool
}

func (d *hangingDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	if !d.hang.Load() {
		return d.Dialer.Dial(ctx)
	}
	d.once.Do(func() { close(d.entered) })
	<-ctx.Done()
	time.Sleep(200 * time.Millisecond) // what unwinding a look costs; Stop waits for it however long
	d.returned.Store(true)
	return nil, ctx.Err()
}

// A term that ends waits for its background services: a second-SM look
// under way when the term's context ends has returned when Lead does, so
// that nothing of the old term records a verdict or describes jobs beside
// the next one. Before, the look's goroutine was cancelled and left running.
func TestTermWaitsForItsServices(t *testing.T) {
	r := newSecondSMRig(t)
	dialer := &hangingDialer{Dialer: r.smp, entered: make(chan struct{})}
	r.app.SecondSM.Dialer = dialer
	_, end := r.lead()
	// The term's first apply, whose look before completing reads the
	// fabric; then the loop is idle, and the service's next look hangs.
	waitLog(t, r.logs, "partitions applied", `"revision":0,`)
	dialer.hang.Store(true)
	select {
	case <-dialer.entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("no second-SM look started within 10 s\nlog:\n%s", r.logs)
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
	if !dialer.returned.Load() {
		t.Errorf("Lead returned while its second-SM look was still running")
	}
}

// Stop returns only once the service's goroutine has ended.
func TestServiceStopWaits(t *testing.T) {
	var ended atomic.Bool
	s := every("test", slog.New(slog.DiscardHandler), time.Millisecond, func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		ended.Store(true)
	})
	s.Start(t.Context())
	time.Sleep(20 * time.Millisecond) // f runs
	s.Stop()
	if !ended.Load() {
		t.Errorf("Stop returned before the service's goroutine ended")
	}
	s.Stop() // a second Stop returns at once
}

// A background check that finds a reason to hold the jobs describes them
// with the whole verdict, as finish does: a job held by the last audit's
// breach (restored by the term) and by a freeze the freeze watch found says
// both. The watch used to write its own reason alone, hiding the breach
// until the next apply.
func TestBackgroundCheckDescribesTheWholeVerdict(t *testing.T) {
	r := newApplyRigOn(t, config.EnginePostgres, true, func() string { return heavySweep("") })
	ctx := t.Context()
	breach := audit.Finding{Kind: audit.ForeignPKey, Port: 0x0002c90300000201, PKey: 0x65,
		Text: "port 0x0002c90300000201 holds pkey 0x0065 (network n) but is not recorded in it"}
	s := audit.Summary{Started: time.Now().UTC().Truncate(time.Millisecond), Findings: []audit.Finding{breach}}
	if err := r.st.RecordAudit(ctx, AuditRecord(r.term.id, s)); err != nil {
		t.Fatal(err)
	}
	r.term.Cfg.Audit = AuditConfig{Interval: time.Hour, Reader: &pkeyread.Reader{}, Recorder: r.st}
	r.term.loadAudit(ctx)
	job := r.network(101)

	// The term's tail, with the freeze watch among its readers (HA).
	leases, err := r.st.Leases()
	if err != nil {
		t.Fatal(err)
	}
	r.term.tail.Close()
	r.term.Lease = leases
	if err := r.term.startLog("the previous leader"); err != nil {
		t.Fatal(err)
	}
	r.term.Cfg.PollInterval = 10 * time.Millisecond
	stop := r.term.startServices(ctx, r.term.newDriftRepair())
	defer stop()
	standby, err := os.ReadFile(filepath.Join("..", "opensm", "testdata", "standby.log"))
	if err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, r.sm.log, strings.ReplaceAll(string(standby), "<<<position>>>\n", ""))

	var said string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(said, Frozen+": "); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job says %q; want it held by the freeze", said)
		}
		said = r.job(job.ID).Description
	}
	if !strings.Contains(said, "the fabric audit found "+breach.Text) {
		t.Errorf("the job held by the freeze and the audit's breach says\n%q\nwant both reasons", said)
	}
}

// The second-SM look, when a look fails beside the loop, describes the jobs
// with the whole verdict too: the second SM a previous term recorded and the
// last audit's breach.
func TestSecondSMLookDescribesTheWholeVerdict(t *testing.T) {
	const own fabric.GUID = 0x0002c90300a00001
	r := newApplyRigOn(t, config.EngineSQLite, true, func() string { return heavySweep("") })
	ctx := t.Context()
	breach := audit.Finding{Kind: audit.ForeignPKey, Port: 0x0002c90300000201, PKey: 0x65,
		Text: "port 0x0002c90300000201 holds pkey 0x0065 (network n) but is not recorded in it"}
	s := audit.Summary{Started: time.Now().UTC().Truncate(time.Millisecond), Findings: []audit.Finding{breach}}
	if err := r.st.RecordAudit(ctx, AuditRecord(r.term.id, s)); err != nil {
		t.Fatal(err)
	}
	r.term.Cfg.Audit = AuditConfig{Interval: time.Hour, Reader: &pkeyread.Reader{}, Recorder: r.st}
	r.term.loadAudit(ctx)
	tenant := store.SecondSM{PortGUID: 0x0002c90300000301, Priority: 15, State: "MASTER", OwnState: "STANDBY"}
	if err := r.st.RecordSecondSM(ctx, r.term.id, tenant); err != nil {
		t.Fatal(err)
	}
	job := r.network(101)
	r.term.secondSM = &secondSMWatch{check: &SecondSMCheck{Own: own, Store: r.st}}
	r.term.secondSM.restore(ctx, r.term.watchEnv())
	r.term.secondSM.lookFailed(ctx, r.term.watchEnv(), errors.New("no SMP connection"))
	said := r.job(job.ID).Description
	for _, want := range []string{"Second subnet manager: port " + tenant.PortGUID.String(), "the fabric audit found " + breach.Text} {
		if !strings.Contains(said, want) {
			t.Errorf("the job held by the second SM and the audit's breach says\n%q\nwant %q in it", said, want)
		}
	}
}

// Two background checks hold the jobs at once, the freeze and the second
// SM: whichever finds its reason last describes the jobs with both, since
// each describes them with the whole verdict (each used to write its own
// reason alone, hiding the other's until the next apply).
func TestFreezeAndSecondSMDescribeBoth(t *testing.T) {
	const own fabric.GUID = 0x0002c90300a00001
	tenant := store.SecondSM{PortGUID: 0x0002c90300000301, Priority: 15, State: "MASTER", OwnState: "STANDBY"}
	standby, err := os.ReadFile(filepath.Join("..", "opensm", "testdata", "standby.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, last := range []string{"freeze watch", "second-SM look"} {
		t.Run(last+" last", func(t *testing.T) {
			r := newApplyRigOn(t, config.EnginePostgres, true, func() string { return heavySweep("") })
			ctx := t.Context()
			job := r.network(101)
			leases, err := r.st.Leases()
			if err != nil {
				t.Fatal(err)
			}
			r.term.tail.Close()
			r.term.Lease = leases
			if err := r.term.startLog("the previous leader"); err != nil {
				t.Fatal(err)
			}
			env := r.term.watchEnv()
			freeze := func() {
				opensmtest.AppendLog(t, r.sm.log, strings.ReplaceAll(string(standby), "<<<position>>>\n", ""))
				r.term.freeze.detect(ctx, env)
			}
			secondSM := func() {
				if err := r.st.RecordSecondSM(ctx, r.term.id, tenant); err != nil {
					t.Fatal(err)
				}
				r.term.secondSM = &secondSMWatch{check: &SecondSMCheck{Own: own, Store: r.st}}
				r.term.secondSM.restore(ctx, env)
				r.term.secondSM.lookFailed(ctx, env, errors.New("no SMP connection"))
			}
			if last == "freeze watch" {
				secondSM()
				freeze()
			} else {
				freeze()
				secondSM()
			}
			said := r.job(job.ID).Description
			for _, want := range []string{Frozen + ": ", "Second subnet manager: port " + tenant.PortGUID.String()} {
				if !strings.Contains(said, want) {
					t.Errorf("the job held by the freeze and the second SM says\n%q\nwant %q in it", said, want)
				}
			}
		})
	}
}

// The audit is a service of the term: an audit reading the fabric when the
// term ends (its lease lost, its context cancelled) has ended when Lead
// returns, and its service says it stopped, so that no audit of the old term
// records a verdict or restarts OpenSM beside the next term. The audit used
// to run in the loop; as a service it must be waited for like the others.
func TestAuditServiceStopsWithTheTerm(t *testing.T) {
	r := newLeadRig(t)
	dialer := &hangingDialer{entered: make(chan struct{})}
	dialer.hang.Store(true) // every read of the audit's hangs until its context ends
	r.app.Cfg.Audit = AuditConfig{Interval: time.Hour, Reader: &pkeyread.Reader{Dialer: dialer}}
	_, end := r.lead()
	select {
	case <-dialer.entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("no audit read the fabric within 10 s of the term's start\nlog:\n%s", r.logs)
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
	if !dialer.returned.Load() {
		t.Errorf("Lead returned while its audit was still reading the fabric")
	}
	if !strings.Contains(r.logs.String(), `"msg":"service stopped","service":"audit"`) {
		t.Errorf("the audit service did not say it stopped\nlog:\n%s", r.logs)
	}
}

// A service whose first run is at its Start (the retention) is stopped like
// any other: Stop returns once its goroutine ended, even while that first
// run is under way.
func TestServiceStopWaitsForItsFirstRun(t *testing.T) {
	var ended atomic.Bool
	started := make(chan struct{})
	s := every("test", slog.New(slog.DiscardHandler), time.Hour, func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		ended.Store(true)
	})
	s.first = true
	s.Start(t.Context())
	<-started // runs at Start, not an hour later
	s.Stop()
	if !ended.Load() {
		t.Errorf("Stop returned before the service's first run ended")
	}
}
