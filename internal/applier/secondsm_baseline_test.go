package applier

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The term's first full second-SM look (the baseline) runs beside its
// first apply's sweep (besideSweep), so that the look between that sweep's
// end and the jobs' completion is the short one; the windows it opens: an
// SM that appears during the baseline, a baseline that fails, one the
// term's end cuts short, one read before any master swept the host ports.

// finishLooks records, from the term's log, whether each of finish's looks
// (confirm) was a full one.
type finishLooks struct {
	mu   sync.Mutex
	full []bool
}

func (l *finishLooks) Enabled(context.Context, slog.Level) bool { return true }
func (l *finishLooks) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *finishLooks) WithGroup(string) slog.Handler            { return l }
func (l *finishLooks) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "second-SM look before the jobs complete" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "full" {
			l.mu.Lock()
			l.full = append(l.full, a.Value.Bool())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *finishLooks) seen() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.full...)
}

// newBaselineRig is newLookRig's fabric and term before its first apply,
// its looks recorded.
func newBaselineRig(t *testing.T, hosts int) (*lookRig, *finishLooks) {
	r := &lookRig{applyRig: newApplyRig(t, false, func() string { return heavySweep("") }),
		smp: newWideFakeSMPFabric(hosts, 2)}
	dump, sws := largeDump(hosts, 2)
	if err := os.WriteFile(r.dump, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.st.ConfirmSwitches(t.Context(), sws); err != nil {
		t.Fatal(err)
	}
	looks := &finishLooks{}
	r.term.Log = slog.New(looks)
	r.term.Cfg.Readback = &pkeyread.Reader{}
	r.term.readTables = &silentPorts{}
	r.term.SecondSM = &SecondSMCheck{Dialer: r.smp, Own: hostPort(1), Store: r.st}
	r.term.secondSM = &secondSMWatch{check: r.term.SecondSM}
	r.term.secondSM.restore(t.Context(), r.term.watchEnv())
	return r, looks
}

// onceAfter runs change once, right after the first answer to attr from lid.
func (f *fakeSMPFabric) onceAfter(lid, attr uint16, change func()) {
	var once sync.Once
	f.answered = func(l, a uint16) {
		if l == lid && a == attr {
			once.Do(change)
		}
	}
}

const (
	attrNodeInfo = 0x0011
	attrPortInfo = 0x0015
	baselineOwn  = 2 + 1 // H1's LID on newBaselineRig's fabric: this OpenSM's port
	baselineH2   = 2 + 2
	baselineH3   = 2 + 3 // a tenant's host
)

// TestTermFirstFinishLooksShort: the term's first apply completes its job
// on the short look; the full one ran beside the sweep.
func TestTermFirstFinishLooksShort(t *testing.T) {
	r, looks := newBaselineRig(t, 40)
	r.network(101)
	j := r.portIn(r.netID, "port-h2", hostPort(2))
	r.applied("the term's first apply")
	wantStatus(t, r.applyRig, "H2's port", j, store.StatusCompleted)
	if got := looks.seen(); len(got) != 1 || got[0] {
		t.Fatalf("finish's looks full = %v; want one short look", got)
	}
	if !r.term.secondSM.scanned {
		t.Fatal("the term has no full look after its first apply")
	}
}

// TestBaselineWindows opens the windows of the baseline: each case changes
// the fabric while the baseline reads, and says which look finish then runs
// and what becomes of the job.
func TestBaselineWindows(t *testing.T) {
	master := pkeyread.SMMaster
	tenantSM := func(r *lookRig) {
		r.smp.set(func(p map[uint16]*fakeSMPPort) {
			p[baselineH3].sm = &pkeyread.SMInfo{GUID: hostPort(3), State: master}
		})
	}
	for _, tc := range []struct {
		name string
		// during changes the fabric (and OpenSM's log) during the
		// baseline, after the port at lid answered attr.
		lid, attr uint16
		during    func(r *lookRig)
		before    func(r *lookRig) // before the apply
		full      bool             // finish's look is a full one
		status    string
		says      string
	}{{
		// Ports without M_Key protection: the SM programs ports the short
		// look does not read; OpenSM's trap 144 makes finish look at all.
		name: "an SM OpenSM logs appears after the baseline read its port", lid: baselineH3, attr: attrPortInfo,
		before: func(r *lookRig) { r.smp.unprotect() },
		during: func(r *lookRig) {
			tenantSM(r)
			opensmtest.AppendLog(r.t, r.sm.log, trap144("5"))
		},
		full: true, status: store.StatusRunning, says: "Second subnet manager: port " + hostPort(3).String(),
	}, {
		// Nothing logged, but the SM took the changed port over: the
		// short look reads that port's MasterSMLID.
		name: "an SM takes the changed port over after the baseline read it", lid: baselineH3, attr: attrPortInfo,
		during: func(r *lookRig) {
			tenantSM(r)
			r.smp.set(func(p map[uint16]*fakeSMPPort) { p[baselineH2].masterLID = baselineH3 })
		},
		full: false, status: store.StatusRunning, says: "Second subnet manager: port " + hostPort(3).String(),
	}, {
		// The baseline fails on this OpenSM's port; finish's look is the
		// full one after the sweep, which reads the fabric.
		name: "the baseline fails", lid: baselineOwn, attr: attrNodeInfo,
		before: func(r *lookRig) {
			r.smp.set(func(p map[uint16]*fakeSMPPort) { p[baselineOwn].answersAs = hostPort(4) })
		},
		during: func(r *lookRig) {
			r.smp.set(func(p map[uint16]*fakeSMPPort) { p[baselineOwn].answersAs = 0 })
		},
		full: true, status: store.StatusCompleted,
	}, {
		name: "the baseline and finish's look fail", lid: baselineOwn, attr: attrNodeInfo,
		before: func(r *lookRig) {
			r.smp.set(func(p map[uint16]*fakeSMPPort) { p[baselineOwn].answersAs = hostPort(4) })
		},
		during: func(*lookRig) {},
		full:   true, status: store.StatusRunning, says: "which subnet manager is master could not be read",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r, looks := newBaselineRig(t, 40)
			r.network(101)
			if tc.before != nil {
				tc.before(r)
			}
			r.smp.onceAfter(tc.lid, tc.attr, func() { tc.during(r) })
			j := r.portIn(r.netID, "port-h2", hostPort(2))
			r.applied("H2's port")
			got := wantStatus(t, r.applyRig, "H2's port", j, tc.status)
			if !strings.Contains(got.Description, tc.says) {
				t.Errorf("H2's job says %q; want %q", got.Description, tc.says)
			}
			if seen := looks.seen(); len(seen) == 0 || seen[len(seen)-1] != tc.full {
				t.Errorf("finish's looks full = %v; want the last %v", seen, tc.full)
			}
		})
	}
}

