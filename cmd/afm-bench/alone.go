package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// aloneResult: OpenSM's sweeps with the manager stopped, the same OpenSM,
// configuration and fabric as the changes': bare ones, and ones that apply
// a one-port change. Their likeness is what lets the fabric's target
// subtract a bare sweep from a change's latency: an apply's own sweep is
// longer by the CPU the manager takes beside it (OpenSM and ibsim take both
// cores of the bench's machine), which is the manager's cost, not OpenSM's.
type aloneResult struct {
	bare, change latencies
}

// measureOpenSMAlone stops the manager (SIGSTOP: it takes no CPU and
// writes nothing), then samples times: a bare sweep, and a sweep after the
// partitions file lost, or got back, one member line (a host's full
// membership), each SIGHUP → SUBNET UP by OpenSM's time stamp. The file the
// manager wrote is put back and the manager continued, whatever happened.
func measureOpenSMAlone(ctx context.Context, r *rig, samples int) (res aloneResult, err error) {
	pid, err := r.opensmPID()
	if err != nil {
		return res, err
	}
	// Stopped first, the manager cannot rewrite its file (a drift repair)
	// between the read below and the end: the file put back is its last.
	if err := syscall.Kill(r.managerPID(), syscall.SIGSTOP); err != nil {
		return res, fmt.Errorf("stop the manager: %w", err)
	}
	defer func() { err = errors.Join(err, syscall.Kill(r.managerPID(), syscall.SIGCONT)) }()
	file := filepath.Join(filepath.Dir(r.opensmLog), "partitions.conf")
	written, err := os.ReadFile(file)
	if err != nil {
		return res, err
	}
	without, err := withoutOneMember(string(written))
	if err != nil {
		return res, fmt.Errorf("%s: %w", file, err)
	}
	defer func() { err = errors.Join(err, opensm.WriteFileAtomic(file, written, 0o644)) }()
	texts := [][]byte{[]byte(without), written}
	for i := range samples {
		d, err := bareSweep(ctx, r.opensmLog, pid)
		if err != nil {
			return res, err
		}
		res.bare = append(res.bare, d)
		if err := opensm.WriteFileAtomic(file, texts[i%2], 0o644); err != nil {
			return res, err
		}
		if d, err = bareSweep(ctx, r.opensmLog, pid); err != nil {
			return res, err
		}
		res.change = append(res.change, d)
	}
	return res, nil
}

// withoutOneMember is a partitions file less one member: its first member
// line that another follows in its partition ("    <guid>=full,"), or else
// its first partition's only member ("    <guid>=full ;" becomes "    ;",
// the empty list the manager writes too): the change of one port,
// whichever it is.
func withoutOneMember(text string) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "    0x") && strings.HasSuffix(l, "=full,\n") {
			return strings.Join(append(lines[:i:i], lines[i+1:]...), ""), nil
		}
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "    0x") && strings.HasSuffix(l, "=full ;\n") {
			lines[i] = "    ;\n"
			return strings.Join(lines, ""), nil
		}
	}
	return "", errors.New("no partition has a member")
}
