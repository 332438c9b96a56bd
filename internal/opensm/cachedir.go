package opensm

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// cacheDirVar is the variable OpenSM reads its cache directory from: where it
// keeps guid2lid (the LIDs it gave each port) and guid2mkey (the M_Key it set
// on each port). Without it, /var/cache/opensm.
const cacheDirVar = "OSM_CACHE_DIR"

// WithCacheDir returns envFile's variables (an environment file's lines)
// with OSM_CACHE_DIR set to dir, created (private: guid2mkey holds M_Keys)
// if missing. Two OpenSMs on one host, each on its own subnet, must not share
// a cache: one would give its ports the other's LIDs and try the other's
// M_Keys. A cache directory the environment file names wins, as it always
// has (the simulated fabric puts its cache there); "" leaves OpenSM's own.
func WithCacheDir(dir string, envFile []string) ([]string, error) {
	if dir == "" || slices.ContainsFunc(envFile, func(kv string) bool { return strings.HasPrefix(kv, cacheDirVar+"=") }) {
		return envFile, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opensm: cache directory: %w", err)
	}
	// First: a later entry wins, and the file's lines come after.
	return append([]string{cacheDirVar + "=" + dir}, envFile...), nil
}

// CacheDirOf is the cache directory of an OpenSM run with env (as its
// driver builds it, WithCacheDir included): its last OSM_CACHE_DIR, else
// OpenSM's default.
func CacheDirOf(env []string) string {
	for _, kv := range slices.Backward(env) {
		if v, ok := strings.CutPrefix(kv, cacheDirVar+"="); ok {
			return v
		}
	}
	return "/var/cache/opensm"
}
