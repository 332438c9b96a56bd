package applier

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// TestBreachReasons: one reason per gate kind, naming the first ports and
// how many more, so that a fabric-wide breach makes a readable description.
func TestBreachReasons(t *testing.T) {
	var breaches []audit.Finding
	for i := range 5 {
		breaches = append(breaches, audit.Finding{Kind: audit.ForeignPKey, Text: fmt.Sprintf("port %d holds pkey 0x0065", i)})
	}
	breaches = append(breaches, audit.Finding{Kind: audit.NotEnforcing, Text: "switch port 3 does not enforce"})
	got := breachReasons(breaches)
	if len(got) != 2 || got[0].Kind != GateIsolationBreach || got[1].Kind != GateSwitchNotEnforcing {
		t.Fatalf("reasons %+v, want isolation_breach then switch_not_enforcing", got)
	}
	for _, want := range []string{"port 0 holds", "port 2 holds", "(and 2 more; see --audit)", "once an audit finds the fabric clean"} {
		if !strings.Contains(got[0].Text, want) {
			t.Errorf("reason %q lacks %q", got[0].Text, want)
		}
	}
	if strings.Contains(got[0].Text, "port 3 holds") {
		t.Errorf("reason %q names more than three ports", got[0].Text)
	}
	if len(breachReasons(nil)) != 0 {
		t.Error("reasons without breaches")
	}
}

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
