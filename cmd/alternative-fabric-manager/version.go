package main

import (
	"fmt"
	"runtime/debug"
)

// version, commit and date are set at build time (make release and the Dockerfile pass them):
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD) \
//	  -X main.date=$(git log -1 --format=%cI | TZ=UTC date -f - +%Y-%m-%dT%H:%M:%SZ)" ./cmd/alternative-fabric-manager
//
// The date is the commit's, never the time of the build, so that two builds of one commit are
// byte-identical. A plain go build in a Git checkout gets the commit and its time from the build
// information Go records (vcs.revision, vcs.time).
var (
	version = "dev"
	commit  = ""
	date    = ""
)

// versionString is what --version prints:
// "alternative-fabric-manager <version> (commit <commit>, built <date>)".
func versionString() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(version, commit, date, info)
}

// formatVersion fills what the linker was not given from Go's build information, and says
// "unknown" where neither has it (a build outside a checkout, or with -buildvcs=false).
func formatVersion(version, commit, date string, info *debug.BuildInfo) string {
	if info != nil {
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && commit == "":
				commit = s.Value
			case s.Key == "vcs.time" && date == "":
				date = s.Value
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	if date == "" {
		date = "unknown"
	}
	return fmt.Sprintf("alternative-fabric-manager %s (commit %s, built %s)", version, commit, date)
}
