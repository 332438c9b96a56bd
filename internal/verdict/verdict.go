// Package verdict is the one author of why jobs are held: Judge, a pure
// function from what the database records of the fabric (and one read of
// OpenSM's subnet dump) to the fabric-wide reasons no job completes and the
// host ports whose jobs alone are held. The applier's gates, --status (text
// and --json), afm_gate_closed and the jobs' texts all come from it, so
// they cannot disagree on the same evidence.
//
// Most of the Evidence is rows as recorded: the confirmed switches, the
// enforcement errors, the duplicated GUIDs, the last audit, the second SM and
// the HA freeze. Source reads them (with the dump) for --status and the
// metrics. The applier fills the same fields from its term: the switches and
// enforcement errors as its completing transaction reads them, the rest as
// its term last wrote or read them. Where the term's record failed (the
// database refused a write), the term judges what it saw and --status what
// is recorded, until a later record succeeds (the next read of the log,
// look for an SM or audit writes again).
//
// Two inputs exist only in the applier term's memory, and only it fills
// them; elsewhere they are zero, and --status and the metrics say the
// recorded second SM instead, of the same kind:
//   - SecondSM.Unread: the second SM the previous term recorded could not be
//     read from the database;
//   - SecondSM.RestartAt (with RestartEvery): the second SM is gone and the
//     rate limit defers the restart of OpenSM that must come before the gate
//     opens.
//
// A freeze just lifted is no input: the applier leaves Freeze empty and
// holds the jobs for the full apply that follows, a transition of its own.
//
// A new kind of evidence is one field of Evidence and one case of Judge
// (and, if it is recorded, one read of Source).
package verdict

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Kind is the kind of a reason jobs do not complete: a word for alerts and
// dashboards to select on without matching the reason's text, which names
// switches and ports.
type Kind string

const (
	NoExpectedSwitches Kind = "no_expected_switches" // none confirmed yet (NoExpectedSwitchesText)
	// SwitchMissing: a confirmed switch is missing from OpenSM's last
	// sweep, or the subnet dump is not configured.
	SwitchMissing Kind = "switch_missing"
	// SwitchesUnchecked: the subnet dump cannot be read (SwitchesUncheckedText).
	SwitchesUnchecked  Kind = "switches_unchecked"
	EnforcementCleared Kind = "enforcement_cleared" // enforcement errors are recorded
	Frozen             Kind = "frozen"              // the HA freeze
	// IsolationBreach: the last audit found a port holding a pkey it is
	// not recorded in, or a full membership where the state says limited.
	IsolationBreach Kind = "isolation_breach"
	// SwitchNotEnforcing: the last audit found a switch port facing a host
	// that does not enforce partitions.
	SwitchNotEnforcing Kind = "switch_not_enforcing"
	SecondSM           Kind = "second_subnet_manager" // another SM is master over ports
	// UnconfirmedSwitch: OpenSM's last sweep found a switch that was not
	// confirmed: a host answering NodeInfo as a switch turns the switch
	// port facing it into an inter-switch link, where no partition is
	// enforced and nothing is audited.
	UnconfirmedSwitch Kind = "unconfirmed_switch"
	// DuplicateGUID: OpenSM found a GUID twice on the fabric, a host
	// presenting another's.
	DuplicateGUID Kind = "duplicate_guid"
)

// Reason is one reason jobs do not complete now.
type Reason struct {
	Kind Kind
	Text string // for operators: what is wrong, and what to do
}

func (r Reason) String() string { return r.Text }

// Texts are the reasons' texts, as the jobs, the log and --status say them.
func Texts(reasons []Reason) []string {
	texts := make([]string, len(reasons))
	for i, r := range reasons {
		texts[i] = r.Text
	}
	return texts
}

