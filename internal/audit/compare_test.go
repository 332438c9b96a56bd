package audit

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// Ports of testdata/partitions.conf: H1 and H2 full members of 0x0064, H3 of
// 0x0065, H4 full and H5 limited in 0x0066, H6 in no partition but the
// default one; SM is the master SM's port.
const (
	h1 fabric.GUID = 0x0002c90300000101 + iota*0x100
	h2
	h3
	h4
	h5
	h6
	sm fabric.GUID = 0x0002c90300a00001
)

var sw = pkeyread.SwitchPort{GUID: 0x0002c90300f00001, LID: 2, Port: 3}

func expected(t *testing.T) Expected {
	t.Helper()
	text, err := os.ReadFile("testdata/partitions.conf")
	if err != nil {
		t.Fatal(err)
	}
	file, err := partitions.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	e := Expect(file, map[uint16]string{0x64: "network blue (1b4e28ba)"})
	e.SMPort = sm
	return e
}

// result is a port read: its table, and the switch port's when sw is not nil.
func result(port fabric.GUID, host pkeyread.Table, switchTable pkeyread.Table) pkeyread.Result {
	return pkeyread.Result{Target: pkeyread.Target{Port: port, LID: 9, Switch: sw}, PKeys: host, SwitchPKeys: switchTable}
}

// TestCompare holds each port's table against the file: what a port may
// hold is what the file makes it, keywords resolved as OpenSM resolves them.
func TestCompare(t *testing.T) {
	e := expected(t)
	for _, tc := range []struct {
		name   string
		result pkeyread.Result
		want   []Kind // in order
		breach bool
		heals  bool
		text   string // in the first finding's text
	}{
		{name: "a member as recorded, its switch port too", result: result(h1, pkeyread.Table{0x7fff, 0x8064}, pkeyread.Table{0x7fff, 0x8064})},
		{name: "the SM's port full in the default partition (SELF)", result: result(sm, pkeyread.Table{0xffff}, nil)},
		{name: "a port of no tenant", result: result(h6, pkeyread.Table{0x7fff}, pkeyread.Table{0x7fff})},
		{name: "limited member as recorded", result: result(h5, pkeyread.Table{0x7fff, 0x0066}, nil)},
		{name: "cut off: the network's pkey gone", result: result(h1, pkeyread.Table{0x7fff}, nil),
			want: []Kind{MissingPKey}, heals: true, text: "lacks pkey 0x0064 of network blue (1b4e28ba)"},
		{name: "cut off at the switch", result: result(h3, pkeyread.Table{0x7fff, 0x8065}, pkeyread.Table{0x7fff}),
			want: []Kind{MissingPKey}, heals: true, text: "switch 0x0002c90300f00001 port 3 (facing port 0x0002c90300000301) lacks pkey 0x0065"},
		{name: "another tenant's pkey", result: result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, nil),
			want: []Kind{ForeignPKey}, breach: true, text: "holds pkey 0x0064 (network blue (1b4e28ba)) as a full member but is not recorded in it"},
		{name: "a limited entry of another tenant's pkey is a breach too", result: result(h6, pkeyread.Table{0x7fff, 0x0065}, nil),
			want: []Kind{ForeignPKey}, breach: true},
		{name: "a pkey no partition has", result: result(h6, pkeyread.Table{0x7fff, 0x8123}, nil),
			want: []Kind{ForeignPKey}, breach: true, text: "pkey 0x0123 (no recorded partition)"},
		{name: "the switch port lets another pkey through", result: result(h1, pkeyread.Table{0x7fff, 0x8064}, pkeyread.Table{0x7fff, 0x8064, 0x8065}),
			want: []Kind{ForeignPKey}, breach: true, text: "switch 0x0002c90300f00001 port 3"},
		{name: "full in the default partition: every port reachable", result: result(h6, pkeyread.Table{0xffff}, nil),
			want: []Kind{WrongMembership}, breach: true, text: "as a full member, recorded limited: isolation breach"},
		{name: "limited where full is recorded", result: result(h4, pkeyread.Table{0x7fff, 0x0066}, nil),
			want: []Kind{WrongMembership}, heals: true, text: "cut off"},
		{name: "the default partition gone: cut off from the SM", result: result(h6, pkeyread.Table{}, nil),
			want: []Kind{MissingPKey}, heals: true},
		{name: "not read", result: pkeyread.Result{Target: pkeyread.Target{Port: h2}, Err: errors.New("no answer")},
			want: []Kind{Unreachable}, text: "port 0x0002c90300000201: could not be read: no answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(e, []pkeyread.Result{tc.result})
			kinds := make([]Kind, len(got))
			for i, f := range got {
				kinds[i] = f.Kind
			}
			if !slices.Equal(kinds, tc.want) {
				t.Fatalf("findings %v, want kinds %v", got, tc.want)
			}
			s := Summary{Findings: got}
			if len(s.Breaches()) > 0 != tc.breach || s.Heals() != tc.heals {
				t.Errorf("breach %t heals %t, want %t and %t: %v", len(s.Breaches()) > 0, s.Heals(), tc.breach, tc.heals, got)
			}
			if tc.text != "" && !strings.Contains(got[0].Text, tc.text) {
				t.Errorf("text %q, want it to contain %q", got[0].Text, tc.text)
			}
		})
	}
}

