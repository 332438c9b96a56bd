package applier

import (
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// Per-port holds: a host port whose own P_Key table lies (another tenant's
// pkey, a full membership where the state says limited) while the switch
// port facing it holds only the host's recorded pkeys and enforces
// (audit.ClassifyHostOnly). The switch stops whatever the host's table
// claims, so the fabric-wide gate stays open; only the jobs with a place on
// that port are held: the read-back proof (readback.go) finds such a place
// unproven, with the audit's text as the reason, until an audit finds the
// port's table right again. The holds are the last audit's, kept in its
// record (last_audit), so a new term, or a new leader, restores them
// (loadAudit); --status and afm_audit_held_port name the ports.

// heldPorts are the host ports held now, each with the reason.
func (t *term) heldPorts() map[fabric.GUID]string { return t.audit.judged.Held }

// heldReasons are the reasons the wants on held ports are unproven.
func (t *term) heldReasons(wants []pkeyread.Want) []string {
	var reasons []string
	for _, w := range wants {
		if why, ok := t.audit.judged.HoldOf(w.Port); ok {
			reasons = append(reasons, why)
		}
	}
	return slices.Compact(reasons)
}
