package opensm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

// messageStart is the start of a message's header line, where OpenSM (with
// force_log_flush) begins one write to its log.
var messageStart = regexp.MustCompile(`(?m)^[A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d \d{6} \[`)

// writesOf splits a stretch of OpenSM's log into the writes OpenSM made of
// it: a message each, its header line and its box's lines.
func writesOf(text string) []string {
	var writes []string
	starts := messageStart.FindAllStringIndex(text, -1)
	if len(starts) == 0 || starts[0][0] > 0 {
		starts = append([][]int{{0, 0}}, starts...)
	}
	for i, s := range starts {
		end := len(text)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		writes = append(writes, text[s[0]:end])
	}
	return writes
}

// writeTitle is the title of the box a write holds, if any.
func writeTitle(write string) string {
	for _, line := range strings.Split(write, "\n") {
		if t := strings.Trim(line, "* "); strings.HasPrefix(line, "****") && t != "" {
			return t
		}
	}
	return ""
}

// chattyEnd inserts n lines, each a write, between a sweep's links' boxes and
// its end: a log written on near the end, more than maxWakes times.
func chattyEnd(n int) func(string) string {
	return func(sweep string) string {
		head, end, _ := strings.Cut(sweep, "Nov 29 19:22:59 004911")
		var lines strings.Builder
		for i := range n {
			fmt.Fprintf(&lines, "Nov 29 19:22:59 0047%02d [8507C6C0] 0x01 -> osm_link_mgr: ERR 4207: line %d\n", i%100, i)
		}
		return head + lines.String() + "Nov 29 19:22:59 004911" + end
	}
}

// A watch is woken by OpenSM's writes to the log (logWake) throughout its
// sweep, and looks at the log no sooner than its gap after its last look,
// but near the sweep's end (its switches configured), where it looks at
// once, up to maxWakes times. OpenSM writes the sweep's log one message at
// a time, here one each time the watch waits for a write, within its gap
// (the test's clock stands still): the test counts the naps that kept the
// gap, and the watch's looks. Until a write woke it, the watch looks again
// after its gap even without one; then after provenPollInterval.
func TestSweepWatchWake(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		edit    func(sweep string) string // the sweep as OpenSM logs it here; nil: the fixture's
		want    Outcome
	}{
		{"applied", "applied.log", nil, Applied},
		{"rejected", "rejected.log", nil, Rejected},
		{"qos rejected", "qos-rejected.log", nil, QoSRejected},
		{"a table full", "pkey-table-full.log", nil, Applied},
		{"errors, then a retry", "errors-then-success.log", nil, Applied},
		{"standby before the end", "standby.log", nil, LostMastership},
		{"written on near the end", "applied.log", chattyEnd(100), Applied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, sweep := sweepText(t, tt.fixture)
			if tt.edit != nil {
				sweep = tt.edit(sweep)
			}
			writes := writesOf(sweep)
			path := filepath.Join(t.TempDir(), "opensm.log")
			opensmtest.AppendLog(t, path, before)
			from, err := LogPosition(path)
			if err != nil {
				t.Fatal(err)
			}
			w := watchSweep(t, path, from)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a wake that never comes fails, not hangs
			defer cancel()

			written, naps, timeouts := 0, 0, 0
			var napped []int // the writes each nap followed
			write := func() {
				if written == len(writes) {
					t.Errorf("the watch waits after the sweep's last write")
					cancel()
					return
				}
				opensmtest.AppendLog(t, path, writes[written])
				written++
			}
			w.now = func() time.Time { return w.taken } // within its first watchFastFor: its gap is 1 ms
			w.nap = func(ctx context.Context, d time.Duration) error {
				naps++
				napped = append(napped, written)
				if d != watchPollInterval {
					t.Errorf("napped %s, want the gap's %s", d, watchPollInterval)
				}
				return ctx.Err()
			}
			w.waitWake = func(wk *logWake, ctx context.Context, d time.Duration) (bool, error) {
				if want := wantWakeWait(written); d != want {
					t.Errorf("waited for write %d at most %s, want %s", written+1, d, want)
				}
				write()
				woken, err := wk.wait(ctx, time.Hour) // woken by the write, or never
				if !woken {
					timeouts++
				}
				return woken, err
			}
			res, err := w.Wait(ctx, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.want {
				t.Errorf("outcome %q (%s), want %q", res.Outcome, res.Detail, tt.want)
			}
			if timeouts != 0 {
				t.Errorf("%d waits for a write timed out; want every one woken", timeouts)
			}
			if want := wantNapped(writes[:written]); fmt.Sprint(napped) != fmt.Sprint(want) {
				t.Errorf("napped after the writes %v, want %v", napped, want)
			}
			// One look at the start and one after the arming, two for each
			// write (the one that reads it, and the one that finds no more).
			if looks, want := w.tail.follower.looks, 2+2*written; looks != want {
				t.Errorf("%d looks at the log for %d writes, want %d", looks, written, want)
			}
			w.Close()
			if w.tail.wakeLent {
				t.Error("the watch did not give the tail's wake back")
			}
		})
	}
}

// wantWakeWait is how long a watch waits for write n+1 of a sweep: its
// gap until a write has woken it, provenPollInterval after.
func wantWakeWait(n int) time.Duration {
	if n == 0 {
		return watchPollInterval
	}
	return provenPollInterval
}

// wantNapped is the writes after which a watch that each of writes woke
// keeps its gap before it looks (the count of writes before the nap): every
// one but those near the sweep's end (after a box of nearEndSteps, until a
// new start or errors end it), of which maxWakes are looked at at once.
func wantNapped(writes []string) []int {
	var napped []int
	near, nearWakes := false, 0
	for i, wr := range writes {
		if near && nearWakes < maxWakes {
			nearWakes++
		} else {
			napped = append(napped, i+1)
		}
		switch title := writeTitle(wr); {
		case title == titleHeavySweepStart || strings.Contains(wr, msgInitErrors):
			near = false
		case slices.Contains(nearEndSteps, title):
			near = true
		}
	}
	return napped
}

