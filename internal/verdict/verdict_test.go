package verdict

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

var (
	switch1 = store.ExpectedSwitch{GUID: 0x0002c90300f00001, Description: "S1"}
	switch2 = store.ExpectedSwitch{GUID: 0x0002c90300f00002, Description: "S2"}
	at      = time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	own     = fabric.GUID(0x0002c90300a00001)
	tenant  = store.SecondSM{PortGUID: 0x0002c90300000301, Priority: 15, State: "MASTER", OwnState: "STANDBY"}
	clone   = store.DuplicateGUID{DuplicateSighting: store.DuplicateSighting{GUID: "0x0002c90300000100", Kind: "node",
		Places: []string{"0x0002c90300f00001:2", "0x0002c90300f00002:3"}, Count: 27921}, LastSeen: at}
	cleared = store.EnforcementError{EnforcementSighting: store.EnforcementSighting{Switch: "0x0002c90300f00001", Port: 3}}
	freeze  = "Frozen: this manager's OpenSM went STANDBY instead of master, so another SM is master on the fabric; " +
		"make sure the OpenSM of host-a pid 42 is stopped, then run --unfreeze (docs/ha.md)"
)

// healthy is the evidence of a healthy fabric, the dump in testdata/dump.
func healthy(t *testing.T, dump string) Evidence {
	path := filepath.Join("testdata", dump)
	topo, err := topology.Load(path)
	return Evidence{Expected: []store.ExpectedSwitch{switch1, switch2}, SubnetDump: path, Dump: Dump{Topo: topo, Err: err},
		SecondSM: SecondSMEvidence{Own: own}}
}

// audited is the evidence of the audit in testdata/file, as recorded.
func audited(t *testing.T, file string, breaches int64) *Audit {
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return AuditOf(store.Audit{StartedAt: at, Breaches: breaches, Summary: b})
}

// TestJudge: one case per kind of reason and per-port hold, combinations,
// and dumps that cannot be read; each verdict is compared with its golden
// file in testdata/golden (go test -update rewrites them).
func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   func(t *testing.T) Evidence
	}{
		{"open", func(t *testing.T) Evidence { return healthy(t, "two-switches.lst") }},
		{"no_expected_switches", func(t *testing.T) Evidence { return Evidence{} }},
		{"switch_missing", func(t *testing.T) Evidence { return healthy(t, "one-switch-gone.lst") }},
		{"dump_not_configured", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.SubnetDump = ""
			return ev
		}},
		{"switches_unchecked_half_written", func(t *testing.T) Evidence { return healthy(t, "half-written.lst") }},
		{"switches_unchecked_absent", func(t *testing.T) Evidence { return healthy(t, "absent.lst") }},
		{"switches_unchecked_not_read", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.Dump = Dump{}
			return ev
		}},
		{"unconfirmed_switch", func(t *testing.T) Evidence { return healthy(t, "a-host-as-switch.lst") }},
		{"enforcement_cleared", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.EnforcementErrors = []store.EnforcementError{cleared}
			return ev
		}},
		{"isolation_breach_and_switch_not_enforcing", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.Audit = audited(t, "audit-breaches.json", 6)
			return ev
		}},
		{"isolation_breach_summary_lost", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.Audit = AuditOf(store.Audit{StartedAt: at, Breaches: 2, Summary: []byte("{not json")})
			return ev
		}},
		{"held_ports", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.Audit = audited(t, "audit-held.json", 0)
			return ev
		}},
		{"duplicate_guid", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.Duplicates = []store.DuplicateGUID{clone}
			return ev
		}},
		{"moved_guid_seen", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			// H1 recorded behind S1 port 3; the dump has it behind S1 port 2.
			ev.Places = []store.GUIDPlace{{GUID: 0x0002c90300000101, Switch: 0x0002c90300f00001, Port: 3},
				{GUID: 0x0002c90300000201, Switch: 0x0002c90300f00002, Port: 1}}
			return ev
		}},
		{"moved_guid_marked_off_fabric", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			// A GUID off the fabric keeps its mark: the clone's link is down.
			ev.Places = []store.GUIDPlace{{GUID: 0x0002c90300000901, Switch: 0x0002c90300f00001, Port: 6,
				MovedTo: "0x0002c90300f00002:5", MovedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}}
			return ev
		}},
		{"frozen", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.Freeze = freeze
			return ev
		}},
		{"second_subnet_manager", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.SecondSM.Master = &tenant
			return ev
		}},
		{"second_subnet_manager_not_master_yet", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.SecondSM.Master = &store.SecondSM{PortGUID: 0x0002c90300000301, Priority: 0, State: "DISCOVERING", OwnState: "MASTER"}
			return ev
		}},
		{"second_subnet_manager_own_deposed", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.SecondSM.Master = &store.SecondSM{PortGUID: own, Priority: 1, State: "NOTACTIVE", OwnState: "NOTACTIVE"}
			return ev
		}},
		{"second_subnet_manager_unread", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.SecondSM.Unread = true
			return ev
		}},
		{"second_subnet_manager_appeared_after_the_look", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.SecondSM.Appeared = "Received Generic Notice type:4 num:144 (CapabilityMask) Producer:1 (Channel Adapter) from LID:5"
			return ev
		}},
		{"second_subnet_manager_restart_deferred", func(t *testing.T) Evidence {
			ev := healthy(t, "two-switches.lst")
			ev.SecondSM.Master, ev.SecondSM.RestartAt, ev.SecondSM.RestartEvery = &tenant, at.Add(time.Minute), 10
			return ev
		}},
		{"everything", func(t *testing.T) Evidence {
			ev := healthy(t, "a-host-as-switch.lst")
			ev.Expected = append(ev.Expected, store.ExpectedSwitch{GUID: 0x0002c90300f00009, Description: "S9"})
			ev.EnforcementErrors = []store.EnforcementError{cleared}
			ev.Audit = audited(t, "audit-breaches.json", 6)
			ev.Audit.Summary.Findings = append(ev.Audit.Summary.Findings, audited(t, "audit-held.json", 0).Summary.Findings...)
			ev.Duplicates, ev.Freeze, ev.SecondSM.Master = []store.DuplicateGUID{clone}, freeze, &tenant
			return ev
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.ev(t))
			golden.Compare(t, filepath.Join("testdata", "golden", tc.name+".txt"), []byte(render(v)))
			if v.Open() != (len(v.Reasons) == 0) {
				t.Errorf("Open = %v with %d reasons", v.Open(), len(v.Reasons))
			}
		})
	}
}

