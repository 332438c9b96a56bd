package opensm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

// countingTail is a tail of path from its beginning whose handler counts the
// entries it is handed.
func countingTail(t *testing.T, path string) (*Tail, *int) {
	t.Helper()
	n := new(int)
	tail, err := OpenTail(path, Position{}, func(Entry) { *n++ })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tail.Close() })
	return tail, n
}

// startedLine is the line OpenSM logs first when it starts.
const startedLine = "Nov 29 19:22:50 000001 [8507C6C0] 0x03 -> OpenSM 3.3.23\n"

// tailAfterStart is a counting tail of a log in which OpenSM has logged only
// its version line; it returns the tail, its handler's count and the path.
func tailAfterStart(t *testing.T) (*Tail, *int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, startedLine)
	tail, handled := countingTail(t, path)
	return tail, handled, path
}

// wantHandledOnce pumps the tail to the log's end, and fails the test unless
// its handler was handed each entry of log once.
func wantHandledOnce(t *testing.T, tail *Tail, handled *int, log string) {
	t.Helper()
	if err := tail.Pump(); err != nil {
		t.Fatal(err)
	}
	all, err := ParseLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if *handled != len(all) {
		t.Errorf("the handler was handed %d entries, the log holds %d", *handled, len(all))
	}
}

// A term's tail proves each fixture's sweep as waitSweep does, whether it had
// read the log up to the position when the watch began (pumped) or reads it
// only after (the lines before the position are then handed to the handlers,
// not to the watch), and hands every entry to its handlers once.
func TestTailWatchesSweeps(t *testing.T) {
	tests := []struct {
		fixture string
		timeout time.Duration
		want    Outcome
	}{
		{"applied.log", 10 * time.Second, Applied},
		{"two-starts.log", 10 * time.Second, Applied},
		{"in-flight.log", 10 * time.Second, Applied},
		{"standby.log", 10 * time.Second, LostMastership},
		{"rejected.log", 10 * time.Second, Rejected},
		{"mid-line.log", 300 * time.Millisecond, Unknown},
	}
	for _, tt := range tests {
		for _, pumped := range []bool{true, false} {
			t.Run(tt.fixture+map[bool]string{true: "/pumped", false: "/unread"}[pumped], func(t *testing.T) {
				before, after := sweepText(t, tt.fixture)
				path := filepath.Join(t.TempDir(), "opensm.log")
				opensmtest.AppendLog(t, path, before)
				tail, handled := countingTail(t, path)
				if pumped {
					if err := tail.Pump(); err != nil {
						t.Fatal(err)
					}
				}
				w, from := mustWatch(t, tail)
				defer w.Close()
				if from.Offset != int64(len(before)) {
					t.Fatalf("position %d, want the log's end %d", from.Offset, len(before))
				}
				opensmtest.AppendLog(t, path, after)
				wantOutcome(t, w, tt.timeout, tt.want, "the sweep")
				wantHandledOnce(t, tail, handled, before+after)
			})
		}
	}
}

// Two applies' watches on one tail, the second taken while the first still
// waits: each counts only the sweeps after its own position.
func TestTailWatchesInTurn(t *testing.T) {
	_, sweep := sweepText(t, "applied.log")
	tail, _, path := tailAfterStart(t)
	first, _ := mustWatch(t, tail)
	defer first.Close()
	opensmtest.AppendLog(t, path, sweep)
	second, _ := mustWatch(t, tail)
	defer second.Close()
	wantOutcome(t, first, 10*time.Second, Applied, "first")
	if res, err := second.Wait(context.Background(), 200*time.Millisecond); err != nil || !res.TimedOut || res.InProgress {
		t.Fatalf("second, before its sweep: %+v, %v; want timed out with no sweep", res, err)
	}
	opensmtest.AppendLog(t, path, sweep)
	wantOutcome(t, second, 10*time.Second, Applied, "second")
}

// What the log does between the position and the sweep's end: a truncation
// in place breaks the proof; a rotation by renaming does not, whether it came
// before the tail reached the position's file or after.
func TestTailWatchAcrossTruncationAndRotation(t *testing.T) {
	_, sweep := sweepText(t, "applied.log")
	head, end := cutAfterBox(t, sweep, titleHeavySweepStart)
	tests := []struct {
		name string
		// between runs after the watch began, with head logged; it returns
		// the file the sweep's end goes to.
		between func(t *testing.T, path string) string
		want    Outcome
	}{
		{"truncated in place", func(t *testing.T, path string) string {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			return path
		}, Unknown},
		{"rotated, end in the new file", func(t *testing.T, path string) string {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			return path
		}, Applied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "opensm.log")
			opensmtest.AppendLog(t, path, startedLine)
			tail, _ := countingTail(t, path)
			w, _ := mustWatch(t, tail)
			defer w.Close()
			opensmtest.AppendLog(t, path, head)
			if err := tail.Pump(); err != nil {
				t.Fatal(err)
			}
			next := tt.between(t, path)
			if err := tail.Pump(); err != nil { // the tail sees what happened
				t.Fatal(err)
			}
			opensmtest.AppendLog(t, next, end)
			wantOutcome(t, w, 10*time.Second, tt.want, "the sweep")
		})
	}
}

