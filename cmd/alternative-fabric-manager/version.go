package main

import (
	"fmt"
	"runtime/debug"
)

// version and commit are set at build time (the Dockerfile passes them):
//
//	go build -ldflags "-X main.version=1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/alternative-fabric-manager
//
// A plain go build in a Git checkout gets the commit from Go's build information.
var (
	version = "dev"
	commit  = ""
)

// versionString is what --version prints: "alternative-fabric-manager <version> (commit <commit>)".
func versionString() string {
	c := commit
	if c == "" {
		c = "unknown"
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	return fmt.Sprintf("alternative-fabric-manager %s (commit %s)", version, c)
}
