package audit

import (
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// Kind is the kind of a finding, a word metrics and alerts select on.
type Kind string

const (
	MissingPKey     Kind = "missing_pkey"
	ForeignPKey     Kind = "foreign_pkey"
	WrongMembership Kind = "wrong_membership"
	NotEnforcing    Kind = "switch_not_enforcing"
	Unreachable     Kind = "unreachable"
)

// Kinds are every kind, in the order reports list them.
var Kinds = []Kind{ForeignPKey, NotEnforcing, WrongMembership, MissingPKey, Unreachable}

// Finding is one difference between a port and the recorded state.
type Finding struct {
	Kind Kind        `json:"kind"`
	Port fabric.GUID `json:"-"` // the host port, or the one the switch port faces
	// Switch is the switch port the finding is about; nil: the host port.
	Switch *pkeyread.SwitchPort `json:"-"`
	PKey   uint16               `json:"pkey,omitempty"` // 0 for switch_not_enforcing and unreachable
	Owner  string               `json:"owner,omitempty"`
	// Want and Got are the memberships recorded and read (pkeyread's words).
	Want string `json:"want,omitempty"`
	Got  string `json:"got,omitempty"`
	Text string `json:"text"`
	// HostOnly: a breach on the host port's own table while the switch port
	// facing it is right and enforces (ClassifyHostOnly): it holds that
	// port's jobs only, not the fabric's.
	HostOnly bool `json:"host_only,omitempty"`
}

// Breach says whether the finding lets a port reach a partition it must not:
// no job of the fabric completes while one stands. A HostOnly finding is
// none: the switch stops what the host's table claims.
func (f Finding) Breach() bool {
	if f.HostOnly {
		return false
	}
	switch f.Kind {
	case ForeignPKey, NotEnforcing:
		return true
	case WrongMembership:
		return f.Got == pkeyread.Full.String()
	}
	return false
}

// Heals says whether applying the state again repairs the finding: OpenSM
// writes what the file says into a table that lacks it. An unreachable port
// is programmed by OpenSM's own sweep once it is back.
func (f Finding) Heals() bool {
	switch f.Kind {
	case MissingPKey:
		return true
	case WrongMembership:
		return f.Got != pkeyread.Full.String() // limited where full is recorded, a HostOnly full one aside
	}
	return false
}

// where names the port a finding is about, for its text.
func where(port fabric.GUID, sw *pkeyread.SwitchPort) string {
	if sw == nil {
		return "port " + port.String()
	}
	return fmt.Sprintf("switch %s port %d (facing port %s)", sw.GUID, sw.Port, port)
}

func missing(port fabric.GUID, sw *pkeyread.SwitchPort, p Partition, want pkeyread.Membership) Finding {
	return Finding{Kind: MissingPKey, Port: port, Switch: sw, PKey: p.PKey, Owner: p.Owner, Want: want.String(),
		Got: pkeyread.NotMember.String(), Text: fmt.Sprintf("%s lacks pkey 0x%04x of %s (recorded a %s member): cut off",
			where(port, sw), p.PKey, p.Owner, want)}
}

func foreign(port fabric.GUID, sw *pkeyread.SwitchPort, pkey uint16, owner string, got pkeyread.Membership) Finding {
	return Finding{Kind: ForeignPKey, Port: port, Switch: sw, PKey: pkey, Owner: owner, Want: pkeyread.NotMember.String(),
		Got: got.String(), Text: fmt.Sprintf("%s holds pkey 0x%04x (%s) as a %s member but is not recorded in it: isolation breach",
			where(port, sw), pkey, owner, got)}
}

func wrongMembership(port fabric.GUID, p Partition, want, got pkeyread.Membership) Finding {
	f := Finding{Kind: WrongMembership, Port: port, PKey: p.PKey, Owner: p.Owner, Want: want.String(), Got: got.String()}
	consequence := "cut off from the partition's limited members"
	if got == pkeyread.Full {
		consequence = "isolation breach: it may talk to the partition's limited members"
	}
	f.Text = fmt.Sprintf("port %s holds pkey 0x%04x of %s as a %s member, recorded %s: %s",
		port, p.PKey, p.Owner, got, want, consequence)
	return f
}

func notEnforcing(port fabric.GUID, sw pkeyread.SwitchPort, info pkeyread.PortInfo) Finding {
	return Finding{Kind: NotEnforcing, Port: port, Switch: &sw, Text: fmt.Sprintf(
		"%s does not enforce partitions (inbound %t, outbound %t): the host may use any pkey",
		where(port, &sw), info.EnforceInbound, info.EnforceOutbound)}
}

func unreachable(port fabric.GUID, why string) Finding {
	return Finding{Kind: Unreachable, Port: port, Text: fmt.Sprintf("port %s: %s", port, why)}
}