// Evidence is what Judge judges. Its zero value is a fabric with nothing
// confirmed: closed (no expected switches).
type Evidence struct {
	Expected          []store.ExpectedSwitch   // confirmed by an operator (--confirm-switches)
	EnforcementErrors []store.EnforcementError // switch ports whose enforcement OpenSM cleared
	Duplicates        []store.DuplicateGUID    // GUIDs OpenSM found twice
	// Places are the switch ports the GUIDs of the partitions were
	// recorded behind, with the moves marked (store.GUIDPlace).
	Places []store.GUIDPlace
	// SubnetDump is the dump's path; "": not configured.
	SubnetDump string
	// Dump is one read of it, looked at only when switches are confirmed.
	Dump Dump
	// Audit is the last audit as recorded (AuditOf); nil: none recorded,
	// or no audit is configured (nothing would ever clear its findings).
	Audit    *Audit
	SecondSM SecondSMEvidence
	// Freeze is the HA freeze's reason as recorded in the lease; "": none.
	Freeze string
}

// Dump is one read of OpenSM's subnet dump: what topology.Load returned.
type Dump struct {
	Topo *topology.Topology
	Err  error
}

// Audit is the last audit as recorded (store.Audit).
type Audit struct {
	StartedAt time.Time
	Breaches  int64 // as counted by the audit: its summary may keep fewer findings
	Summary   audit.Summary
}

// SecondSMEvidence is the second SM's verdict.
type SecondSMEvidence struct {
	// Master is the SM recorded as master over ports that is not this
	// manager's OpenSM; nil: none.
	Master *store.SecondSM
	Own    fabric.GUID // this manager's OpenSM's port ([opensm_conf] guid)
	// Unread (applier only): the recorded verdict could not be read.
	Unread bool
	// RestartAt (applier only): Master is gone and the restart of OpenSM
	// that must come first is deferred until then by the rate limit of one
	// every RestartEvery check intervals; zero: none deferred.
	RestartAt    time.Time
	RestartEvery int
	// LookFailed (applier only): why finish's look could not read which SM
	// is master, until a look reads it; "": the last look read it.
	LookFailed string
	// Appeared (applier only): the entry of OpenSM's log naming another
	// SM that came after finish's look had read the fabric, before its
	// jobs completed: no look saw what it names. "": none.
	Appeared string
}

// Verdict is why jobs are held.
type Verdict struct {
	// Reasons hold every job: none when the fabric-wide gates are open.
	Reasons []Reason
	// Held are the host ports whose jobs alone are held, each with why: a
	// host's own table that lies while its switch port is right.
	Held map[fabric.GUID]string
}

// Open says whether the fabric-wide gates are open.
func (v Verdict) Open() bool { return len(v.Reasons) == 0 }

// Of are the reasons of kind k.
func (v Verdict) Of(k Kind) []Reason {
	var out []Reason
	for _, r := range v.Reasons {
		if r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

// HeldLines name each held port for --status, in GUID order.
func (v Verdict) HeldLines() []string {
	var lines []string
	for _, port := range slices.Sorted(maps.Keys(v.Held)) {
		lines = append(lines, fmt.Sprintf("host port %s is held (its jobs only): %s", port, v.Held[port]))
	}
	return lines
}

// HoldOf is the reason a job with a place on port waits, when port is held.
func (v Verdict) HoldOf(port fabric.GUID) (string, bool) {
	why, ok := v.Held[port]
	if !ok {
		return "", false
	}
	return "port " + port.String() + " is held: " + why, true
}

// Judge says why jobs are held, given the evidence. It does no I/O: the
// applier judges inside the transaction that completes the jobs. The
// reasons come in a fixed order: switches, enforcement, audit, duplicated
// GUIDs, freeze, second SM.
func Judge(ev Evidence) Verdict {
	var v Verdict
	v.Reasons = append(v.Reasons, switchReasons(ev)...)
	v.Reasons = append(v.Reasons, enforcementReasons(ev.EnforcementErrors)...)
	if ev.Audit != nil {
		v.Reasons = append(v.Reasons, auditReasons(*ev.Audit)...)
		v.Held = ev.Audit.Summary.HeldPorts()
	}
	v.Reasons = append(v.Reasons, duplicateReasons(ev.Duplicates)...)
	v.Reasons = append(v.Reasons, MovedReasons(ev.Places, ev.Dump.Topo)...)
	if ev.Freeze != "" {
		v.Reasons = append(v.Reasons, Reason{Frozen, ev.Freeze})
	}
	v.Reasons = append(v.Reasons, secondSMReasons(ev.SecondSM)...)
	return v
}
