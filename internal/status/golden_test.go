package status

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// The --status contract, byte for byte: the JSON scripts parse and the text
// operators read, of statuses whose every field is set (and of one whose
// optional fields are all absent), against testdata/status.
func TestStatusGolden(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ptr := func(v time.Time) *time.Time { return &v }
	in := 12.5
	full := Status{
		Applier:  Applier{Holder: "host-a", Term: 7, Heartbeat: ptr(at("2026-01-02T03:04:05Z"))},
		Revision: 42,
		LastApply: &Apply{Revision: 41, Term: 7, Outcome: "failed", Detail: "OpenSM refused the file",
			StartedAt: at("2026-01-02T03:00:00Z"), FinishedAt: at("2026-01-02T03:00:02Z")},
		Jobs:          map[string]int64{"Pending": 2, "Running": 1, "Completed": 30, "Failed": 4},
		NotCompleting: []string{"the last apply, of revision 41, ended failed: OpenSM refused the file"},
		Unchecked:     []string{"another host's OpenSM"},
		Driver: &opensm.Status{State: opensm.StateRunning, PID: 4242, Restarts: 3, Since: at("2026-01-02T02:00:00Z"),
			LastError: "exit status 1", LastErrorAt: at("2026-01-02T01:59:00Z")},
		Lease: &Lease{LastHolder: "host-b", Term: 9, ExpiresAt: ptr(at("2026-01-02T03:05:00Z")), ExpiresIn: &in,
			PreviousHolder: "host-c", PreviousExpired: true, Freeze: "a second SM", Check: "host-c", UnfreezePending: true},
		Adopted: []Adopted{{PKey: "0x0010", Name: "ufm_10", Owner: "network n1",
			Members: []AdoptedMember{{GUID: "0x0002c90300000001", Membership: "full"}},
			Flags:   []string{"ipoib", "mtu=4"}, Revision: 40}},
		Audit: &Audit{Interval: 60, StartedAt: ptr(at("2026-01-02T02:30:00Z")), Revision: 40, Findings: 2,
			Breaches: 1, Counts: map[audit.Kind]int{audit.Kinds[0]: 1, audit.Kinds[1]: 1}},
		OldestOpenJob: ptr(at("2026-01-02T02:59:00Z")),
		ForeignSMs: []ForeignSM{{PortGUID: "0x0002c90300000009", Priority: 15, State: "MASTER",
			OwnState: "STANDBY", Term: 7, SeenAt: at("2026-01-02T02:45:00Z")}},
		ReservedHeld: []string{"port p1 of network n1 holds it: GUID 0x0002c90300a00001 is the port of a subnet manager " +
			"(fabric default's OpenSM): no client may name a subnet manager's port"},
	}
	empty := Status{Jobs: map[string]int64{"Pending": 0, "Running": 0, "Completed": 0, "Failed": 0},
		NotCompleting: []string{}, Unchecked: []string{}, Adopted: []Adopted{}, ForeignSMs: []ForeignSM{}}
	held := full
	held.Lease = &Lease{Holder: "host-a", LastHolder: "host-a", Term: 9}
	// A tenant's network named to hide the lines after it (ESC[8m), forge
	// the verdict's line (CR, LF) and turn text around (U+202E), quoted by an
	// audit's finding, an adopted partition's name and OpenSM's error: each
	// printed on its one line, escaped, in the text; escaped in the JSON too.
	const name = "net\x1b[8m\u202e\u009b\x7f\r\njobs complete: every gate is open\n"
	hostile := full
	hostile.NotCompleting = []string{"the fabric audit found port 0x0002c90300000201 holds pkey 0x0065 (network " + name +
		" (n1)) as a full member but is not recorded in it: isolation breach"}
	hostile.Adopted = []Adopted{{PKey: "0x0010", Name: name, Owner: "network " + name, Members: []AdoptedMember{},
		Flags: []string{}, Revision: 40}}
	hostile.LastApply = &Apply{Revision: 41, Term: 7, Outcome: "failed", Detail: "OpenSM refused " + name,
		StartedAt: at("2026-01-02T03:00:00Z"), FinishedAt: at("2026-01-02T03:00:02Z")}
	for _, tc := range []struct {
		name     string
		fabrics  []Fabric
		statuses []Status
	}{
		{"full", []Fabric{{Name: "default", Section: "[opensm]"}}, []Status{full}},
		{"empty", []Fabric{{Name: "default", Section: "[opensm]"}}, []Status{empty}},
		{"hostile", []Fabric{{Name: "default", Section: "[opensm]"}}, []Status{hostile}},
		{"two-fabrics", []Fabric{{Name: "default", Section: "[opensm]"}, {Name: "b", Section: "[fabric:b]"}},
			[]Status{held, empty}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			statuses := make([]FabricStatus, len(tc.statuses))
			for i, s := range tc.statuses {
				statuses[i] = FabricStatus{Name: tc.fabrics[i].Name, Status: s}
			}
			var js bytes.Buffer
			if err := WriteJSON(&js, statuses); err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, filepath.Join("testdata", tc.name+".json"), js.Bytes())
			var text bytes.Buffer
			if len(statuses) == 1 {
				if err := Print(&text, statuses[0].Status); err != nil {
					t.Fatal(err)
				}
			} else {
				err := PrintFabrics(&text, tc.fabrics, statuses)
				if got := verdictCode(err); got != ExitJobsHeld {
					t.Errorf("verdict of two fabrics, one holding jobs: exit %d; want %d", got, ExitJobsHeld)
				}
			}
			golden.Compare(t, filepath.Join("testdata", tc.name+".txt"), text.Bytes())
		})
	}
}

// The verdict of several fabrics is the worst of theirs.
func TestWorseVerdict(t *testing.T) {
	ok, held, unchecked := error(nil), ExitStatus{ExitJobsHeld}, ExitStatus{ExitCannotTell}
	for _, tc := range []struct {
		verdicts []error
		want     int
	}{
		{[]error{ok, ok}, ExitJobsComplete},
		{[]error{ok, unchecked}, ExitCannotTell},
		{[]error{unchecked, ok}, ExitCannotTell},
		{[]error{held, unchecked}, ExitJobsHeld},
		{[]error{unchecked, held, ok}, ExitJobsHeld},
	} {
		var worst error
		for _, v := range tc.verdicts {
			worst = worseVerdict(worst, v)
		}
		if got := verdictCode(worst); got != tc.want {
			t.Errorf("worst of %v = %d; want %d", tc.verdicts, got, tc.want)
		}
	}
}
