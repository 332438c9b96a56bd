package fabricsim

import (
	"fmt"
	"net"
	"strings"
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
