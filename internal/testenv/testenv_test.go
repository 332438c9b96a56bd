package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that notes how a test would have ended: like
// testing.T, Fatalf and Skipf end the goroutine that calls them.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// asTest runs f in a goroutine of its own, as a test's body runs, so that
// the recorder's Fatalf and Skipf end f and not the test itself.
func asTest(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestRequire(t *testing.T) {
	const name = "AFM_TESTENV_TEST_VARIABLE"
	tests := []struct {
		value, requireAll string
		wantFatal         bool
		wantSkip          bool
	}{
		{value: "unix:///run/docker.sock", requireAll: "1"},
		{value: "", requireAll: "1", wantFatal: true},
		{value: "", requireAll: "", wantSkip: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("value=%q,require_all=%q", tt.value, tt.requireAll), func(t *testing.T) {
			t.Setenv(name, tt.value)
			t.Setenv("AFM_TEST_REQUIRE_ALL", tt.requireAll)
			r := &recorder{TB: t}
			var got string
			asTest(func() { got = Require(r, name, "starts a server") })
			if tt.value != "" && (got != tt.value || r.fatal != "" || r.skip != "") {
				t.Errorf("Require = %q, fatal %q, skip %q; want %q", got, r.fatal, r.skip, tt.value)
			}
			if (r.fatal != "") != tt.wantFatal || (r.skip != "") != tt.wantSkip {
				t.Errorf("fatal %q, skip %q; want fatal %v, skip %v", r.fatal, r.skip, tt.wantFatal, tt.wantSkip)
			}
			for _, msg := range []string{r.fatal, r.skip} {
				if msg != "" && (!strings.Contains(msg, name) || !strings.Contains(msg, "starts a server")) {
					t.Errorf("%q does not name the variable and what sets it", msg)
				}
			}
		})
	}
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var asked atomic.Int32
	r := &recorder{TB: t}
	asTest(func() {
		WaitFor(r, "the third ask", 30*time.Second, func() bool { return asked.Add(1) == 3 })
	})
	if r.fatal != "" || asked.Load() != 3 {
		t.Errorf("asked %d times, failure %q; want 3 asks and no failure", asked.Load(), r.fatal)
	}
}

func TestWaitForFailsAtTheDeadline(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	asTest(func() {
		WaitFor(r, "what never comes", 50*time.Millisecond, func() bool { return false })
	})
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("gave up after %s, before the deadline", waited)
	}
	if !strings.Contains(r.fatal, "what never comes") {
		t.Errorf("failure %q does not say what was awaited", r.fatal)
	}
}

// Await's failure says what was awaited and what was last seen instead.
func TestAwaitFailsWithTheLastObservation(t *testing.T) {
	var asked atomic.Int32
	r := &recorder{TB: t}
	asTest(func() {
		Await(r, "the job to complete", 50*time.Millisecond, time.Millisecond, func() (bool, error) {
			return false, fmt.Errorf("status Running, ask %d", asked.Add(1))
		})
	})
	last := fmt.Sprintf("status Running, ask %d", asked.Load())
	if !strings.Contains(r.fatal, "the job to complete") || !strings.Contains(r.fatal, last) {
		t.Errorf("failure %q does not say what was awaited and the last observation %q", r.fatal, last)
	}
}

func TestPollAnswersOnceTheCheckHolds(t *testing.T) {
	var asked atomic.Int32
	err := Poll(30*time.Second, time.Millisecond, func() (bool, error) {
		n := asked.Add(1)
		return n == 3, fmt.Errorf("ask %d", n)
	})
	if err != nil || asked.Load() != 3 {
		t.Errorf("Poll = %v after %d asks; want nil after 3", err, asked.Load())
	}
}
