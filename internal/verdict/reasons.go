package verdict

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// The texts the reasons start with, for those who tell them apart.
const (
	// NoExpectedSwitchesText is the reason given while no switch has been confirmed.
	NoExpectedSwitchesText = "No expected switches: once OpenSM has swept, record the fabric's switches with --confirm-switches"
	// EnforcementClearedText starts the reason given while enforcement errors are recorded.
	EnforcementClearedText = "OpenSM cleared a switch port's enforcement"
	// SwitchesUncheckedText starts the reason given while the subnet dump
	// cannot be read: --status tells a dump this host cannot read from a
	// closed gate.
	SwitchesUncheckedText = "the expected switches cannot be checked"
	// DuplicateGUIDText starts the reason given while duplicated GUIDs are recorded.
	DuplicateGUIDText = "OpenSM found a GUID twice on the fabric (a host presenting another's GUID)"
	// SecondSMUnreadText is the reason while the recorded second SM is unread.
	SecondSMUnreadText = "Second subnet manager: the one the previous term recorded could not be read from the database; " +
		"jobs wait until it is, or a look sees this manager's OpenSM master"
)

// switchReasons compares the confirmed switches with OpenSM's last dump. A
// dump that cannot be read proves nothing: that closes the gate as well
// (OpenSM rewrites the file in place, so a read can catch it half written;
// the next poll reads it again).
func switchReasons(ev Evidence) []Reason {
	switch {
	case len(ev.Expected) == 0:
		return []Reason{{NoExpectedSwitches, NoExpectedSwitchesText}}
	case ev.SubnetDump == "":
		return []Reason{{SwitchMissing, "OpenSM's subnet dump is not configured: " + SwitchesUncheckedText}}
	case ev.Dump.Err != nil || ev.Dump.Topo == nil:
		err := ev.Dump.Err
		if err == nil {
			err = errors.New("not read")
		}
		return []Reason{{SwitchesUnchecked, fmt.Sprintf("%s: %v", SwitchesUncheckedText, err)}}
	}
	present := map[string]bool{}
	for _, sw := range ev.Dump.Topo.Switches() {
		present[sw.GUID.String()] = true
	}
	confirmed := map[string]bool{}
	var reasons []Reason
	for _, sw := range ev.Expected {
		confirmed[sw.GUID.String()] = true
		if !present[sw.GUID.String()] {
			reasons = append(reasons, Reason{SwitchMissing, fmt.Sprintf(
				"expected switch %s (%s) is missing from OpenSM's last sweep", sw.GUID, sw.Description)})
		}
	}
	return append(reasons, unconfirmedSwitches(ev.Dump.Topo, confirmed)...)
}

// unconfirmedSwitches names the switches of the dump that were not
// confirmed: a host that answers NodeInfo as a switch makes the switch port
// facing it an inter-switch link, which enforces nothing and is not audited,
// so its tenant could reach every partition. A switch really added closes the
// gate too, until an operator confirms the new set (--confirm-switches).
func unconfirmedSwitches(topo *topology.Topology, confirmed map[string]bool) []Reason {
	var reasons []Reason
	for _, sw := range topo.Switches() {
		if !confirmed[sw.GUID.String()] {
			reasons = append(reasons, Reason{UnconfirmedSwitch, fmt.Sprintf(
				"switch %s (%s) is in OpenSM's last sweep but was not confirmed: a host answering as a switch, "+
					"or a switch added; check it, then --confirm-switches", sw.GUID, sw.Description)})
		}
	}
	return reasons
}

// enforcementReasons: one reason naming every switch port recorded.
func enforcementReasons(errs []store.EnforcementError) []Reason {
	if len(errs) == 0 {
		return nil
	}
	ports := make([]string, len(errs))
	for i, e := range errs {
		ports[i] = e.SwitchPort()
	}
	return []Reason{{EnforcementCleared, fmt.Sprintf(
		"%s: %s (see --show-enforcement-errors; --clear-enforcement-errors once dealt with)",
		EnforcementClearedText, strings.Join(ports, ", "))}}
}

