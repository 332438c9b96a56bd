// Package testenv serves tests that depend on the world outside them: the
// address of a server, engine or image that `make test` (scripts/test.sh)
// starts and names in a variable, conditions that another goroutine or
// process makes true, and the output (SyncBuffer) that they write.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// Require returns the value of the variable name. When it is not set, the
// test skips, unless AFM_TEST_REQUIRE_ALL=1 (as in CI), where it fails: CI
// must never pass by skipping a test. makeTestDoes says what
// `make test` does to set it, such as "starts a throwaway server".
func Require(t testing.TB, name, makeTestDoes string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Missing(t, "%s is not set: run the tests with `make test`, which %s, and sets it", name, makeTestDoes)
	}
	return v
}

// Missing stops a test that cannot run here, saying why: it skips, unless
// AFM_TEST_REQUIRE_ALL=1 (as in CI), where it fails.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("AFM_TEST_REQUIRE_ALL") == "1" {
		t.Fatalf("AFM_TEST_REQUIRE_ALL=1, and "+format, args...)
	}
	t.Skipf(format, args...)
}

// WaitFor polls cond until it holds, and fails the test once within has
// passed: Await for a condition with nothing to show. It asks about a
// thousand times within the deadline: a condition that is costly to ask (a
// Docker API call) comes with a longer deadline, and is asked less often.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	Await(t, what, within, within/1000, func() (bool, error) { return cond(), nil })
}

// Await polls check every interval until it answers true, and fails the test
// once within has passed, saying what it waited for and what check last
// observed: the error check answers with false says what it saw instead (a
// job's status, the line the log ends with) or why it could not look. It
// polls instead of sleeping a fixed time: the deadline only keeps a broken
// test from hanging, so a slow machine makes a test slower, never failing.
// check may itself fail the test, on a state that can never become the one
// awaited.
func Await(t testing.TB, what string, within, interval time.Duration, check func() (bool, error)) {
	t.Helper()
	if err := Poll(within, interval, check); err != nil {
		t.Fatalf("gave up after %s waiting for %s: %v", within, what, err)
	}
}

// Poll is Await for a wait that may run out without failing the test: it
// answers nil once check answers true, or, once within has passed, an error
// holding check's last observation.
func Poll(within, interval time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		done, seen := check()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			if seen == nil {
				return errors.New("not seen")
			}
			return fmt.Errorf("last seen: %w", seen)
		}
		time.Sleep(interval)
	}
}

// Main is a TestMain for a test binary that is also started as a helper
// process of its own tests (a manager to kill, a process in namespaces of its
// own): when the variable env names one of helpers, it runs that helper, which
// ends the process itself; otherwise it runs the tests.
func Main(m *testing.M, env string, helpers map[string]func()) {
	if helper, ok := helpers[os.Getenv(env)]; ok {
		helper()
	}
	os.Exit(m.Run())
}
