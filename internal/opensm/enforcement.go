package opensm

import (
	"fmt"
	"strconv"
	"strings"
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

// ParseEnforcementError recognises one entry; ok is false for any other entry.
//
// Only the entry's header line is read, and only where OpenSM's formats put
// what this looks for (see splitFunction): after the function name, the code
// ERR 0507 (upstream) or ERR 0513 (named for NVIDIA's OpenSM, format unknown),
// or the text of one of the two formats OpenSM has logged the clearing in,
// whatever the code:
//
//	Not enough pkey entries (%u <= %u) on switch 0x%016llx port %u (%s). Clearing Enforcement bit
//	Not enough pkey entries (%u < %u) on switch 0x%016llx port %u. Clearing Enforcement bit
//
// (upstream's ERR 0507, and its ERR 0508 before 2011; the %s is the switch's
// description), or the phrase "Clearing Enforcement bit", in any case, as the
// first words after the function name or code. Only those two formats name
// the switch port, read by their fixed parts: the description is what lies
// between " (" after the port and the fixed end, so no description can
// change which port a line names. A line in any other format is
// unattributed. Upstream's current ERR 0508 is another error (pkey index
// bookkeeping) and is not matched.
func ParseEnforcementError(e Entry) (EnforcementError, bool) {
	_, rest, ok := splitFunction(e.Message)
	if !ok {
		return EnforcementError{}, false
	}
	code, text, hasCode := errorCode(rest)
	if !hasCode {
		text = rest
	}
	// The entry is rebuilt only once it is known to be one: the tail hands
	// every entry of a large sweep's VERBOSE lines here.
	if guid, port, ok := enforcementPlace(text); ok {
		return EnforcementError{Switch: fmt.Sprintf("0x%016x", guid), Port: port, Line: rawLine(e)}, true
	}
	if code == "0507" || code == "0513" || hasPrefixFold(text, phraseCleared) {
		return EnforcementError{Switch: Unattributed, Line: rawLine(e)}, true
	}
	return EnforcementError{}, false
}

// phraseCleared is the text every known form of the message carries.
const phraseCleared = "Clearing Enforcement bit"

// enforcementPlace reads the switch port out of the two known formats (see
// ParseEnforcementError). ok is false when text is in neither, or names no
// place to look at: a switch port is 1..254 (port 0 is the switch itself) and
// a GUID is never 0.
func enforcementPlace(text string) (guid uint64, port int, ok bool) {
	const (
		start    = "Not enough pkey entries ("
		upstream = "). " + phraseCleared // after the switch's description
		old      = ". " + phraseCleared  // right after the port
	)
	rest, ok := strings.CutPrefix(text, start)
	if !ok {
		return 0, 0, false
	}
	// "%u <= %u) " or "%u < %u) "
	rest, ok = cutNumber(rest, 10)
	if !ok {
		return 0, 0, false
	}
	if r, isNew := strings.CutPrefix(rest, " <= "); isNew {
		rest = r
	} else if rest, ok = strings.CutPrefix(rest, " < "); !ok {
		return 0, 0, false
	}
	if rest, ok = cutNumber(rest, 10); !ok {
		return 0, 0, false
	}
	if rest, ok = strings.CutPrefix(rest, ") on switch 0x"); !ok {
		return 0, 0, false
	}
	guidText := rest
	if rest, ok = cutNumber(rest, 16); !ok || len(guidText)-len(rest) > 16 {
		return 0, 0, false
	}
	guid, _ = strconv.ParseUint(guidText[:len(guidText)-len(rest)], 16, 64)
	if rest, ok = strings.CutPrefix(rest, " port "); !ok {
		return 0, 0, false
	}
	portText := rest
	if rest, ok = cutNumber(rest, 10); !ok || len(portText)-len(rest) > 3 {
		return 0, 0, false
	}
	port, _ = strconv.Atoi(portText[:len(portText)-len(rest)])
	switch {
	case rest == old:
	case strings.HasPrefix(rest, " (") && strings.HasSuffix(rest, upstream) && len(rest) >= len(" (")+len(upstream):
	default:
		return 0, 0, false
	}
	if guid == 0 || port < 1 || port > 254 {
		return 0, 0, false
	}
	return guid, port, true
}

// cutNumber removes the digits of base 10 or 16 (lower case, as OpenSM's
// %llx writes them) that text starts with; ok is false when there are none.
func cutNumber(text string, base int) (rest string, ok bool) {
	i := 0
	for i < len(text) && ('0' <= text[i] && text[i] <= '9' || base == 16 && 'a' <= text[i] && text[i] <= 'f') {
		i++
	}
	return text[i:], i > 0
}

// hasPrefixFold is strings.HasPrefix, ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// rawLine rebuilds the entry as OpenSM wrote it, continuation lines joined by
// spaces, so that an operator can find it in the log.
func rawLine(e Entry) string {
	return fmt.Sprintf("%s [%s] 0x%02x -> %s", e.Time, e.Thread, uint8(e.Level), e.Text())
}
