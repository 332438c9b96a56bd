package applier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/audit"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// statusSays is what --status (and afm_gate_closed) judges of the
// database: the rows as recorded, read by verdict.Source as the command
// configures it with an audit and a second-SM look.
func statusSays(t *testing.T, r *applyRig, own fabric.GUID) string {
	t.Helper()
	reasons, err := verdict.Source{Store: r.st, SubnetDump: r.dump, Audits: r.st, SecondSMs: r.st, Own: own}.Closed(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return "Not completing: " + strings.Join(verdict.Texts(reasons), "; ")
}

// TestHeldJobSaysWhatStatusSays: on one database state (an audit's breach,
// a cleared enforcement recorded by a previous term, a cloned GUID in the
// sweep), the
// text of a job a new term holds is what --status says, reason for reason
// and in the same order. Before the verdict had one author, --status said
// the audit's breaches in its own words and put the duplicated GUID before
// them, while the applier named the ports.
func TestHeldJobSaysWhatStatusSays(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			dup, err := os.ReadFile(filepath.Join("testdata", "duplicates", "dup.log"))
			if err != nil {
				t.Fatal(err)
			}
			// Each sweep logs OpenSM's ERR 0D01 for a cloned GUID.
			r := newApplyRigOn(t, engine, true, func() string { return heavySweep(string(dup)) })
			ctx := t.Context()
			breach := audit.Finding{Kind: audit.ForeignPKey, Port: 0x0002c90300000201, PKey: 0x65,
				Text: "port 0x0002c90300000201 holds pkey 0x0065 (network n) but is not recorded in it"}
			lie := audit.Finding{Kind: audit.ForeignPKey, Port: 0x0002c90300000301, PKey: 0x123, HostOnly: true,
				Text: "port 0x0002c90300000301 holds pkey 0x0123, which no partition has"}
			s := audit.Summary{Started: time.Now().UTC().Truncate(time.Millisecond), Findings: []audit.Finding{breach, lie}}
			if err := r.st.RecordAudit(ctx, AuditRecord(r.term.id, s)); err != nil {
				t.Fatal(err)
			}
			if err := r.st.RecordEnforcementErrors(ctx, r.term.id, []store.EnforcementSighting{{Switch: "0x0002c90300f00001",
				Port: 2, Line: "ERR 0507"}}); err != nil {
				t.Fatal(err)
			}
			// The new term restores what the previous one recorded.
			r.term.Cfg.Audit = AuditConfig{Interval: time.Hour, Reader: &pkeyread.Reader{}, Recorder: r.st}
			r.term.loadAudit(ctx)
			job := r.network(101)
			if res := r.term.apply(ctx); res != applyDone {
				t.Fatalf("apply: %v, want done", res)
			}
			want := statusSays(t, r, 0)
			for _, says := range []string{EnforcementCleared, "the fabric audit found port 0x0002c90300000201", DuplicateGUIDText} {
				if !strings.Contains(want, says) {
					t.Fatalf("--status says %q; want %q in it", want, says)
				}
			}
			if got := r.job(job.ID); got.Status == store.StatusCompleted || !strings.HasSuffix(got.Description, "\n"+want) {
				t.Errorf("the held job says\n%q\n--status says\n%q", got.Description, want)
			}
			// The poll of the gates says the same.
			r.term.pollGates(ctx)
			if got := r.job(job.ID); !strings.HasSuffix(got.Description, "\n"+want) {
				t.Errorf("after a poll the held job says\n%q\n--status says\n%q", got.Description, want)
			}
		})
	}
}

// TestSecondSMJobSaysWhatStatusSays: a second SM recorded by a previous
// term holds a new term's jobs with the text --status gives it. --status
// used to say it in words of its own ("not this manager's OpenSM (which
// was STANDBY), seen by term 1 at ...").
func TestSecondSMJobSaysWhatStatusSays(t *testing.T) {
	const own fabric.GUID = 0x0002c90300a00001
	r := newApplyRigOn(t, "sqlite", true, func() string { return heavySweep("") })
	ctx := t.Context()
	tenant := store.SecondSM{PortGUID: 0x0002c90300000301, Priority: 15, State: "MASTER", OwnState: "STANDBY"}
	if err := r.st.RecordSecondSM(ctx, r.term.id, tenant); err != nil {
		t.Fatal(err)
	}
	job := r.network(101)
	r.term.secondSM = &secondSMWatch{check: &SecondSMCheck{Own: own, Store: r.st}}
	r.term.secondSM.restore(ctx, r.term.watchEnv())
	r.term.secondSM.describeHeld(ctx, r.term.watchEnv())
	want := statusSays(t, r, own)
	if got := r.job(job.ID); !strings.HasSuffix(got.Description, "\n"+want) {
		t.Errorf("the held job says\n%q\n--status says\n%q", got.Description, want)
	}
}