// A watch waiting for a write near its sweep's end returns when its context
// ends, as it does polling.
func TestSweepWatchWakeCancelled(t *testing.T) {
	w, path, rest := watchStartedSweep(t)
	near, _ := cutAfterBox(t, rest, "ALIAS GUIDS CONFIGURED")
	opensmtest.AppendLog(t, path, near)
	ctx, cancel := context.WithCancel(context.Background())
	w.waitWake = func(wk *logWake, ctx context.Context, d time.Duration) (bool, error) {
		cancel()
		return wk.wait(ctx, time.Hour)
	}
	if _, err := w.Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// A watch whose wake fails, closed with its tail (the term ended while it
// waited) or broken, polls on: it neither spins on the wake nor is lent one
// again, and no later watch of the tail is.
func TestSweepWatchWakeFails(t *testing.T) {
	tests := []struct {
		name string
		fail func(w *SweepWatch, wk *logWake, ctx context.Context) (bool, error)
	}{
		{"closed with its tail", func(w *SweepWatch, wk *logWake, ctx context.Context) (bool, error) {
			w.tail.mu.Lock() // as Tail.Close does, which also keeps it from lending another
			w.tail.wake.close()
			w.tail.wake, w.tail.noWake = nil, true
			w.tail.mu.Unlock()
			return wk.wait(ctx, time.Hour)
		}},
		{"broken", func(*SweepWatch, *logWake, context.Context) (bool, error) {
			return false, errors.New("inotify: broken")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, path, rest := watchStartedSweep(t)
			near, end := cutAfterBox(t, rest, "ALIAS GUIDS CONFIGURED")
			opensmtest.AppendLog(t, path, near)
			waits, naps := 0, 0
			w.waitWake = func(wk *logWake, ctx context.Context, d time.Duration) (bool, error) {
				waits++
				if waits == 1 {
					return tt.fail(w, wk, ctx)
				}
				return wk.wait(ctx, time.Hour)
			}
			w.nap = func(ctx context.Context, d time.Duration) error {
				naps++
				opensmtest.AppendLog(t, path, end)
				return nil
			}
			waitApplied(t, w)
			// A closed wake's disarming may wake the watch once more before
			// its close ends the wait.
			if waits < 1 || waits > 2 || naps != 1 {
				t.Errorf("%d waits for a write, %d naps; want one or two, then one nap", waits, naps)
			}
			if wk := w.tail.lendWake(); wk != nil || w.tail.wake != nil {
				t.Error("the tail lends a wake again")
			}
		})
	}
}

// The log rotated while a watch is woken by its writes: the rename wakes it
// (the inotify watch stays on the old file), and the follower finds the
// sweep's end in the new file.
func TestSweepWatchWakeAcrossRotation(t *testing.T) {
	w, path, rest := watchStartedSweep(t)
	near, end := cutAfterBox(t, rest, "ALIAS GUIDS CONFIGURED")
	opensmtest.AppendLog(t, path, near)
	waits := 0
	w.waitWake = func(wk *logWake, ctx context.Context, d time.Duration) (bool, error) {
		waits++
		if waits == 1 { // logrotate, then OpenSM reopens its log (SIGUSR1)
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			opensmtest.AppendLog(t, path, end)
		}
		return wk.wait(ctx, d)
	}
	waitApplied(t, w)
	if waits == 0 {
		t.Error("the watch was never woken by the log's writes")
	}
}

// A tail lends its wake to one watch at a time: another watch of it, in
// turn or at once, polls until the wake is given back.
func TestTailLendsItsWakeToOneWatch(t *testing.T) {
	_, _, path := tailAfterStart(t)
	tail := newTail(path, Position{})
	defer tail.Close()
	first := tail.lendWake()
	if first == nil {
		t.Fatal("no wake lent (no inotify here?)")
	}
	if again := tail.lendWake(); again != nil {
		t.Error("a second watch was lent the wake the first holds")
	}
	tail.returnWake(first)
	if again := tail.lendWake(); again != first {
		t.Error("the wake given back was not lent again")
	}
}

// A wake is proven by a write to its file that woke a wait, and stays so
// when armed on that file again (a large sweep's first stretch is quiet:
// its watch trusts the wake from the start); a rename of the file, or an
// arming on another file at the path, unproves it.
func TestLogWakeProven(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, startedLine)
	w, err := newLogWake()
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	ctx := context.Background()
	step := func(what string, do func(), want bool) {
		t.Helper()
		do()
		if w.proven != want {
			t.Errorf("%s: proven %t, want %t", what, w.proven, want)
		}
	}
	arm := func() {
		if err := w.arm(path); err != nil {
			t.Fatal(err)
		}
	}
	woken := func(write func()) func() {
		return func() {
			write()
			if ok, err := w.wait(ctx, time.Minute); !ok || err != nil {
				t.Fatalf("not woken: %v", err)
			}
		}
	}
	appendLine := func() { opensmtest.AppendLog(t, path, startedLine) }
	step("armed", arm, false)
	step("a write", woken(appendLine), true)
	step("disarmed and armed again", func() { w.disarm(); arm() }, true)
	step("the file renamed", woken(func() {
		if err := os.Rename(path, path+".1"); err != nil {
			t.Fatal(err)
		}
	}), false)
	step("armed on the new file", func() { appendLine(); w.disarm(); arm() }, false)
	step("a write to it", woken(appendLine), true)
	step("armed on yet another file", func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		appendLine()
		w.disarm()
		arm()
	}, false)
}
