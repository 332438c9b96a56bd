package testdb

import (
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// ServerURL is the server URL a test finds in env (AFM_TEST_POSTGRES_URL and
// the like). Without it the test skips, unless AFM_TEST_REQUIRE_ALL=1 (as in
// CI), where it fails: CI must never pass by skipping a server's tests.
func ServerURL(t testing.TB, env string) string {
	t.Helper()
	return testenv.Require(t, env, "starts a throwaway server")
}
