package opensm

import (
	"fmt"
	"strconv"
	"strings"
)

// A cloned GUID: a host whose owner rewrote its HCA's GUIDs to another
// host's. OpenSM finds the same node GUID behind two switch ports and logs
// ERR 0D01 with both places, at every heavy sweep; it then starts the sweep
// again at once and never reaches SUBNET UP while the clone lasts (measured
// on the simulated fabric: about 160 heavy sweeps and as many ERR 0D01
// entries a second, whatever exit_on_fatal says, see docs/opensm-hardening.md).
// A duplicated port GUID is ERR 0D15, with the directed routes only.

// DuplicateGUID is one entry of OpenSM's log saying a GUID was found twice.
type DuplicateGUID struct {
	// GUID is the duplicated GUID as "0x" and 16 lower-case hex digits: a
	// node GUID (ERR 0D01) or a port GUID (ERR 0D15).
	GUID string
	Kind string // "node" (ERR 0D01) or "port" (ERR 0D15)
	// Places are where OpenSM saw it, "<switch node GUID>:<port>" each
	// (ERR 0D01 names the two switch ports it was reached through); none
	// for ERR 0D15, which gives directed routes only.
	Places []string
	Line   string // the whole entry as OpenSM wrote it, continuation joined
}

// String names the GUID and where it was seen, for the gate's reason.
func (d DuplicateGUID) String() string {
	if len(d.Places) == 0 {
		return fmt.Sprintf("%s GUID %s", d.Kind, d.GUID)
	}
	return fmt.Sprintf("%s GUID %s (behind %s)", d.Kind, d.GUID, strings.Join(d.Places, " and "))
}

// The two entries. ERR 0D01's header is followed by a continuation line
// holding only numbers (no text the fabric supplies):
//
//	report_duplicated_guid: ERR 0D01: Found duplicated node GUID.
//	Node 0x%lx port %u is reachable from remote node 0x%lx port %u and remote node 0x%lx port %u.
//	Paths are:
//
// ERR 0D15's header line names the port GUID:
//
//	<function>: ERR 0D15: Duplicate Port GUID 0x%lx! Found by the two directed routes:
const (
	dupNodeText = "Found duplicated node GUID."
	dupPortText = "Duplicate Port GUID 0x"
)

// ParseDuplicateGUID recognises one entry; ok is false for any other. Only
// the header line's function, code and text are read (see splitFunction),
// and for ERR 0D01 the continuation line by its fixed parts:
// a line quoting a node's description cannot be taken for one.
func ParseDuplicateGUID(e Entry) (DuplicateGUID, bool) {
	function, rest, ok := splitFunction(e.Message)
	if !ok {
		return DuplicateGUID{}, false
	}
	code, text, ok := errorCode(rest)
	if !ok {
		return DuplicateGUID{}, false
	}
	switch {
	case code == "0D01" && text == dupNodeText && function == "report_duplicated_guid":
		return duplicateNode(e)
	case code == "0D15" && strings.HasPrefix(text, dupPortText):
		guid, tail, ok := cutGUID(strings.TrimPrefix(text, dupPortText))
		if !ok || !strings.HasPrefix(tail, "!") {
			return DuplicateGUID{}, false
		}
		return DuplicateGUID{GUID: guid, Kind: "port", Line: rawLine(e)}, true
	}
	return DuplicateGUID{}, false
}

// duplicateNode reads ERR 0D01's continuation line. An entry without one
// still names a duplicate (the GUID unknown): it closes the gate all the same.
func duplicateNode(e Entry) (DuplicateGUID, bool) {
	d := DuplicateGUID{GUID: "unknown", Kind: "node", Line: rawLine(e)}
	if len(e.More) == 0 {
		return d, true
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(e.More[0]), "Node 0x")
	if !ok {
		return d, true
	}
	guid, rest, ok := cutGUID(rest)
	if !ok {
		return d, true
	}
	d.GUID = guid
	// " port %u is reachable from remote node 0x%lx port %u and remote node 0x%lx port %u."
	if rest, ok = cutPort(rest, " port "); !ok {
		return d, true
	}
	var places []string
	for _, sep := range []string{" is reachable from remote node 0x", " and remote node 0x"} {
		var sw string
		if rest, ok = strings.CutPrefix(rest, sep); !ok {
			return d, true
		}
		if sw, rest, ok = cutGUID(rest); !ok {
			return d, true
		}
		portText := strings.TrimPrefix(rest, " port ")
		if rest, ok = cutPort(rest, " port "); !ok {
			return d, true
		}
		places = append(places, fmt.Sprintf("%s:%s", sw, portText[:len(portText)-len(rest)]))
	}
	if rest == "." {
		d.Places = places
	}
	return d, true
}

// cutGUID reads a GUID's hex digits (OpenSM's %lx: no padding) and returns
// it as "0x" and 16 digits; ok is false for none, more than 16 or zero.
func cutGUID(text string) (guid, rest string, ok bool) {
	rest, ok = cutNumber(text, 16)
	digits := text[:len(text)-len(rest)]
	if !ok || len(digits) > 16 {
		return "", text, false
	}
	v, _ := strconv.ParseUint(digits, 16, 64)
	if v == 0 {
		return "", text, false
	}
	return fmt.Sprintf("0x%016x", v), rest, true
}

// cutPort reads prefix and a port number (0 to 254).
func cutPort(text, prefix string) (rest string, ok bool) {
	rest, ok = strings.CutPrefix(text, prefix)
	if !ok {
		return text, false
	}
	after, ok := cutNumber(rest, 10)
	if !ok || len(rest)-len(after) > 3 {
		return text, false
	}
	if n, _ := strconv.Atoi(rest[:len(rest)-len(after)]); n > 254 {
		return text, false
	}
	return after, true
}

// SweepMark says whether an entry starts a heavy sweep or ends one with
// SUBNET UP (the header line, not the box of the same name): what clears a
// duplicate is a sweep that came up without one.
func SweepMark(e Entry) (start, up bool) {
	return e.Title == titleHeavySweepStart, e.Message == msgSubnetUp
}
