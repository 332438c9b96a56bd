package testdb

import (
	"context"
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

// Fresh is a new, empty database on the server a test finds in env (see
// ServerURL), named prefix and random digits; it is dropped when t ends.
func Fresh(t testing.TB, env, prefix string) Database {
	t.Helper()
	server := ServerURL(t, env)
	name, err := RandomName(prefix)
	if err != nil {
		t.Fatal(err)
	}
	db, err := Create(t.Context(), server, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Drop(context.Background(), server, name) })
	return db
}
