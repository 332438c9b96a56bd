package opensm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

func TestWaitSweepFixtures(t *testing.T) {
	// Fixtures whose outcome comes from the deadline get a short timeout; the
	// others a long one that is never reached.
	const (
		short = 300 * time.Millisecond
		long  = 10 * time.Second
	)
	tests := []struct {
		fixture        string
		timeout        time.Duration
		want           Outcome
		wantPKeyErrors []string // each must be in the corresponding PKeyErrors line
		wantDetail     []string
	}{
		{fixture: "applied.log", timeout: long, want: Applied},
		{fixture: "rejected.log", timeout: long, want: Rejected,
			wantDetail: []string{"PARSE ERROR: line 2: bad PortGUID", "Partition configuration in error"}},
		{fixture: "not-accessible.log", timeout: long, want: Rejected,
			wantDetail: []string{"partitions.conf is not accessible (No such file or directory)"}},
		// The sweep came up, but OpenSM dropped the QoS policy (a syntax
		// error): the pkeys' paths lost their limits.
		{fixture: "qos-rejected.log", timeout: long, want: QoSRejected,
			wantDetail: []string{"ERR AC03: Failed parsing QoS policy file (/var/lib/alternative-fabric-manager/qos-policy.conf)"}},
		{fixture: "dropped-mads.log", timeout: short, want: Failed,
			wantPKeyErrors: []string{"ERR 3113: MAD completed in error (IB_TIMEOUT): SubnSet(P_KeyTable)", "ERR 3119: Set method failed for attribute 0x16 (P_KeyTable)"},
			wantDetail:     []string{"1 heavy sweep(s) ended with \"Errors during initialization\""}},
		{fixture: "errors-then-success.log", timeout: long, want: Applied},
		// A discovery Get that times out (the host's link went down) is no
		// pkey error: OpenSM drops the port and the subnet comes up.
		{fixture: "get-timeout.log", timeout: long, want: Applied},
		{fixture: "pkey-table-full.log", timeout: long, want: Applied,
			wantPKeyErrors: []string{
				"ERR 0512: Failed to set PKey 0x8140", "ERR 0512: Failed to set PKey 0x8141", "ERR 0512: Failed to set PKey 0x8142",
				"ERR 0512: Failed to set PKey 0x8143", "ERR 0512: Failed to set PKey 0x8144", "ERR 0512: Failed to set PKey 0x8145",
				"ERR 0512: Failed to set PKey 0x8146",
			}},
		{fixture: "pkey-errors-not-enforcement.log", timeout: long, want: Applied,
			wantPKeyErrors: []string{
				"ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x0002c90300000300 port 1 (H3)",
				"ERR 0508: Failed to set accum_pkeys PKey 0x8065",
			}},
		{fixture: "standby.log", timeout: long, want: LostMastership, wantDetail: []string{"Entering STANDBY state"}},
		{fixture: "two-starts.log", timeout: long, want: Applied},
		{fixture: "box-split.log", timeout: short, want: Failed,
			wantPKeyErrors: []string{"ERR 3113", "ERR 3119"}},
		{fixture: "in-flight.log", timeout: long, want: Applied},
		{fixture: "mid-line.log", timeout: short, want: Unknown, wantDetail: []string{"no heavy sweep started"}},
		{fixture: "subnet-up-box-only.log", timeout: short, want: Unknown, wantDetail: []string{"started but did not end"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			path, from := writeFixture(t, tt.fixture)
			got, err := waitSweep(context.Background(), path, from, tt.timeout)
			if err != nil {
				t.Fatal(err)
			}
			checkSweep(t, got, tt.want, tt.wantPKeyErrors, tt.wantDetail)
		})
	}
}

