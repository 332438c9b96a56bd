package neutronimport

import (
	"strings"
	"testing"
)

func TestReportWrite(t *testing.T) {
	net := Finding{Kind: "network", ID: "n1", About: "vlan 150 on physnet \"ibnet\""}
	port := Finding{Kind: "port", ID: "p1", About: "GUID 0x0002c9030000000a, host h1, network n1"}
	tests := []struct {
		name   string
		r      Report
		want   []string // the lines, the summary's start last
		agrees bool
	}{{
		name: "an import that failed before Neutron was read says nothing",
		r:    Report{Recorded: []Finding{net}}, want: nil, agrees: false,
	}, {
		name: "a dry run says what it would do, and disagrees",
		r:    Report{read: true, DryRun: true, Recorded: []Finding{net}, Removed: []Finding{port}},
		want: []string{"would record: network n1 (vlan 150 on physnet \"ibnet\")",
			"would remove: port p1 (GUID 0x0002c9030000000a, host h1, network n1)", "summary: "},
	}, {
		name: "recorded with nothing left agrees",
		r:    Report{read: true, Recorded: []Finding{{Kind: "port", ID: "p1", About: "x", Reason: "job 7"}}, InSync: 2},
		want: []string{"recorded: port p1 (x): job 7", "summary: "}, agrees: true,
	}, {
		name: "what Neutron lacks, left, disagrees",
		r:    Report{read: true, NotInNeutron: []Finding{{Kind: "network", ID: "n9", About: "pkey 0x00a0", Reason: "Neutron lacks it (--prune removes it)"}}},
		want: []string{"not in Neutron: network n9 (pkey 0x00a0): Neutron lacks it (--prune removes it)", "summary: "},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := tt.r.Write(&b); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if b.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tt.want) {
				t.Fatalf("printed %q, want %d lines: %q", b.String(), len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d = %q, want it to start %q", i, lines[i], w)
				}
			}
			if tt.r.Agrees() != tt.agrees {
				t.Errorf("Agrees() = %v, want %v", tt.r.Agrees(), tt.agrees)
			}
		})
	}
}
