package fabricsim

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// WithSbinPath adds to env's PATH the directories Debian installs opensm and
// infiniband-diags into, which not every root PATH has: for a manager started
// by a harness, which runs OpenSM itself.
func WithSbinPath(env []string) []string {
	for i, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + path + ":/usr/sbin:/sbin"
			return env
		}
	}
	return append(env, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
}

// FreeAddr returns a loopback address whose port was free a moment ago, for a
// manager's API listener.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// ConfirmSwitches records the simulated fabric's switches as expected, as an
// operator does once on a new database (until then no job completes): it runs
// the manager's --confirm-switches once OpenSM's first sweep has written its
// subnet dump into configDir, for at most a minute. args are added to the
// command line (--fabric NAME for a fabric other than the default).
func ConfirmSwitches(ctx context.Context, binary, confPath, configDir string, args ...string) error {
	dump := filepath.Join(configDir, "opensm-subnet.lst")
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := os.Stat(dump)
		if err == nil {
			out, cerr := exec.CommandContext(ctx, binary,
				append([]string{"--config-file", confPath, "--confirm-switches"}, args...)...).CombinedOutput()
			if cerr == nil {
				return nil
			}
			// OpenSM rewrites the dump in place: a read can catch it half written.
			err = fmt.Errorf("--confirm-switches: %v: %s", cerr, out)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("confirm the fabric's switches: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