// AuditOf is the evidence of a recorded audit. A summary that cannot be
// decoded keeps the audit's counts: its breaches still close the gate.
func AuditOf(rec store.Audit) *Audit {
	a := &Audit{StartedAt: rec.StartedAt, Breaches: rec.Breaches}
	if err := json.Unmarshal(rec.Summary, &a.Summary); err != nil {
		a.Summary = audit.Summary{}
	}
	return a
}

// auditReasons turns the last audit's breaches into reasons, one per kind,
// naming the first few ports; a record that lost its findings still closes
// the gate on its count.
func auditReasons(a Audit) []Reason {
	texts := map[Kind][]string{}
	var kinds []Kind
	for _, f := range a.Summary.Breaches() {
		kind := IsolationBreach
		if f.Kind == audit.NotEnforcing {
			kind = SwitchNotEnforcing
		}
		if texts[kind] == nil {
			kinds = append(kinds, kind)
		}
		texts[kind] = append(texts[kind], f.Text)
	}
	// The count, not the audit's time: a job's text changes when the
	// findings do, not at every audit.
	found := fmt.Sprintf("isolation breaches in the last audit: %d (--audit names them)", a.Breaches)
	var reasons []Reason
	for _, k := range kinds {
		shown := texts[k][:min(3, len(texts[k]))]
		text := "the fabric audit found " + strings.Join(shown, "; ")
		if more := len(texts[k]) - len(shown); more > 0 {
			text += fmt.Sprintf(" (and %d more; see --audit)", more)
		}
		reasons = append(reasons, Reason{k, text + "; " + found + "; jobs complete once an audit finds the fabric clean"})
	}
	if len(reasons) == 0 && a.Breaches > 0 {
		reasons = []Reason{{IsolationBreach, fmt.Sprintf(
			"the last fabric audit (%s) found %d isolation breaches; jobs complete once an audit finds the fabric clean",
			a.StartedAt.UTC().Format(time.RFC3339), a.Breaches)}}
	}
	return reasons
}

