package fabricsim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		if t.Failed() {
			t.Log(f.ibsimAtEnd())
		}
		if err := f.Stop(); err != nil {
			t.Errorf("stop simulated fabric: %v", err)
		}
	})
	return f
}

// ibsimAtEnd says, for a test that failed, whether the fabric's ibsim ran
// to the test's end, how it ended if not, and the end of its output: a
// simulator gone mid-test fails its clients' attaches ("connection
// refused" on its control socket) as if the fabric had refused them.
func (f *Fabric) ibsimAtEnd() string {
	state := "ibsim ran to the test's end"
	if f.exited != nil && !f.IbsimRunning() {
		state = "ibsim had ended before the test did: " + f.exitState
	}
	path := filepath.Join(f.Dir, ibsimLogFileName)
	out, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("%s; its output: %v", state, err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return fmt.Sprintf("%s; the last lines of %s:\n%s", state, path, strings.Join(lines[max(0, len(lines)-20):], "\n"))
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
