package pkeyread

import (
	"errors"
	"strings"
	"testing"
)

func TestProve(t *testing.T) {
	const h1, h2, h3, sw = 0x0002c90300000101, 0x0002c90300000201, 0x0002c90300000301, 0x0002c90300f00001
	facing := func(port int) SwitchPort { return SwitchPort{GUID: sw, LID: 2, Port: port} }
	results := []Result{
		// H1 a full member of 0x0064, its switch port enforcing it.
		{Target: Target{Port: h1, LID: 3, Switch: facing(2)}, PKeys: Table{0x7fff, 0x8064}, SwitchPKeys: Table{0x7fff, 0x8064}},
		// H2 a limited member; its switch port not yet updated.
		{Target: Target{Port: h2, LID: 4, Switch: facing(3)}, PKeys: Table{0x7fff, 0x0064}, SwitchPKeys: Table{0x7fff}},
		// H3 unreadable.
		{Target: Target{Port: h3, LID: 5}, Err: errors.New("NodeInfo: no answer")},
	}
	// H2 again without its switch port read.
	hostOnly := []Result{{Target: Target{Port: h2, LID: 4}, PKeys: Table{0x7fff, 0x0064}}}
	tests := []struct {
		name    string
		results []Result
		want    Want
		reason  string // "" for proven
	}{
		{"a full member", results, Want{h1, 0x64, Full}, ""},
		{"the membership bit of the wanted pkey is ignored", results, Want{h1, 0x8064, Full}, ""},
		{"full wanted, limited held", results, Want{h2, 0x64, Full}, "holds pkey 0x0064 as limited, want full"},
		{"limited wanted, full held", results, Want{h1, 0x64, Limited}, "holds pkey 0x0064 as full, want limited"},
		{"an addition the switch port lacks", results, Want{h2, 0x64, Limited}, "switch 0x0002c90300f00001 port 3, facing port 0x0002c90300000201, does not hold pkey 0x0064"},
		{"the host port alone read", hostOnly, Want{h2, 0x64, Limited}, ""},
		{"a removal not yet done", results, Want{h1, 0x64, NotMember}, "still holds pkey 0x0064 (full)"},
		{"a removal done", results, Want{h1, 0x65, NotMember}, ""},
		{"a removal the switch port still holds", []Result{{Target: Target{Port: h1, Switch: facing(2)},
			PKeys: Table{0x7fff}, SwitchPKeys: Table{0x7fff, 0x8064}}}, Want{h1, 0x64, NotMember}, "facing port 0x0002c90300000101, still holds pkey 0x0064"},
		{"an addition not yet there", results, Want{h1, 0x65, Full}, "holds pkey 0x0065 as not a member, want full"},
		{"unreadable", results, Want{h3, 0x64, NotMember}, "could not be read: NodeInfo: no answer"},
		{"not read", results, Want{0x0002c90300000401, 0x64, Full}, "port 0x0002c90300000401 was not read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Prove(tt.results, []Want{tt.want})
			if len(v) != 1 || v[0].Want != tt.want {
				t.Fatalf("verdicts %+v for %v", v, tt.want)
			}
			if tt.reason == "" {
				if !v[0].Proven || v[0].Reason != "" {
					t.Errorf("%v: not proven: %s", tt.want, v[0].Reason)
				}
				return
			}
			if v[0].Proven || !strings.Contains(v[0].Reason, tt.reason) {
				t.Errorf("%v: proven %v, %q; want not proven, %q", tt.want, v[0].Proven, v[0].Reason, tt.reason)
			}
		})
	}
}

func TestWantString(t *testing.T) {
	for w, want := range map[Want]string{
		{0x0002c90300000101, 0x8064, Full}:    "port 0x0002c90300000101 a full member of pkey 0x0064",
		{0x0002c90300000101, 0x64, NotMember}: "port 0x0002c90300000101 without pkey 0x0064",
	} {
		if got := w.String(); got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}