// TestExpectSELFUnknown: without the master SM's port, SELF names none, and
// the SM's full membership of the default partition is a finding, not
// silently accepted.
func TestExpectSELFUnknown(t *testing.T) {
	e := expected(t)
	e.SMPort = 0
	got := Compare(e, []pkeyread.Result{result(sm, pkeyread.Table{0xffff}, nil)})
	if len(got) != 1 || got[0].Kind != WrongMembership {
		t.Errorf("findings %v, want one wrong_membership", got)
	}
}

// TestCompareEnforcement: a switch port enforcing in one direction only is
// not enforcing.
func TestCompareEnforcement(t *testing.T) {
	infos := []pkeyread.PortInfoResult{
		{Port: sw, Info: pkeyread.PortInfo{EnforceInbound: true, EnforceOutbound: true}},
		{Port: sw, Info: pkeyread.PortInfo{EnforceInbound: true}},
		{Port: sw, Err: errors.New("no answer")},
	}
	got := CompareEnforcement([]fabric.GUID{h1, h2, h3}, infos)
	if len(got) != 2 || got[0].Kind != NotEnforcing || got[0].Port != h2 || !got[0].Breach() || got[1].Kind != Unreachable {
		t.Errorf("findings %v, want h2 not enforcing and h3 unreachable", got)
	}
}

// TestSummaryJSON: a summary survives the database and --json: GUIDs and
// pkeys as text, read back as they were.
func TestSummaryJSON(t *testing.T) {
	e := expected(t)
	findings := Compare(e, []pkeyread.Result{result(h3, pkeyread.Table{0x7fff, 0x8065, 0x8064}, pkeyread.Table{0x7fff})})
	s := Summary{Revision: 7, Ports: 6, Read: 6, Findings: findings,
		Partitions: summarize(e, []fabric.GUID{h1, h2, h3, h4, h5, h6, sm}, findings)}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"port":"0x0002c90300000301"`, `"pkey":"0x0064"`, `"switch":"0x0002c90300f00001"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON %s lacks %s", data, want)
		}
	}
	var back Summary
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Findings) != len(findings) || back.Findings[0].Port != h3 || back.Findings[0].PKey != 0x64 ||
		back.Findings[len(findings)-1].Switch == nil || back.Findings[len(findings)-1].Switch.GUID != sw.GUID {
		t.Errorf("read back %+v, want %+v", back.Findings, findings)
	}
	blue := back.Partitions[0]
	if blue.PKey != 0x64 || blue.Members != 2 || blue.Findings[ForeignPKey] != 1 {
		t.Errorf("partition 0x0064's line %+v, want 2 members and one foreign_pkey", blue)
	}
}
