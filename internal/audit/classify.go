package audit

import (
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// A lying host: a host's own P_Key table is written by whoever has root on
// the host (an SMP Set from the host, a driver that reports what it likes),
// while the switch port facing it is programmed by OpenSM alone and is what
// enforces partitions. A host table holding another tenant's pkey, or a full
// membership where the state says limited, while the switch port facing it
// holds exactly the host's recorded pkeys and enforces, reaches nobody: the
// switch drops every packet with a pkey its table lacks. So that finding is
// no fabric breach (it must not stop every tenant's jobs): it holds only the
// jobs whose places are on that host port (HostOnly, the applier's per-port
// hold). The same finding with the switch port wrong, unread, or not known
// to enforce stays a breach and closes the fabric-wide gate.

// SwitchSide is what an audit learnt of the switch port facing a host port.
type SwitchSide struct {
	// Read: the switch port's table was read and compared (no switch-side
	// finding is about it unless it differs).
	Read bool
	// Enforcing: its PortInfo says it enforces both ways, or the fabric
	// does not report the bits (Input.CheckEnforcement false: the simulated
	// fabric), where OpenSM's own part_enforce and the enforcement_cleared
	// gate stand for them.
	Enforcing bool
}

// ClassifyHostOnly marks the host-side breaches whose switch side is right:
// a port's breaches on its own table become HostOnly when sides[port] was
// read and enforcing and no finding is about that switch port (a missing or
// foreign pkey there, not enforcing, unreachable). findings is changed in
// place and returned.
func ClassifyHostOnly(findings []Finding, sides map[fabric.GUID]SwitchSide) []Finding {
	switchWrong := map[fabric.GUID]bool{}
	for _, f := range findings {
		if f.Switch != nil || f.Kind == Unreachable || f.Kind == NotEnforcing {
			switchWrong[f.Port] = true
		}
	}
	for i, f := range findings {
		side := sides[f.Port]
		if f.Switch == nil && f.Breach() && side.Read && side.Enforcing && !switchWrong[f.Port] {
			findings[i].HostOnly = true
			findings[i].Text += "; the switch port facing it holds only the recorded pkeys and enforces: " +
				"only this host's jobs are held"
		}
	}
	return findings
}