// duplicateReasons: one reason, naming every GUID and where it was seen.
func duplicateReasons(dups []store.DuplicateGUID) []Reason {
	if len(dups) == 0 {
		return nil
	}
	named := make([]string, len(dups))
	for i, d := range dups {
		named[i] = fmt.Sprintf("%s GUID %s", d.Kind, d.GUID)
		if len(d.Places) > 0 {
			named[i] += " behind switch ports " + strings.Join(d.Places, " and ")
		}
		named[i] += fmt.Sprintf(" (%d times, last %s)", d.Count, d.LastSeen.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return []Reason{{DuplicateGUID, fmt.Sprintf(
		"%s: %s; OpenSM cannot bring the subnet up while it lasts: find the host, restore its GUID or unplug it; "+
			"the gate opens at the first heavy sweep that reaches SUBNET UP without it", DuplicateGUIDText,
		strings.Join(named, "; "))}}
}

// MovedGUIDText starts the reason given while a GUID is behind another switch
// port than its recorded one.
const MovedGUIDText = "a GUID of the partitions is behind another switch port than the one recorded (a host presenting the GUID of a host that is down, or a host recabled)"

// MovedReasons: a tenant that takes the GUID of a host that is down makes no
// duplicate OpenSM could see; the GUID appears behind another switch port,
// and the partitions follow it there (the applier's moved.go records the
// places). One reason, naming every GUID seen behind another switch port
// than its recorded one now, or marked so and not seen back at its own since;
// topo nil: the dump was not read, only the marks judge.
func MovedReasons(places []store.GUIDPlace, topo *topology.Topology) []Reason {
	var named []string
	for _, p := range places {
		if at, ok := SeenAt(topo, p.GUID); ok && at != PlaceOf(p) {
			named = append(named, fmt.Sprintf("port GUID %s recorded behind switch port %s is behind %s",
				p.GUID, p.SwitchPort(), at))
		} else if !ok && p.MovedTo != "" {
			named = append(named, fmt.Sprintf("port GUID %s recorded behind switch port %s was behind %s (%s), "+
				"and has not been seen back since", p.GUID, p.SwitchPort(), p.MovedTo, p.MovedAt.Format("2006-01-02T15:04:05Z")))
		}
	}
	if len(named) == 0 {
		return nil
	}
	return []Reason{{DuplicateGUID, fmt.Sprintf(
		"%s: %s; the switch port it is behind enforces its partitions there: take that host off, or, if the move "+
			"is legitimate, --accept-moved-guid <GUID>; the gate opens once the GUID is behind its recorded "+
			"switch port again or the move is accepted", MovedGUIDText, strings.Join(named, "; "))}}
}

// SeenAt is the switch port guid is behind in the dump. Compared, not
// formatted: a sweep compares every recorded GUID.
func SeenAt(topo *topology.Topology, guid fabric.GUID) (topology.SwitchPort, bool) {
	if topo == nil {
		return topology.SwitchPort{}, false
	}
	sw, port, ok := topo.HostPort(guid)
	return topology.SwitchPort{Switch: sw, Port: port}, ok
}

// PlaceOf is p's recorded switch port.
func PlaceOf(p store.GUIDPlace) topology.SwitchPort {
	return topology.SwitchPort{Switch: p.Switch, Port: p.Port}
}

// secondSMReasons is the second SM's reason while one is master over ports
// (or gone, its restart deferred), or the recorded one is unread.
func secondSMReasons(e SecondSMEvidence) []Reason {
	switch sm := e.Master; {
	case sm != nil && !e.RestartAt.IsZero():
		return []Reason{{SecondSM, fmt.Sprintf("Second subnet manager: port %s was master and is gone; "+
			"this manager's OpenSM is restarted to write every port's table again at %s (at most one such restart "+
			"every %d check intervals)", sm.PortGUID, e.RestartAt.UTC().Format(time.RFC3339), e.RestartEvery)}}
	case sm != nil && sm.PortGUID == e.Own:
		return []Reason{{SecondSM, fmt.Sprintf("Second subnet manager: this manager's OpenSM (port %s) is %s and no "+
			"other SM is named master; find the SM that deposed it (docs/runbooks.md)", e.Own, sm.State)}}
	case sm != nil && sm.State != "MASTER":
		// Not master yet, but present while a host port lacks M_Key
		// protection: once master it programs that port without a look
		// between (the applier's judgeMasters).
		return []Reason{{SecondSM, fmt.Sprintf("Second subnet manager: port %s (priority %d, %s) may become master at "+
			"any moment and program the host ports without M_Key protection, beside this manager's OpenSM (port %s, "+
			"%s); stop it (docs/runbooks.md)", sm.PortGUID, sm.Priority, sm.State, e.Own, sm.OwnState)}}
	case sm != nil:
		return []Reason{{SecondSM, fmt.Sprintf("Second subnet manager: port %s (priority %d, %s) is master on the fabric, "+
			"not this manager's OpenSM (port %s, %s): it programs the ports with partitions of its own; stop it "+
			"(docs/runbooks.md)", sm.PortGUID, sm.Priority, sm.State, e.Own, sm.OwnState)}}
	case e.Unread:
		return []Reason{{SecondSM, SecondSMUnreadText}}
	case e.LookFailed != "":
		return []Reason{{SecondSM, fmt.Sprintf("Second subnet manager: which subnet manager is master could not be "+
			"read before the jobs complete (%s); they wait for a look that reads it (every check interval)", e.LookFailed)}}
	case e.Appeared != "":
		return []Reason{{SecondSM, fmt.Sprintf("Second subnet manager: OpenSM logged another subnet manager after the "+
			"look before these jobs complete (%q); they wait for a look of every host port after it", e.Appeared)}}
	}
	return nil
}
