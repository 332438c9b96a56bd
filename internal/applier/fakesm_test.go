package applier

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

// fakeOpenSM is a fake Supervisor for the applier's unit tests, faithful to
// opensm.Supervisor's contract where the applier relies on it:
//   - Start is idempotent and returns at once; OpenSM then starts (logging
//     its version line) and is ready; nothing but Stop stops it. A Stop for
//     a term is a latch (opensm.TermLatch): Start for that term or an
//     earlier one is refused afterwards.
//   - WaitReady is opensm.AwaitReady on the fake's state: it fails at once
//     while it is not started or its start failed, and waits while it is
//     starting.
//   - Reload refuses unless ready; otherwise OpenSM reads the partitions file
//     at that moment and logs one heavy sweep after the reload, whose lines
//     are cut from real OpenSM logs (../opensm/testdata), as its scripted
//     outcome says.
//   - a crash and restart adds one to Restarts.
//
// The end-to-end suites drive the real OpenSM; these tests drive the term's
// state machine through what a real one cannot be made to do on cue.
type fakeOpenSM struct {
	t              *testing.T
	logFile, pFile string

	mu       sync.Mutex
	started  bool // Start was called and Stop was not
	ready    bool
	launches int      // OpenSMs started: 1 for a manager's life unless it crashed or was stopped
	startErr error    // the start fails with it (WaitReady reports it)
	reloads  []string // the partitions file as each accepted SIGHUP found it
	// qosFile is the QoS policy file; policies is what each accepted SIGHUP
	// found there ("" when there is none), and qosOn whether opensm.conf's
	// qos was on (setQoS), when qosFile is set.
	qosFile    string
	policies   []string
	qos        bool
	qosOn      []bool
	reloadErrs []error  // the next Reloads fail with these, one each
	sweeps     []string // the outcomes of the next sweeps: "applied" (the default), "rejected", "qos-rejected", "none"
	restarts   int
	stops      int
	latch      opensm.TermLatch
	changed    chan struct{}
	// remoteSMs, when set, is what a heavy sweep logs of the other SMs it
	// met (fakeSMPFabric.remoteSMLines).
	remoteSMs func() string
}

func newFakeOpenSM(t *testing.T, dir string) *fakeOpenSM {
	return &fakeOpenSM{t: t, logFile: filepath.Join(dir, "opensm.log"), pFile: filepath.Join(dir, "partitions.conf"),
		changed: make(chan struct{})}
}

// notify wakes WaitReady; f.mu must be held.
func (f *fakeOpenSM) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeOpenSM) Start(term int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.latch.Allows(term); err != nil {
		return err
	}
	if f.started {
		return nil
	}
	f.started = true
	if f.startErr != nil {
		return nil // as the real supervisor: the failure shows in WaitReady, and is retried
	}
	f.launchLocked()
	return nil
}

func (f *fakeOpenSM) launchLocked() {
	f.launches++
	f.appendLog("Dec 01 06:00:00 000001 [00000001] 0x03 -> OpenSM 3.3.23\n")
	f.ready = true
	f.notify()
}

func (f *fakeOpenSM) StopTerm(_ context.Context, term int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latch.Stop(term)
	f.started, f.ready = false, false
	f.stops++
	f.notify()
	return nil
}

func (f *fakeOpenSM) WaitReady(ctx context.Context) error {
	return opensm.AwaitReady(ctx, func() (opensm.Readiness, <-chan struct{}) {
		f.mu.Lock()
		defer f.mu.Unlock()
		r := opensm.Readiness{Ready: f.ready, Supervised: f.started, Failed: f.startErr != nil}
		if r.Failed {
			r.LastError = f.startErr.Error()
		}
		return r, f.changed
	})
}

// setQoS is the manager's Config.SetQoS: opensm.conf's qos, which the next
// SIGHUP's sweep reads.
func (f *fakeOpenSM) setQoS(_ context.Context, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.qos = on
	return nil
}

func (f *fakeOpenSM) Reload(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reloadErrs) > 0 {
		err := f.reloadErrs[0]
		f.reloadErrs = f.reloadErrs[1:]
		return err
	}
	if !f.ready {
		return errors.New("opensm: not running; no SIGHUP sent")
	}
	text, err := os.ReadFile(f.pFile)
	if err != nil {
		f.t.Errorf("SIGHUP with no partitions file: %v", err)
	}
	f.reloads = append(f.reloads, string(text))
	if f.qosFile != "" {
		policy, err := os.ReadFile(f.qosFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			f.t.Errorf("SIGHUP with an unreadable QoS policy file: %v", err)
		}
		f.policies = append(f.policies, string(policy))
		f.qosOn = append(f.qosOn, f.qos)
	}
	outcome := "applied"
	if len(f.sweeps) > 0 {
		outcome, f.sweeps = f.sweeps[0], f.sweeps[1:]
	}
	if f.remoteSMs != nil && outcome != "none" {
		f.appendLog(f.remoteSMs())
	}
	switch outcome {
	case "applied":
		f.appendLog(sweepLines(f.t, "applied.log"))
	case "rejected":
		f.appendLog(sweepLines(f.t, "rejected.log"))
	case "qos-rejected": // the partitions applied, the QoS policy dropped
		f.appendLog(sweepLines(f.t, "qos-rejected.log"))
	case "none": // a sweep that never ends within the test
	default:
		f.t.Fatalf("unknown sweep outcome %q", outcome)
	}
	return nil
}

// crash is OpenSM exiting and its supervisor starting it again.
func (f *fakeOpenSM) crash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restarts++
	f.launchLocked()
}

func (f *fakeOpenSM) Restarts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restarts
}

// heal makes the failing start succeed, as the supervisor's next retry would.
func (f *fakeOpenSM) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startErr = nil
	if f.started && !f.ready {
		f.launchLocked()
	}
}

func (f *fakeOpenSM) state() (launches, stops int, reloads []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.launches, f.stops, append([]string(nil), f.reloads...)
}

func (f *fakeOpenSM) appendLog(text string) {
	if err := opensmtest.Append(f.logFile, text); err != nil {
		f.t.Error(err)
	}
}

// sweepLines is the part of a real OpenSM log fixture after its position
// token: one heavy sweep after a SIGHUP.
func sweepLines(t *testing.T, fixture string) string {
	b, err := os.ReadFile(filepath.Join("..", "opensm", "testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<<<position>>>\n")
	if !ok {
		t.Fatalf("%s has no position token", fixture)
	}
	return after
}
