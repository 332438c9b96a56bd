package applier

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/verdict"
)

// The duplicate recorder, fed by a tail with pieces of a real log (a node
// GUID cloned, testdata/duplicates: dup.log is one ERR 0D01 entry, start.log
// a heavy sweep's start, up.log its SUBNET UP): it records a GUID once a
// read, summed; clears it after a heavy sweep that came up without one; and
// keeps it after a sweep that came up with one.
func TestDuplicateRecorder(t *testing.T) {
	piece := func(name string) string {
		data, err := os.ReadFile(filepath.Join("testdata", "duplicates", name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	s := storetest.Open(t, config.EngineSQLite)
	log := slog.New(slog.DiscardHandler)
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, "")
	term, err := s.NewTerm(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	var found duplicateLog
	tail, err := opensm.OpenTail(path, opensm.Position{}, found.observe)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()

	const clone = "node GUID 0x0002c90300000100 behind switch ports 0x0002c90300f00001:2 and 0x0002c90300f00001:3"
	steps := []struct {
		name   string
		pieces []string
		count  int64 // of the GUID's row; 0: none
	}{
		{"nothing yet", nil, 0},
		{"one entry", []string{"dup"}, 1},
		{"the loop: a start and an entry, twice", []string{"start", "dup", "start", "dup"}, 3},
		{"a sweep with the clone comes up anyway", []string{"start", "dup", "up"}, 4},
		{"a sweep without it comes up", []string{"start", "up"}, 0},
		{"seen again after", []string{"start", "dup"}, 1},
		{"a SUBNET UP from before the sweep's start is no sweep without it", []string{"up"}, 1},
	}
	for _, st := range steps {
		var add strings.Builder
		for _, p := range st.pieces {
			add.WriteString(piece(p))
		}
		// A neutral line ends the last entry, as OpenSM's next line would.
		add.WriteString("Dec 06 04:00:11 000001 [ECA676C0] 0x02 -> osm_ucast_mgr_process: minhop tables configured on all switches\n")
		opensmtest.AppendLog(t, path, add.String())
		if err := tail.Pump(); err != nil {
			t.Fatal(err)
		}
		if err := found.record(t.Context(), term, s, log); err != nil {
			t.Fatalf("%s: record: %v", st.name, err)
		}
		got, err := s.DuplicateGUIDs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		reasons := verdict.Judge(verdict.Evidence{Duplicates: found.view()}).Of(GateDuplicateGUID)
		switch {
		case st.count == 0 && (len(got) != 0 || len(reasons) != 0):
			t.Fatalf("%s: recorded %+v, reasons %v; want none", st.name, got, reasons)
		case st.count == 0:
		case len(got) != 1 || got[0].Count != st.count:
			t.Fatalf("%s: recorded %+v; want the clone, %d entries", st.name, got, st.count)
		case len(reasons) != 1 || reasons[0].Kind != GateDuplicateGUID || !strings.Contains(reasons[0].Text, clone):
			t.Fatalf("%s: reasons %+v; want duplicate_guid naming %q", st.name, reasons, clone)
		}
	}
	// Gates.Closed, which --status and the metrics evaluate, names it too.
	reasons, err := Gates{Store: s}.Closed(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var named bool
	for _, r := range reasons {
		named = named || r.Kind == GateDuplicateGUID && strings.Contains(r.Text, clone)
	}
	if !named {
		t.Errorf("Gates.Closed = %+v; want the duplicate named", reasons)
	}
}

// duplicateCalls is a real store's DuplicateStore counting the clears and
// failing the reads while failRead is set.
type duplicateCalls struct {
	DuplicateStore
	clears   int
	failRead bool
}

func (d *duplicateCalls) ClearDuplicateGUIDs(ctx context.Context, term int64) (int64, error) {
	d.clears++
	return d.DuplicateStore.ClearDuplicateGUIDs(ctx, term)
}

func (d *duplicateCalls) DuplicateGUIDs(ctx context.Context) ([]store.DuplicateGUID, error) {
	if d.failRead {
		return nil, errors.New("database away")
	}
	return d.DuplicateStore.DuplicateGUIDs(ctx)
}

// A clean sweep clears the recorded duplicates only where the database may
// hold some: not when the term read it empty since its last write (two round
// trips at every apply), but when the term's start could not read it, or a
// write's read-back failed; and what it clears is gone.
func TestDuplicateClearOnlyWhereHeld(t *testing.T) {
	s := storetest.Open(t, config.EngineSQLite)
	log := slog.New(slog.DiscardHandler)
	clone := opensm.DuplicateGUID{GUID: "0x0002c90300000100", Kind: "node", Line: "ERR 0D01: the clone"}
	cleanSweep := func(l *duplicateLog) { l.mu.Lock(); l.clear, l.pending, l.order = true, nil, nil; l.mu.Unlock() }
	for _, tc := range []struct {
		name       string
		prepare    func(t *testing.T, l *duplicateLog, st *duplicateCalls, term int64)
		wantClears int
	}{
		{"read empty at the start", func(t *testing.T, l *duplicateLog, st *duplicateCalls, _ int64) {
			if err := l.load(t.Context(), st); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"the start could not read it", func(t *testing.T, l *duplicateLog, st *duplicateCalls, term int64) {
			// A previous term's row, which the failed load did not see.
			if err := s.RecordDuplicateGUIDs(t.Context(), term, []store.DuplicateSighting{{GUID: clone.GUID,
				Kind: clone.Kind, Line: clone.Line, Count: 1}}); err != nil {
				t.Fatal(err)
			}
			st.failRead = true
			if l.load(t.Context(), st) == nil {
				t.Fatal("load read through a failing store")
			}
			st.failRead = false
		}, 1},
		{"recorded, its read-back failed", func(t *testing.T, l *duplicateLog, st *duplicateCalls, term int64) {
			if err := l.load(t.Context(), st); err != nil {
				t.Fatal(err)
			}
			l.add(clone)
			st.failRead = true
			if l.record(t.Context(), term, st, log) == nil {
				t.Fatal("record read back through a failing store")
			}
			st.failRead = false
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			term, err := s.NewTerm(t.Context(), "test")
			if err != nil {
				t.Fatal(err)
			}
			st := &duplicateCalls{DuplicateStore: s}
			var l duplicateLog
			tc.prepare(t, &l, st, term)
			cleanSweep(&l)
			if err := l.record(t.Context(), term, st, log); err != nil {
				t.Fatal(err)
			}
			got, err := s.DuplicateGUIDs(t.Context())
			switch {
			case err != nil:
				t.Fatal(err)
			case st.clears != tc.wantClears:
				t.Errorf("the clean sweep cleared %d times, want %d", st.clears, tc.wantClears)
			case len(got) != 0 || len(l.view()) != 0:
				t.Errorf("after a clean sweep the database holds %+v, the term sees %+v; want none", got, l.view())
			}
		})
	}
}

// TestForgetForgetsTheRecordedDuplicates: after a forget (a restore put the
// database back), a clean sweep clears the duplicates the term had read as
// none: the restore may have put a row back, which --status would show for
// ever while the gate, reading the term's view, holds nothing.
func TestForgetForgetsTheRecordedDuplicates(t *testing.T) {
	s := storetest.Open(t, config.EngineSQLite)
	log := slog.New(slog.DiscardHandler)
	id, err := s.NewTerm(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	tm := &term{Applier: &Applier{Store: s, Log: log}, gate: &gatekeeper{}}
	if err := tm.gate.duplicates.load(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDuplicateGUIDs(t.Context(), id, []store.DuplicateSighting{{GUID: "0x0002c90300000100",
		Kind: "node", Line: "ERR 0D01: the clone", Count: 1}}); err != nil {
		t.Fatal(err)
	}
	tm.forget("the database was restored from a backup")
	l := &tm.gate.duplicates
	l.mu.Lock()
	l.clear = true
	l.mu.Unlock()
	if err := l.record(t.Context(), id, s, log); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DuplicateGUIDs(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("after the forget and a clean sweep the database holds %+v (%v); want none", got, err)
	}
}