// render writes a verdict a line per reason, then a line per held port.
func render(v Verdict) string {
	var b strings.Builder
	if v.Open() {
		b.WriteString("open\n")
	}
	for _, r := range v.Reasons {
		fmt.Fprintf(&b, "%s\t%s\n", r.Kind, r.Text)
	}
	for _, line := range v.HeldLines() {
		fmt.Fprintf(&b, "held\t%s\n", line)
	}
	return b.String()
}

// TestJudgeIsOfItsEvidenceAlone: the same evidence gives the same verdict,
// whoever judges it and however often; what a judge leaves out changes
// only its part (Of).
func TestJudgeIsOfItsEvidenceAlone(t *testing.T) {
	ev := healthy(t, "two-switches.lst")
	ev.Duplicates, ev.SecondSM.Master = []store.DuplicateGUID{clone}, &tenant
	first, second := Judge(ev), Judge(ev)
	if render(first) != render(second) {
		t.Fatalf("two verdicts of one evidence differ:\n%s\n%s", render(first), render(second))
	}
	alone := Judge(Evidence{SecondSM: ev.SecondSM}).Of(SecondSM)
	if !slices.Equal(alone, first.Of(SecondSM)) {
		t.Errorf("the second SM judged alone = %v; in the whole verdict %v", alone, first.Of(SecondSM))
	}
}

// TestHoldOf: a job with a place on a held port says so; on another port, nothing.
func TestHoldOf(t *testing.T) {
	ev := healthy(t, "two-switches.lst")
	ev.Audit = audited(t, "audit-held.json", 0)
	v := Judge(ev)
	if !v.Open() {
		t.Fatalf("a host's own table closed the fabric's gates: %v", v.Reasons)
	}
	why, ok := v.HoldOf(0x0002c90300000201)
	if !ok || !strings.HasPrefix(why, "port 0x0002c90300000201 is held: port 0x0002c90300000201 holds pkey 0x0123") {
		t.Errorf("HoldOf(H2) = %q, %v", why, ok)
	}
	if why, ok := v.HoldOf(0x0002c90300000401); ok {
		t.Errorf("an unreachable port is held: %q", why)
	}
}
