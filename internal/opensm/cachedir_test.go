package opensm

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each OpenSM the process driver starts gets the cache directory its
// supervisor was given, created private, unless its environment file names
// one; without either it keeps OpenSM's own. Two OpenSMs on one host on two
// subnets would otherwise share guid2lid and guid2mkey.
func TestProcessSetsTheCacheDirectory(t *testing.T) {
	tests := []struct {
		name     string
		cacheDir string // under the test's directory; "" for none
		envFile  string // the environment file's OSM_CACHE_DIR; "" for no file
		want     string // what OpenSM sees, under the test's directory ("unset": nothing)
	}{
		{name: "set by the supervisor", cacheDir: "fabric/cache", want: "fabric/cache"},
		{name: "the environment file's wins", cacheDir: "fabric/cache", envFile: "sim", want: "sim"},
		{name: "none configured", want: "unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("OSM_CACHE_DIR", "") // the manager's own environment sets none
			os.Unsetenv("OSM_CACHE_DIR")
			out := filepath.Join(dir, "seen")
			// A stand-in that records the cache directory it was started with.
			script := filepath.Join(dir, "opensm")
			text := fmt.Sprintf("#!/bin/sh\necho \"${OSM_CACHE_DIR-unset}\" >%q\nexec sleep 3600\n", out)
			if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := ProcessConfig{Command: []string{"/bin/sh", script}, LogFile: filepath.Join(dir, "log"),
				Logger: slog.New(slog.DiscardHandler)}
			if tt.cacheDir != "" {
				cfg.CacheDir = filepath.Join(dir, tt.cacheDir)
			}
			if tt.envFile != "" {
				cfg.EnvFile = filepath.Join(dir, "env")
				line := "OSM_CACHE_DIR=" + filepath.Join(dir, tt.envFile) + "\n"
				if err := os.WriteFile(cfg.EnvFile, []byte(line), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			startProcess(t, NewProcess(cfg))
			var seen string
			waitFor(t, "the stand-in to record its cache directory", func() bool {
				b, err := os.ReadFile(out)
				seen = strings.TrimSpace(string(b))
				return err == nil && seen != ""
			})
			want := tt.want
			if want != "unset" {
				want = filepath.Join(dir, want)
			}
			if seen != want {
				t.Errorf("OpenSM's OSM_CACHE_DIR = %q, want %q", seen, want)
			}
			if tt.cacheDir == "" {
				return
			}
			fi, err := os.Stat(cfg.CacheDir)
			switch {
			case tt.envFile != "" && err == nil:
				t.Errorf("the supervisor created %s, which the environment file overrides", cfg.CacheDir)
			case tt.envFile == "" && err != nil:
				t.Errorf("the cache directory was not created: %v", err)
			case tt.envFile == "" && fi.Mode().Perm() != 0o700:
				t.Errorf("the cache directory's mode is %v, want 0700 (guid2mkey holds M_Keys)", fi.Mode().Perm())
			}
		})
	}
}

func TestCacheDirOf(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{nil, "/var/cache/opensm"},
		{[]string{"PATH=/bin", "OSM_CACHE_DIR=/a", "OSM_CACHE_DIR=/b"}, "/b"},
		{[]string{"OSM_CACHE_DIRX=/a"}, "/var/cache/opensm"},
	}
	for _, tt := range tests {
		if got := CacheDirOf(tt.env); got != tt.want {
			t.Errorf("CacheDirOf(%q) = %q, want %q", tt.env, got, tt.want)
		}
	}
}
