package fabricsim

import (
	"context"
	"testing"
	"time"
)

// StartT starts a fabric in a temporary directory for the test and stops it
// when the test ends. A missing Debian package fails the test (it never
// skips: a suite that silently skips proves nothing) with the package's name.
func StartT(t testing.TB, o Options) *Fabric {
	t.Helper()
	o.Detach = false // ibsim must not outlive the test binary
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := Start(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatalf("start simulated fabric: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stop simulated fabric: %v", err)
		}
	})
	return f
}

// RequireProgram returns the path of program, or fails the test naming the
// Debian package that provides it.
func RequireProgram(t testing.TB, program, debianPackage string) string {
	t.Helper()
	p, err := LookPath(program)
	if err != nil {
		t.Fatalf("%v: install the Debian package %s", err, debianPackage)
	}
	return p
}
