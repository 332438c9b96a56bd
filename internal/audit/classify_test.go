package audit

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// TestClassifyHostOnly: a host table that lies while the switch port facing
// it is right and enforces holds that host's jobs only (HostOnly, no
// breach); the switch side wrong, unread, not enforcing or unreadable keeps
// the fabric-wide breach.
func TestClassifyHostOnly(t *testing.T) {
	e := expected(t)
	honest := pkeyread.Table{0x7fff, 0x8065} // H3's switch port, as recorded
	enforcing := pkeyread.PortInfoResult{Port: sw, Info: pkeyread.PortInfo{EnforceInbound: true, EnforceOutbound: true}}
	for _, tc := range []struct {
		name     string
		result   pkeyread.Result
		info     *pkeyread.PortInfoResult // the switch port's PortInfo; nil: enforcement not checked
		hostOnly []Kind                   // the HostOnly findings' kinds
		breaches []Kind
	}{
		{name: "another tenant's pkey on the host, the switch port honest and enforcing",
			result: result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, honest), info: &enforcing,
			hostOnly: []Kind{ForeignPKey}},
		{name: "full default membership on the host, the switch port honest",
			result: result(h3, pkeyread.Table{0xffff, 0x8065}, honest), info: &enforcing,
			hostOnly: []Kind{WrongMembership}},
		{name: "the same where the fabric does not report enforcement",
			result:   result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, honest),
			hostOnly: []Kind{ForeignPKey}},
		{name: "the switch port holds the foreign pkey too",
			result: result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, pkeyread.Table{0x7fff, 0x8065, 0x8064}), info: &enforcing,
			breaches: []Kind{ForeignPKey, ForeignPKey}},
		{name: "the switch port not read",
			result: result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, nil), info: &enforcing,
			breaches: []Kind{ForeignPKey}},
		{name: "the switch port cut off from the host's own pkey",
			result: result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, pkeyread.Table{0x7fff}), info: &enforcing,
			breaches: []Kind{ForeignPKey}},
		{name: "the switch port honest but not enforcing",
			result:   result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, honest),
			info:     &pkeyread.PortInfoResult{Port: sw, Info: pkeyread.PortInfo{EnforceInbound: true}},
			breaches: []Kind{ForeignPKey, NotEnforcing}},
		{name: "the switch port's enforcement unreadable",
			result:   result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, honest),
			info:     &pkeyread.PortInfoResult{Port: sw, Err: errors.New("no answer")},
			breaches: []Kind{ForeignPKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			findings := Compare(e, []pkeyread.Result{tc.result})
			if tc.info != nil {
				findings = append(findings, CompareEnforcement([]fabric.GUID{tc.result.Target.Port},
					[]pkeyread.PortInfoResult{*tc.info})...)
			}
			findings = ClassifyHostOnly(findings, switchSides([]pkeyread.Result{tc.result}))
			var hostOnly, breaches []Kind
			for _, f := range findings {
				if f.HostOnly {
					hostOnly = append(hostOnly, f.Kind)
					if !strings.Contains(f.Text, "only this host's jobs are held") {
						t.Errorf("host-only finding's text %q does not say so", f.Text)
					}
				}
				if f.Breach() {
					breaches = append(breaches, f.Kind)
				}
			}
			if !slices.Equal(hostOnly, tc.hostOnly) || !slices.Equal(breaches, tc.breaches) {
				t.Errorf("host-only %v, breaches %v; want %v and %v: %v", hostOnly, breaches, tc.hostOnly, tc.breaches, findings)
			}
		})
	}
}
