package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// TestAuditFinished: each audit counts by outcome; the gauges are the last
// audit that judged the fabric, and one that failed leaves them as they were.
func TestAuditFinished(t *testing.T) {
	m := New()
	f := m.Fabric(store.DefaultFabric)
	started := time.Unix(1700000000, 0)
	f.AuditFinished(audit.Summary{Started: started, Took: 2 * time.Second, Findings: []audit.Finding{
		{Kind: audit.ForeignPKey}, {Kind: audit.MissingPKey}, {Kind: audit.MissingPKey},
	}}, nil)
	f.AuditFinished(audit.Summary{}, errors.New("the subnet dump cannot be read"))
	got := gathered(t, m)
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"afm_audit_runs_total", "fabric=default,outcome=findings", 1},
		{"afm_audit_runs_total", "fabric=default,outcome=error", 1},
		{"afm_audit_duration_seconds", "fabric=default", 1}, // one observation: the failed audit judged nothing
		{"afm_audit_findings", "fabric=default,kind=foreign_pkey", 1},
		{"afm_audit_findings", "fabric=default,kind=missing_pkey", 2},
		{"afm_audit_findings", "fabric=default,kind=switch_not_enforcing", 0},
		{"afm_audit_breaches", "fabric=default", 1},
		{"afm_audit_last_success_timestamp_seconds", "fabric=default", 1700000002},
	} {
		if v, ok := got[c.name][c.labels]; !ok || v != c.want {
			t.Errorf("%s{%s} = %v (present %t), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	f.AuditFinished(audit.Summary{Started: started.Add(time.Minute)}, nil)
	got = gathered(t, m)
	if got["afm_audit_breaches"]["fabric=default"] != 0 || got["afm_audit_findings"]["fabric=default,kind=missing_pkey"] != 0 ||
		got["afm_audit_runs_total"]["fabric=default,outcome=clean"] != 1 {
		t.Errorf("after a clean audit: %v %v %v", got["afm_audit_breaches"], got["afm_audit_findings"], got["afm_audit_runs_total"])
	}
}

// TestAuditGaugesForgottenWhenNotLeading: a former leader's breaches do not
// outlive its term (the alert reads the max over every manager).
func TestAuditGaugesForgottenWhenNotLeading(t *testing.T) {
	m := New()
	f := m.Fabric(store.DefaultFabric)
	f.Leading(3)
	f.AuditFinished(audit.Summary{Findings: []audit.Finding{{Kind: audit.ForeignPKey}}}, nil)
	if got := gathered(t, m)["afm_audit_breaches"]["fabric=default"]; got != 1 {
		t.Fatalf("afm_audit_breaches = %v while leading, want 1", got)
	}
	f.Leading(0)
	got := gathered(t, m)
	if got["afm_audit_breaches"]["fabric=default"] != 0 || len(got["afm_audit_findings"]) != 0 {
		t.Errorf("after the term: breaches %v, findings %v; want 0 and none", got["afm_audit_breaches"], got["afm_audit_findings"])
	}
}
