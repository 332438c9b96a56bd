package fabricsim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LookPath finds a program in PATH and then in /usr/sbin and /sbin, where
// Debian installs opensm and the infiniband-diags tools but which are not on
// every user's PATH.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH, /usr/sbin or /sbin", name)
}

// umad2simCandidates are where distributions install libumad2sim.
var umad2simCandidates = []string{
	"/usr/lib/*/umad2sim/libumad2sim.so",
	"/usr/lib64/umad2sim/libumad2sim.so",
	"/usr/lib/umad2sim/libumad2sim.so",
}

func findUmad2sim() string {
	for _, pattern := range umad2simCandidates {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0]
		}
	}
	return ""
}

// checkPackages returns the path of libumad2sim, or an error naming the Debian
// packages to install for what is missing.
func checkPackages() (umad2sim string, err error) {
	var missing []string
	if _, err := LookPath("ibsim"); err != nil {
		missing = append(missing, "ibsim-utils")
	}
	if umad2sim = findUmad2sim(); umad2sim == "" {
		missing = append(missing, "libumad2sim0")
	}
	if _, err := LookPath("smpquery"); err != nil {
		missing = append(missing, "infiniband-diags")
	}
	if len(missing) > 0 {
		return "", errors.New(missingMessage(missing))
	}
	return umad2sim, nil
}

func missingMessage(packages []string) string {
	list := strings.Join(packages, " ")
	return fmt.Sprintf("missing Debian packages for the simulated fabric: %s (apt-get install %s)", list, list)
}
