package applier

import (
	"encoding/json"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// TestAuditRecord: the record counts every finding but lists a bounded
// number, breaches first, so the ones a gate names survive a restart.
func TestAuditRecord(t *testing.T) {
	var s audit.Summary
	for i := range 250 {
		s.Findings = append(s.Findings, audit.Finding{Kind: audit.MissingPKey, Port: fabric.GUID(i + 1), PKey: 0x65})
	}
	for i := range 50 {
		s.Findings = append(s.Findings, audit.Finding{Kind: audit.ForeignPKey, Port: fabric.GUID(1000 + i), PKey: 0x66})
	}
	rec := AuditRecord(7, s)
	if rec.Term != 7 || rec.Findings != 300 || rec.Breaches != 50 {
		t.Errorf("record %+v, want term 7, 300 findings, 50 breaches", rec)
	}
	var back audit.Summary
	if err := json.Unmarshal(rec.Summary, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Findings) != maxRecordedFindings || len(back.Breaches()) != 50 || back.Findings[0].Port != 1000 {
		t.Errorf("recorded %d findings, %d breaches, first %v; want %d, 50, port 1000 first",
			len(back.Findings), len(back.Breaches()), back.Findings[0], maxRecordedFindings)
	}
}
