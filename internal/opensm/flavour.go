package opensm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"regexp"
	"strconv"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// versionPattern matches the line "opensm --version" prints, and that OpenSM
// logs at start: "OpenSM 3.3.23" upstream, "OpenSM 5.21.12.MLNX20250617.f74e01b8"
// for NVIDIA's.
var versionPattern = regexp.MustCompile(`(?m)^OpenSM ([0-9]+)\.([0-9]+)\S*\s*$`)

// ParseVersion reads the output of "opensm --version". It returns the flavour,
// the version line, and whether the line was recognised: major version 3 is
// upstream, 5 and above NVIDIA's. Anything else gives Upstream and ok false.
func ParseVersion(out []byte) (f fabric.Flavour, version string, ok bool) {
	m := versionPattern.FindSubmatch(out)
	if m == nil {
		return fabric.Upstream, "", false
	}
	version = string(bytes.TrimSpace(m[0]))
	major, err := strconv.Atoi(string(m[1]))
	switch {
	case err != nil:
		return fabric.Upstream, version, false
	case major == 3:
		return fabric.Upstream, version, true
	case major >= 5:
		return fabric.NVIDIA, version, true
	}
	return fabric.Upstream, version, false
}

// versionTimeout bounds "opensm --version", which only prints and exits.
const versionTimeout = 30 * time.Second

// DetectFlavour runs command (the OpenSM executable and its leading arguments)
// with --version and reads the flavour from what it prints. It fails only when
// the command cannot be run or prints nothing.
//
// Output it does not recognise gives Upstream, with a warning in the default
// logger: upstream's options are the ones every OpenSM knows, so the file stays
// valid, and only the NVIDIA-only hardening (sa_trust) is left out. Guessing
// NVIDIA instead would write options an unknown OpenSM may not know.
func DetectFlavour(ctx context.Context, command []string) (fabric.Flavour, error) {
	if len(command) == 0 {
		return fabric.Upstream, errors.New("detect the OpenSM flavour: no command")
	}
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], append(command[1:], "--version")...)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	// Some builds exit non-zero after printing the version: the line counts,
	// not the status.
	f, version, ok := ParseVersion(out.Bytes())
	switch {
	case ok:
		return f, nil
	case out.Len() == 0 && runErr != nil:
		return fabric.Upstream, fmt.Errorf("detect the OpenSM flavour: %s --version: %w", command[0], runErr)
	case out.Len() == 0:
		return fabric.Upstream, fmt.Errorf("detect the OpenSM flavour: %s --version printed nothing", command[0])
	}
	slog.Default().WarnContext(ctx, "unknown OpenSM version: writing only the options upstream OpenSM knows",
		"command", command[0], "version", version, "first_line", firstLine(out.Bytes()))
	return fabric.Upstream, nil
}

// firstLine returns the first line of out that is neither blank nor a rule of
// dashes (OpenSM's banner), cut to 200 bytes.
func firstLine(out []byte) string {
	for line := range bytes.Lines(out) {
		if l := bytes.TrimSpace(line); len(bytes.Trim(l, "-")) > 0 {
			return string(l[:min(len(l), 200)])
		}
	}
	return ""
}
