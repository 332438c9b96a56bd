package e2e

import (
	"testing"
)

// TestAuditCommandDetaches: --audit run again and again beside a leader
// keeps finding the fabric as recorded. The simulator serves ten clients and
// frees a client's place only when it detaches, not when its process exits:
// an --audit that left the connection its reader kept attached would take
// a place each run, until the simulator refused every reader, the leader's
// read-back included.
func TestAuditCommandDetaches(t *testing.T) {
	m, _, _, _ := auditedManager(t)
	for run := range 10 {
		if out, err := m.tryOperator("--audit"); err != nil {
			t.Fatalf("--audit run %d: %v\n%s", run+1, err, out)
		}
	}
}
