package opensm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// Near a sweep's end (its switches configured) a watch is woken by OpenSM's
// writes to the log (logWake) instead of polling, and only then: OpenSM
// writes the sweep's log one message at a time, here one each time the
// watch waits, and the test counts how the watch waited for each (a nap,
// polling; a wake) and its looks at the log. Every write while armed wakes
// the watch, which then looks at once; woken maxWakes times it polls.
func TestSweepWatchWake(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		edit    func(sweep string) string // the sweep as OpenSM logs it here; nil: the fixture's
		want    Outcome
		armings []string // the box last written before each time the watch was woken by writes
		polled  int      // writes made while the watch polled, after it first was woken by writes
	}{
		{"applied", "applied.log", nil, Applied, []string{"SWITCHES CONFIGURED FOR UNICAST"}, 0},
		{"rejected", "rejected.log", nil, Rejected, []string{"SWITCHES CONFIGURED FOR UNICAST"}, 0},
		{"qos rejected", "qos-rejected.log", nil, QoSRejected, []string{"SWITCHES CONFIGURED FOR UNICAST"}, 0},
		{"a table full", "pkey-table-full.log", nil, Applied, []string{"SWITCHES CONFIGURED FOR UNICAST"}, 0},
		// The failed sweep's retry logs its discovery: polled, until near its end.
		{"errors, then a retry", "errors-then-success.log", nil, Applied,
			[]string{"SWITCHES CONFIGURED FOR UNICAST", "SWITCHES CONFIGURED FOR UNICAST"}, 18},
		{"standby before the end", "standby.log", nil, LostMastership, nil, 0},
		{"written on near the end", "applied.log", chattyEnd(100), Applied,
			[]string{"SWITCHES CONFIGURED FOR UNICAST"}, 105 - maxWakes}, // 4 boxes, 100 lines, the end
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

			written, naps, waits, timeouts, polled := 0, 0, 0, 0, 0
			var armings []string
			write := func() {
				if written == len(writes) {
					t.Errorf("the watch waits after the sweep's last write")
					cancel()
					return
				}
				opensmtest.AppendLog(t, path, writes[written])
				written++
			}
			armed := false
			w.nap = func(ctx context.Context, d time.Duration) error {
				naps++
				if len(armings) > 0 {
					polled++
				}
				armed = false
				write()
				return ctx.Err()
			}
			w.now = func() time.Time { return w.taken } // within its first watchFastFor: polled every 1 ms
			w.waitWake = func(wk *logWake, ctx context.Context, d time.Duration) (bool, error) {
				if d != watchPollInterval {
					t.Errorf("woken by a write or after %s, want the poll's %s beside the wake", d, watchPollInterval)
				}
				if !armed {
					armed = true
					armings = append(armings, lastTitle(writes[:written]))
				}
				waits++
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
			if strings.Join(armings, "; ") != strings.Join(tt.armings, "; ") {
				t.Errorf("woken by writes from the boxes %q on, want %q", armings, tt.armings)
			}
			if timeouts != 0 || w.wakes != waits-timeouts {
				t.Errorf("%d waits for a write, %d woken by it, %d timed out; want every one woken", waits, w.wakes, timeouts)
			}
			if polled != tt.polled {
				t.Errorf("%d writes polled for once woken by writes, want %d", polled, tt.polled)
			}
			// One look at the start and after each arming, two for each
			// write (the one that reads it, and the one that finds no more).
			if looks, want := w.tail.follower.looks, 1+len(armings)+2*written; looks != want {
				t.Errorf("%d looks at the log for %d writes, want %d", looks, written, want)
			}
			w.Close()
			if w.tail.wakeLent {
				t.Error("the watch did not give the tail's wake back")
			}
		})
	}
}

// lastTitle is the title of the last box among writes.
func lastTitle(writes []string) string {
	for i := len(writes) - 1; i >= 0; i-- {
		if t := writeTitle(writes[i]); t != "" {
			return t
		}
	}
	return ""
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
