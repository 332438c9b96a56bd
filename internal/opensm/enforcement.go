package opensm

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
)

// Unattributed is the Switch of an EnforcementError whose line names no switch port.
const Unattributed = "unattributed"

// EnforcementError is a log line saying OpenSM cleared a switch port's partition
// enforcement: that port now lets every pkey through, so the host behind it can
// reach any partition (spec: opensm-reference §3).
type EnforcementError struct {
	// Switch is the switch's node GUID as "0x" and 16 lower-case hex digits, or
	// Unattributed when the line names no switch port.
	Switch string
	Port   int    // the switch port facing the host; 0 when Unattributed
	Line   string // the whole entry as OpenSM wrote it, header included
}

// Attributed says whether the line named the switch port.
func (e EnforcementError) Attributed() bool { return e.Switch != Unattributed }

// String is the switch port as operators list it: "<switch GUID>:<port>", or
// "unattributed".
func (e EnforcementError) String() string {
	if !e.Attributed() {
		return Unattributed
	}
	return fmt.Sprintf("%s:%d", e.Switch, e.Port)
}

var (
	// clearedEnforcement recognises the lines: upstream's ERR 0507 ("... Clearing
	// Enforcement bit", and its pre-2011 form ERR 0508 with the same words), and
	// ERR 0513, which NVIDIA's OpenSM is said to log in an unknown format. The
	// phrase is matched in any case, the codes as whole words. Upstream's current
	// ERR 0508 is another error (pkey index bookkeeping) and is not matched.
	clearedEnforcement = regexp.MustCompile(`(?i)Clearing Enforcement bit|\bERR 0507\b|\bERR 0513\b`)
	// switchPort reads the place out of upstream's format: "on switch 0x%016llx
	// port %u". Only a GUID introduced by "switch" is taken: other messages name
	// the host's node ("node 0x..."), which is not the port to look at.
	switchPort = regexp.MustCompile(`(?i)\bswitch 0x([0-9a-f]{1,16}) port (\d{1,3})\b`)
)

// ParseEnforcementError recognises one entry; ok is false for any other entry.
func ParseEnforcementError(e Entry) (EnforcementError, bool) {
	text := e.Text()
	if !clearedEnforcement.MatchString(text) {
		return EnforcementError{}, false
	}
	out := EnforcementError{Switch: Unattributed, Line: rawLine(e)}
	if m := switchPort.FindStringSubmatch(text); m != nil {
		guid, errG := strconv.ParseUint(m[1], 16, 64)
		port, errP := strconv.Atoi(m[2])
		// A switch port is 1..254 (port 0 is the switch itself) and a GUID is
		// never 0: anything else is not a place to look at, so the line stays
		// unattributed rather than pointing at the wrong port.
		if errG == nil && errP == nil && guid != 0 && port >= 1 && port <= 254 {
			out.Switch, out.Port = fmt.Sprintf("0x%016x", guid), port
		}
	}
	return out, true
}

// MayHoldEnforcementErrors is a cheap test of a stretch of the log: false
// when no entry in it can be one EnforcementErrors returns, so that a caller
// reading the log between sweeps (tens of megabytes a day on a large fabric,
// one VERBOSE line per port and sweep) need not parse it.
func MayHoldEnforcementErrors(text []byte) bool {
	lower := bytes.ToLower(text)
	return bytes.Contains(lower, []byte("clearing enforcement bit")) ||
		bytes.Contains(lower, []byte("err 0507")) || bytes.Contains(lower, []byte("err 0513"))
}

// EnforcementErrors returns the entries that say enforcement was cleared, in log
// order, one per line: OpenSM repeats the line at every heavy sweep while the
// condition lasts, and each repetition is returned.
func EnforcementErrors(entries []Entry) []EnforcementError {
	var out []EnforcementError
	for _, e := range entries {
		if ee, ok := ParseEnforcementError(e); ok {
			out = append(out, ee)
		}
	}
	return out
}

// rawLine rebuilds the entry as OpenSM wrote it, continuation lines joined by
// spaces, so that an operator can find it in the log.
func rawLine(e Entry) string {
	return fmt.Sprintf("%s [%s] 0x%02x -> %s", e.Time, e.Thread, uint8(e.Level), e.Text())
}
