package main

import (
	"runtime/debug"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	vcs := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
	}}
	tests := []struct {
		name                  string
		version, commit, date string
		info                  *debug.BuildInfo
		want                  string
	}{
		{"release: the linker's values win over Go's", "v0.1.0", "fedcba9876543210fedcba9876543210fedcba98", "2026-12-01T08:00:00Z", vcs,
			"alternative-fabric-manager v0.1.0 (commit fedcba9876543210fedcba9876543210fedcba98, built 2026-12-01T08:00:00Z)"},
		{"plain go build in a checkout: what Go records", "dev", "", "", vcs,
			"alternative-fabric-manager dev (commit 0123456789abcdef0123456789abcdef01234567, built 2026-11-30T12:00:00Z)"},
		{"no build information", "dev", "", "", nil,
			"alternative-fabric-manager dev (commit unknown, built unknown)"},
		{"-buildvcs=false without ldflags", "dev", "", "", &debug.BuildInfo{},
			"alternative-fabric-manager dev (commit unknown, built unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatVersion(tt.version, tt.commit, tt.date, tt.info); got != tt.want {
				t.Errorf("formatVersion = %q, want %q", got, tt.want)
			}
		})
	}
}