// The log was rotated before the apply took its position, and the tail has
// not switched to the new file yet: what OpenSM still logs into the old file
// comes before the position, the sweep in the new file after it.
func TestTailWatchPositionInTheNewFile(t *testing.T) {
	before, sweep := sweepText(t, "applied.log")
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, before)
	tail, _ := countingTail(t, path)
	if err := tail.Pump(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path, "Nov 29 19:22:50 000001 [8507C6C0] 0x03 -> OpenSM reopened its log\n")
	w, _ := mustWatch(t, tail)
	defer w.Close()
	opensmtest.AppendLog(t, path+".1", sweep) // before the position: proves nothing
	if res, err := w.Wait(context.Background(), 200*time.Millisecond); err != nil || res.Outcome != Unknown || res.InProgress {
		t.Fatalf("with the old file's sweep: %+v, %v; want nothing proven", res, err)
	}
	opensmtest.AppendLog(t, path, sweep)
	wantOutcome(t, w, 10*time.Second, Applied, "the sweep")
}

// mustWatch starts watching the tail's next sweep; the caller closes it.
func mustWatch(t *testing.T, tail *Tail) (*SweepWatch, Position) {
	t.Helper()
	w, from, err := tail.WatchSweep()
	if err != nil {
		t.Fatal(err)
	}
	return w, from
}

// wantOutcome waits at most timeout for w's sweep, and fails the test unless
// its outcome is want; what names the watch in the failure.
func wantOutcome(t *testing.T, w *SweepWatch, timeout time.Duration, want Outcome, what string) {
	t.Helper()
	if res, err := w.Wait(context.Background(), timeout); err != nil || res.Outcome != want {
		t.Fatalf("%s: %+v, %v; want %s", what, res, err, want)
	}
}

// A tail reads each byte once, however many watches and pumps share it, as
// a term uses it: a watch per apply, waited for, and pumps between applies
// (the gates' polls) reading the lines logged between sweeps; and a tail
// opened later at the log's start reads it all once too.
func TestTailReadsEachByteOnce(t *testing.T) {
	_, sweep := sweepText(t, "applied.log")
	path := filepath.Join(t.TempDir(), "opensm.log")
	tail, handled := countingTail(t, path)
	for range 3 {
		w, _ := mustWatch(t, tail)
		opensmtest.AppendLog(t, path, sweep)
		wantOutcome(t, w, 10*time.Second, Applied, "the sweep")
		w.Close()
		if err := tail.Pump(); err != nil {
			t.Fatal(err)
		}
		opensmtest.AppendLog(t, path, startedLine) // a line between sweeps, read by the next poll
		if err := tail.Pump(); err != nil {
			t.Fatal(err)
		}
	}
	fresh, again := countingTail(t, path)
	if err := fresh.Pump(); err != nil {
		t.Fatal(err)
	}
	if err := tail.Pump(); err != nil {
		t.Fatal(err)
	}
	if *handled != *again || *handled == 0 {
		t.Errorf("the term's tail handed %d entries, a fresh tail of the same log %d; want each entry once", *handled, *again)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, tl := range map[string]*Tail{"the term's tail": tail, "a fresh tail": fresh} {
		if got := tl.follower.read; got != fi.Size() {
			t.Errorf("%s read %d bytes of a %d-byte log, want each byte once", name, got, fi.Size())
		}
	}
}

// Another reader pumps the tail while a sweep is waited for (the freeze
// watch does, beside the apply): the entries it reads reach the sweep's
// watch all the same, and the handler sees each once.
func TestTailPumpedByAnotherReaderDuringAWait(t *testing.T) {
	_, sweep := sweepText(t, "applied.log")
	tail, handled, path := tailAfterStart(t)
	w, _ := mustWatch(t, tail)
	defer w.Close()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := tail.Pump(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	lines := strings.SplitAfter(sweep, "\n")
	for i := 0; i < len(lines); i += 7 { // in pieces, as OpenSM writes
		opensmtest.AppendLog(t, path, strings.Join(lines[i:min(i+7, len(lines))], ""))
	}
	res, err := w.Wait(context.Background(), 10*time.Second)
	close(stop)
	<-stopped
	if err != nil || res.Outcome != Applied {
		t.Fatalf("%+v, %v; want applied", res, err)
	}
	wantHandledOnce(t, tail, handled, startedLine+sweep)
}

// A reader that pumps after the tail was closed (the freeze watch at the end
// of its term) reads nothing and opens no file again.
func TestTailPumpAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, masterLine)
	tail, handled := countingTail(t, path)
	if err := tail.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tail.Pump(); err != nil || *handled != 0 || tail.follower.f != nil {
		t.Errorf("Pump after Close: %v, %d entries handed out, file open %v; want nothing", err, *handled, tail.follower.f != nil)
	}
}

// One Pump hands the handlers what the log holds after a truncation in place
// and new lines, when the Pump before it ended on a look that found nothing
// new: the truncation is found at the Pump's first look, and the new lines
// at the next.
func TestTailPumpAfterTruncation(t *testing.T) {
	tail, handled, path := tailAfterStart(t)
	if err := tail.Pump(); err != nil {
		t.Fatal(err)
	}
	if *handled != 1 {
		t.Fatalf("handed %d entries of the first line, want 1", *handled)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path, "Nov 29 19:22:51 000001 [8507C6C0] 0x02 -> SUBNET UP\n")
	if err := tail.Pump(); err != nil {
		t.Fatal(err)
	}
	if *handled != 2 {
		t.Errorf("handed %d entries, want the new file's line after the first", *handled)
	}
}