// TestBaselineBeforeAMasterSwept: a baseline read before this OpenSM is
// master over the fabric (a cold start) judges nothing it could not see:
// the term stays unscanned (finish looks at every port after the sweep) and
// the foreign SMs recorded stay; one read after is the term's full look.
func TestBaselineBeforeAMasterSwept(t *testing.T) {
	for _, tc := range []struct {
		name    string
		unswept func(p map[uint16]*fakeSMPPort)
	}{
		{"this OpenSM's port names no master", func(p map[uint16]*fakeSMPPort) { p[baselineOwn].masterLID = 0 }},
		{"host ports name no master", func(p map[uint16]*fakeSMPPort) {
			for lid, port := range p {
				if lid > baselineH2 {
					port.masterLID = 0
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newBaselineRig(t, 40)
			ctx, w, env := t.Context(), r.term.secondSM, r.term.watchEnv()
			foreign := []store.SecondSM{{PortGUID: hostPort(7), Priority: 3, State: "MASTER", OwnState: "MASTER"}}
			if err := r.st.RecordForeignSMs(ctx, r.term.id, foreign); err != nil {
				t.Fatal(err)
			}
			w.mu.Lock()
			w.unreadLook = "finish's look before: no answer" // its jobs wait for a look that reads the fabric
			w.mu.Unlock()
			r.smp.set(tc.unswept)
			w.besideSweep(ctx, env)()
			if sms, err := r.st.ForeignSMs(ctx); err != nil || len(sms) != 1 || w.scanned || len(w.reason()) != 1 {
				t.Fatalf("after a baseline before the sweep: foreign SMs %+v (%v), scanned %v, reason %v; want the "+
					"record kept, no full look, the jobs still held", sms, err, w.scanned, w.reason())
			}
			r.smp.set(func(p map[uint16]*fakeSMPPort) {
				for _, port := range p {
					port.masterLID = baselineOwn
				}
			})
			w.besideSweep(ctx, env)()
			if sms, err := r.st.ForeignSMs(ctx); err != nil || len(sms) != 0 || !w.scanned || len(w.reason()) != 0 {
				t.Fatalf("after a baseline of a swept fabric: foreign SMs %+v (%v), scanned %v, reason %v; want none, "+
					"a full look, the gate open", sms, err, w.scanned, w.reason())
			}
		})
	}
}

// TestBaselineCutShort: the term ends while the baseline waits on the
// fabric: the apply returns only once the baseline has (nothing of it
// outlives the apply), and it recorded nothing.
func TestBaselineCutShort(t *testing.T) {
	r, _ := newBaselineRig(t, 4)
	r.smp.hang, r.smp.hung = map[uint16]bool{}, make(chan struct{}, 1) // no port answers
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-r.smp.hung
		cancel()
	}()
	r.network(101)
	r.term.apply(ctx)
	if ctx.Err() == nil {
		t.Fatal("the apply returned before its baseline met the fabric")
	}
	w := r.term.secondSM
	if !w.detecting.TryLock() {
		t.Fatal("the baseline still runs after its apply returned")
	}
	w.detecting.Unlock()
	if w.scanned || len(w.reason()) != 0 {
		t.Fatalf("after a baseline cut short: scanned %v, reason %v; want nothing", w.scanned, w.reason())
	}
	if sms, err := r.st.SecondSMs(t.Context()); err != nil || len(sms) != 0 {
		t.Fatalf("recorded second SMs %+v, %v; want none", sms, err)
	}
}
