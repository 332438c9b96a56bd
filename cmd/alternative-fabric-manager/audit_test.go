package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
)

// --audit marks a lying host's own table (held alone) apart from a breach,
// and exits 7 for it, not 6: no tenant can reach another through it.
func TestAuditMarksHostOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    audit.Finding
		mark string
		exit int
	}{
		{"a breach", audit.Finding{Kind: audit.ForeignPKey, Port: 0x201, PKey: 0x65, Text: "breach"}, " ! foreign_pkey: breach", exitAuditBreach},
		{"a host table that lies", audit.Finding{Kind: audit.ForeignPKey, Port: 0x201, PKey: 0x65, Text: "lies", HostOnly: true},
			" ~ foreign_pkey: lies", exitAuditFindings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := audit.Summary{Findings: []audit.Finding{tc.f}}
			var out strings.Builder
			if err := printAudit(&out, s); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.mark+"\n") {
				t.Errorf("--audit printed\n%s\nwant the line %q", out.String(), tc.mark)
			}
			var code status.ExitStatus
			if err := auditVerdict(s); !errors.As(err, &code) || code.Code != tc.exit {
				t.Errorf("verdict %v, want exit %d", err, tc.exit)
			}
		})
	}
}