func checkSweep(t *testing.T, got SweepResult, want Outcome, wantPKeyErrors, wantDetail []string) {
	t.Helper()
	if got.Outcome != want {
		t.Errorf("outcome %q (%s), want %q", got.Outcome, got.Detail, want)
	}
	if len(got.PKeyErrors) != len(wantPKeyErrors) {
		t.Errorf("PKeyErrors %q, want %d lines", got.PKeyErrors, len(wantPKeyErrors))
	} else {
		for i, w := range wantPKeyErrors {
			if !strings.Contains(got.PKeyErrors[i], w) {
				t.Errorf("PKeyErrors[%d] = %q, want it to contain %q", i, got.PKeyErrors[i], w)
			}
		}
	}
	for _, w := range wantDetail {
		if !strings.Contains(got.Detail, w) {
			t.Errorf("detail %q does not contain %q", got.Detail, w)
		}
	}
	if got.Outcome != Applied && got.Detail == "" {
		t.Error("no detail for an outcome other than applied")
	}
}

// The log changed under the position: the chain of proof is broken, whatever
// the log now says (here: a complete, successful sweep).
func TestWaitSweepLogReplacedSincePosition(t *testing.T) {
	tests := []struct {
		name   string
		adjust func(*Position, int64)
	}{
		{"truncated", func(p *Position, size int64) { p.Offset = size + 1 }},
		{"rotated", func(p *Position, _ int64) { p.Inode++ }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, from := writeFixture(t, "applied.log")
			end, err := LogPosition(path)
			if err != nil {
				t.Fatal(err)
			}
			tt.adjust(&from, end.Offset)
			got, err := waitSweep(context.Background(), path, from, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			checkSweep(t, got, Unknown, nil, []string{"proof broken", "log truncated or replaced"})
		})
	}
}

func TestWaitSweepCancelled(t *testing.T) {
	path, from := writeFixture(t, "mid-line.log") // no sweep ends here
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := waitSweep(ctx, path, from, time.Hour)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitSweep did not return after cancellation")
	}
}

// writeFixtureToPosition writes a fixture only up to its position and returns
// the rest, for the test to write as OpenSM would while waitSweep waits.
func writeFixtureToPosition(t *testing.T, name string) (path string, from Position, rest string) {
	t.Helper()
	log, offset := loadFixture(t, name)
	path, from = writeFixture(t, name)
	if err := os.Truncate(path, offset); err != nil {
		t.Fatal(err)
	}
	from.Offset = offset
	return path, from, string(log[offset:])
}

// waitSweepApplied runs waitSweep from from while write adds to the log, and
// checks that the sweep it proves applied.
func waitSweepApplied(t *testing.T, path string, from Position, write func()) {
	t.Helper()
	type result struct {
		res SweepResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := waitSweep(context.Background(), path, from, 10*time.Second)
		done <- result{res, err}
	}()
	write()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkSweep(t, r.res, Applied, nil, nil)
}

