package testdb

import (
	"os"
	"testing"
)

// ServerURL is the server URL a test finds in env (AFM_TEST_POSTGRES_URL and
// the like). Without it the test skips, unless AFM_TEST_REQUIRE_ALL=1 (as in
// CI), where it fails: CI must never pass by skipping a server's tests.
func ServerURL(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("AFM_TEST_REQUIRE_ALL") == "1" {
			t.Fatalf("%s is not set, and AFM_TEST_REQUIRE_ALL=1: run the tests with `make test`, which starts the servers", env)
		}
		t.Skipf("%s is not set (make test starts a throwaway server and sets it)", env)
	}
	return v
}
