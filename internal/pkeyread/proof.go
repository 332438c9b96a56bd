package pkeyread

import (
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Want is what a port's table must show once a change is in the fabric: the
// pkey with a membership (an addition), or not at all (a removal: NotMember).
type Want struct {
	Port       fabric.GUID
	PKey       uint16 // its low 15 bits
	Membership Membership
}

func (w Want) String() string {
	if w.Membership == NotMember {
		return fmt.Sprintf("port %s without pkey 0x%04x", w.Port, w.PKey&0x7fff)
	}
	return fmt.Sprintf("port %s a %s member of pkey 0x%04x", w.Port, w.Membership, w.PKey&0x7fff)
}

// Verdict says whether the tables read prove a Want, and if not, why.
type Verdict struct {
	Want   Want
	Proven bool
	Reason string // why not; "" when proven
}

// Prove judges each want by the results of a Read. The host port's table
// must hold the pkey with the wanted membership (or not hold it). Where the
// switch port facing it was read, it must hold the pkey too (or not): that
// table is what the switch enforces. Its membership is not compared: upstream
// OpenSM copies the host's, and what other subnet managers write there is
// theirs to choose. A port that was not read, or whose read failed, proves
// nothing.
func Prove(results []Result, wants []Want) []Verdict {
	byPort := make(map[fabric.GUID]Result, len(results))
	for _, r := range results {
		byPort[r.Target.Port] = r
	}
	verdicts := make([]Verdict, len(wants))
	for i, w := range wants {
		verdicts[i] = Verdict{Want: w}
		res, ok := byPort[w.Port]
		switch {
		case !ok:
			verdicts[i].Reason = fmt.Sprintf("port %s was not read", w.Port)
		case res.Err != nil:
			verdicts[i].Reason = fmt.Sprintf("port %s could not be read: %v", w.Port, res.Err)
		default:
			verdicts[i].Reason = mismatch(res, w)
			verdicts[i].Proven = verdicts[i].Reason == ""
		}
	}
	return verdicts
}

// mismatch says how a port's tables differ from w; "" when they show it.
func mismatch(res Result, w Want) string {
	pkey := w.PKey & 0x7fff
	if got := res.PKeys.Membership(pkey); got != w.Membership {
		if w.Membership == NotMember {
			return fmt.Sprintf("port %s still holds pkey 0x%04x (%s)", w.Port, pkey, got)
		}
		return fmt.Sprintf("port %s holds pkey 0x%04x as %s, want %s", w.Port, pkey, got, w.Membership)
	}
	if res.SwitchPKeys == nil {
		return ""
	}
	s := res.Target.Switch
	switch held := res.SwitchPKeys.Membership(pkey) != NotMember; {
	case w.Membership == NotMember && held:
		return fmt.Sprintf("switch %s port %d, facing port %s, still holds pkey 0x%04x", s.GUID, s.Port, w.Port, pkey)
	case w.Membership != NotMember && !held:
		return fmt.Sprintf("switch %s port %d, facing port %s, does not hold pkey 0x%04x", s.GUID, s.Port, w.Port, pkey)
	}
	return ""
}