// A sweep that fails and a retry that succeeds while waitSweep is waiting: the
// log grows under the follower as OpenSM writes it.
func TestWaitSweepFollowsGrowingLog(t *testing.T) {
	path, from, rest := writeFixtureToPosition(t, "errors-then-success.log")
	waitSweepApplied(t, path, from, func() {
		for len(rest) > 0 { // in pieces that cut lines and boxes anywhere
			n := min(700, len(rest))
			opensmtest.AppendLog(t, path, rest[:n])
			rest = rest[n:]
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// logrotate renames the log in the middle of the sweep, then OpenSM reopens
// it (SIGUSR1) and logs the rest of the sweep in the new file: the proof
// carries on across the two files.
func TestWaitSweepAcrossRotation(t *testing.T) {
	path, from, rest := writeFixtureToPosition(t, "applied.log")
	start := strings.Index(rest, "INITIATING HEAVY SWEEP")
	cut := start + strings.Index(rest[start:], "\n\n\n") + 3 // after the start box
	if start < 0 || cut < start {
		t.Fatal("applied.log: no heavy sweep after the position")
	}
	opensmtest.AppendLog(t, path, rest[:cut])
	waitSweepApplied(t, path, from, func() { opensmtest.AppendLog(t, path, rest[cut:]) })
}

// sweepText splits a fixture at its position.
func sweepText(t testing.TB, fixture string) (before, after string) {
	t.Helper()
	log, offset := loadFixture(t, fixture)
	return string(log[:offset]), string(log[offset:])
}

// cutAfterBox splits text after the box titled title.
func cutAfterBox(t testing.TB, text, title string) (string, string) {
	t.Helper()
	i := strings.Index(text, "* "+title+" *")
	if i < 0 {
		t.Fatalf("no box %q", title)
	}
	j := i + strings.Index(text[i:], "\n\n\n") + 3
	return text[:j], text[j:]
}

// watchStartedSweep writes applied.log up to the start box of its heavy
// sweep and watches that sweep from the position before it; it returns the
// watch (closed when the test ends), the log's path and the rest of the sweep.
func watchStartedSweep(t *testing.T) (w *SweepWatch, path, rest string) {
	t.Helper()
	before, sweep := sweepText(t, "applied.log")
	head, rest := cutAfterBox(t, sweep, titleHeavySweepStart)
	path = filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, before)
	from, err := LogPosition(path)
	if err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path, head) // the sweep started
	w = watchSweep(t, path, from)
	t.Cleanup(func() { w.Close() })
	return w, path, rest
}

// waitApplied waits for w's sweep, checks that it applied, and returns it.
func waitApplied(t *testing.T, w *SweepWatch) SweepResult {
	t.Helper()
	res, err := w.Wait(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkSweep(t, res, Applied, nil, nil)
	return res
}

// A heavy sweep longer than the timeout: the wait ends InProgress, and
// waiting on follows the same sweep to its end, one SIGHUP.
func TestSweepWatchFollowsASweepLongerThanTheTimeout(t *testing.T) {
	w, path, tail := watchStartedSweep(t) // then OpenSM stopped (SIGSTOP) or is slow
	ctx := context.Background()
	res, err := w.Wait(ctx, 200*time.Millisecond)
	if err != nil || !res.TimedOut || !res.InProgress || res.Outcome != Unknown {
		t.Fatalf("first wait: %+v, %v; want timed out, in progress", res, err)
	}
	// A second timeout with nothing new: still the same sweep.
	res, err = w.Wait(ctx, 200*time.Millisecond)
	if err != nil || !res.TimedOut || !res.InProgress || !strings.Contains(res.Detail, "did not end within 400ms") {
		t.Fatalf("second wait: %+v, %v; want timed out, in progress, after both waits", res, err)
	}
	opensmtest.AppendLog(t, path, tail) // SIGCONT: the sweep ends
	if res = waitApplied(t, w); res.TimedOut || res.InProgress {
		t.Errorf("%+v: an applied sweep is neither timed out nor in progress", res)
	}
}

// What a timeout says about the signal. Each case is the log after the
// position at the deadline.
func TestSweepTimeoutInProgress(t *testing.T) {
	_, sweep := sweepText(t, "applied.log")
	_, afterStart := cutAfterBox(t, sweep, titleHeavySweepStart)
	// An earlier sweep's steps after its discovery, as the position saw them.
	midEarlier, _ := cutAfterBox(t, afterStart, "HEAVY SWEEP COMPLETE")
	tests := []struct {
		name       string
		log        string
		inProgress bool
	}{
		// OpenSM logged nothing: the signal is lost or OpenSM is not master.
		{"nothing", "", false},
		// A sweep that started before the position is running: the SIGHUP
		// waits for it to end.
		{"earlier sweep running", midEarlier, true},
		// That sweep ended and none started after it: the signal was lost.
		{"earlier sweep ended", afterStart, false},
		// Our sweep started and has not ended.
		{"counted sweep running", beforeSubnetUp(t, sweep), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "opensm.log")
			opensmtest.AppendLog(t, path, "Nov 29 19:22:50 000001 [8507C6C0] 0x03 -> OpenSM 3.3.23\n")
			from, err := LogPosition(path)
			if err != nil {
				t.Fatal(err)
			}
			opensmtest.AppendLog(t, path, tt.log)
			res, err := waitSweep(context.Background(), path, from, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut || res.InProgress != tt.inProgress || res.Outcome != Unknown {
				t.Errorf("%+v: want timed out, Unknown, InProgress %v", res, tt.inProgress)
			}
		})
	}
}

// A sweep that ended with errors, then OpenSM's retry of it, still running
// at the deadline (a host drops OpenSM's Sets: every retry fails the same):
// the wait ends Failed and not in progress, so that the jobs are judged by
// their ports' tables at this deadline, not after the retries are followed.
func TestSweepTimeoutAfterAFailedSweep(t *testing.T) {
	_, failed := sweepText(t, "dropped-mads.log")
	_, applied := sweepText(t, "applied.log")
	retryRunning, _ := cutAfterBox(t, applied, titleHeavySweepStart)
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, "Nov 29 19:22:50 000001 [8507C6C0] 0x03 -> OpenSM 3.3.23\n")
	from, err := LogPosition(path)
	if err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path, failed+retryRunning)
	res, err := waitSweep(context.Background(), path, from, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Failed || !res.TimedOut || res.InProgress {
		t.Errorf("%+v: want timed out, Failed, not in progress", res)
	}
}

// beforeSubnetUp is text up to its SUBNET UP header line.
func beforeSubnetUp(t *testing.T, text string) string {
	t.Helper()
	i := strings.Index(text, " -> SUBNET UP\n")
	if i < 0 {
		t.Fatal("no SUBNET UP line")
	}
	return text[:strings.LastIndexByte(text[:i], '\n')+1]
}

// An earlier sweep that ends after the position, then the sweep the SIGHUP
// waited for: the wait follows both and proves the second.
func TestSweepWatchFollowsTheSweepQueuedBehindAnEarlierOne(t *testing.T) {
	_, sweep := sweepText(t, "applied.log")
	_, afterStart := cutAfterBox(t, sweep, titleHeavySweepStart)
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, "Nov 29 19:22:50 000001 [8507C6C0] 0x03 -> OpenSM 3.3.23\n")
	from, err := LogPosition(path)
	if err != nil {
		t.Fatal(err)
	}
	mid, end := cutAfterBox(t, afterStart, "HEAVY SWEEP COMPLETE")
	opensmtest.AppendLog(t, path, mid)
	w := watchSweep(t, path, from)
	defer w.Close()
	res, err := w.Wait(context.Background(), 200*time.Millisecond)
	if err != nil || !res.InProgress {
		t.Fatalf("%+v, %v: want the earlier sweep in progress", res, err)
	}
	opensmtest.AppendLog(t, path, end+sweep)
	res, err = w.Wait(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkSweep(t, res, Applied, nil, nil)
}

// A sweep whose end is in the log when the deadline passes, unread: it is
// read, and proves the change, rather than the deadline's verdict.
func TestSweepEndingAtTheDeadline(t *testing.T) {
	path, from := writeFixture(t, "applied.log")
	res, err := waitSweep(context.Background(), path, from, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	checkSweep(t, res, Applied, nil, nil)
}

// logrotate renames the log between two waits of a sweep longer than the
// timeout, and OpenSM logs the sweep's end in the new file: the watch follows
// it there.
func TestSweepWatchFollowsASweepAcrossRotationBetweenWaits(t *testing.T) {
	w, path, tail := watchStartedSweep(t)
	if res, err := w.Wait(context.Background(), 200*time.Millisecond); err != nil || !res.InProgress {
		t.Fatalf("first wait: %+v, %v; want in progress", res, err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path, tail)
	waitApplied(t, w)
}

// stepsLogged are the parts of applied.log's heavy sweep that a watch has
// seen when its wait begins, for the cases of TestSweepWatchPolling.
var stepsLogged = map[string]string{
	"started":    titleHeavySweepStart,
	"last steps": "LINKS PORTS CONFIGURED - SET LINKS TO ARMED STATE",
}

// While a watch waits for the end of a sweep, which is on the path of every
// job's completion, it looks at the log every millisecond when the end may
// be near: in the first 30 ms after it was taken (a small fabric's whole
// sweep) and once the sweep is in its last steps; every 5 ms otherwise (a
// large fabric's sweep waiting on its MADs). The looks are counted through
// the follower, and time is the watch's own: its naps added up, not the
// clock's, so the test times nothing. The tail has no wake to lend, as
// where inotify cannot be had (with one: TestSweepWatchWake).
func TestSweepWatchPolling(t *testing.T) {
	tests := []struct {
		name   string
		logged string        // what the sweep logged before the wait
		age    time.Duration // how long ago the watch was taken when it begins to wait
		endAt  time.Duration // when, in the wait, OpenSM logs the sweep's end
		every  time.Duration // how often the watch looks at the log meanwhile
	}{
		{"at once", "started", 0, 0, time.Millisecond},
		{"small fabric", "started", 0, 300 * time.Microsecond, time.Millisecond},
		{"small fabric's sweep", "started", 0, 7300 * time.Microsecond, time.Millisecond},
		{"end of the fast window", "started", 0, 29 * time.Millisecond, time.Millisecond},
		{"long sweep, its MADs", "started", 40 * time.Millisecond, 41 * time.Millisecond, 5 * time.Millisecond},
		{"long sweep, its last steps", "last steps", 300 * time.Millisecond, 6700 * time.Microsecond, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, path, rest := watchStartedSweep(t)
			if tt.logged != "started" {
				var steps string
				steps, rest = cutAfterBox(t, rest, stepsLogged[tt.logged])
				opensmtest.AppendLog(t, path, steps)
			}
			w.tail.noWake = true
			var slept time.Duration
			var naps, firstNapLooks, quietLooks int
			logged := false
			w.now = func() time.Time { return w.taken.Add(tt.age + slept) }
			w.nap = func(ctx context.Context, d time.Duration) error {
				naps++
				if naps == 1 {
					firstNapLooks = w.tail.follower.looks
				}
				slept += d
				if !logged && slept >= tt.endAt {
					quietLooks = w.tail.follower.looks - firstNapLooks
					opensmtest.AppendLog(t, path, rest) // OpenSM logs the rest of its sweep
					logged = true
				}
				return ctx.Err()
			}
			waitApplied(t, w)
			if !logged {
				t.Fatal("the watch ended before the sweep")
			}
			if late := slept - tt.endAt; late > tt.every {
				t.Errorf("the sweep's end was read %s after it was logged, want at most %s", late, tt.every)
			}
			// While the log had nothing new, one look after each nap: as
			// many as the naps of every tt.every until the end was logged.
			wantNaps := max(1, int((tt.endAt+tt.every-1)/tt.every))
			if quietLooks != wantNaps-1 {
				t.Errorf("%d looks at the quiet log before its end at %s, want %d (one every %s)",
					quietLooks, tt.endAt, wantNaps-1, tt.every)
			}
		})
	}
}

// A sweep is in its last steps (the watch looks more often) from its links'
// boxes to its end; a sweep that ended with errors is not, and neither is the
// retry that replaces it until it reaches those steps in turn.
func TestSweepWatchLastSteps(t *testing.T) {
	_, sweep := sweepText(t, "errors-then-success.log")
	tests := []struct {
		name   string
		upTo   func(t *testing.T) string // the log after the position so far
		ending bool
	}{
		{"the sweep started", func(t *testing.T) string {
			head, _ := cutAfterBox(t, sweep, titleHeavySweepStart)
			return head
		}, false},
		{"its links armed", func(t *testing.T) string {
			head, _ := cutAfterBox(t, sweep, "LINKS PORTS CONFIGURED - SET LINKS TO ARMED STATE")
			return head
		}, true},
		{"its links made active", func(t *testing.T) string {
			head, _ := cutAfterBox(t, sweep, "LINKS ARMED - SET LINKS TO ACTIVE STATE")
			return head
		}, true},
		{"errors during initialization", func(t *testing.T) string { // the retry at the next tick
			failed, _ := cutAfterBox(t, sweep, "ERRORS DURING INITIALIZATION")
			return failed
		}, false},
		{"errors during initialization, the retry started", func(t *testing.T) string {
			failed, retry := cutAfterBox(t, sweep, "ERRORS DURING INITIALIZATION")
			head, _ := cutAfterBox(t, retry, titleHeavySweepStart)
			return failed + head
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, err := ParseLog(strings.NewReader(tt.upTo(t)))
			if err != nil {
				t.Fatal(err)
			}
			var w sweepWatch
			for _, e := range entries {
				if res, done := w.observe(e); done {
					t.Fatalf("the sweep ended: %+v", res)
				}
			}
			if w.ending != tt.ending {
				t.Errorf("in its last steps: %v, want %v", w.ending, tt.ending)
			}
		})
	}
}
