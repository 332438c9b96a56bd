package applier

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

const err0507 = "Nov 29 18:16:33 486627 [7F1C] 0x01 -> pkey_mgr_update_peer_port: ERR 0507: Not enough pkey entries (60 <= 60) on switch 0x0002c90300f00001 port 2 (S1). Clearing Enforcement bit\n"

func recorded(t *testing.T, s *store.Store) []string {
	t.Helper()
	errs, err := s.EnforcementErrors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range errs {
		out = append(out, e.SwitchPort()+" x"+strings.Repeat("I", int(e.Count)))
	}
	return out
}

// The recorder, fed by a tail, records each line once, waits for a line
// still being written, and reads a truncated or replaced log from its start.
func TestEnforcementRecorder(t *testing.T) {
	s := storetest.Open(t, config.EngineSQLite)
	log := slog.New(slog.DiscardHandler)
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, err0507) // before the watch starts: not this term's
	pos, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	term, err := s.NewTerm(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	var found enforcementLog
	tail, err := opensm.OpenTail(path, opensm.Position{Offset: pos.Size()}, found.observe) // any file
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	scan := func() error {
		if err := tail.Pump(); err != nil {
			return err
		}
		return found.record(t.Context(), term, s, log)
	}

	steps := []struct {
		name, add string
		want      []string
	}{
		{"nothing new", "", nil},
		{"other lines", "Nov 29 18:16:34 000001 [7F1C] 0x02 -> SUBNET UP\n", nil},
		{"half a line", err0507[:60], nil},
		{"its end", err0507[60:], []string{"0x0002c90300f00001:2 xI"}},
		{"again, and an unattributed one", err0507 +
			"Nov 29 18:16:35 000002 [7F1C] 0x01 -> osm_pkey_mgr: ERR 0513: Clearing Enforcement bit somewhere\n",
			[]string{"0x0002c90300f00001:2 xII", "unattributed xI"}},
	}
	for _, st := range steps {
		opensmtest.AppendLog(t, path, st.add)
		if err := scan(); err != nil {
			t.Fatalf("%s: scan: %v", st.name, err)
		}
		if got := recorded(t, s); !slices.Equal(got, st.want) {
			t.Fatalf("%s: recorded %q, want %q", st.name, got, st.want)
		}
	}

	// Truncated (log_max_size): the new content is read from the start.
	if _, err := s.ClearEnforcementErrors(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(err0507), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := scan(); err != nil {
		t.Fatal(err)
	}
	if got := recorded(t, s); !slices.Equal(got, []string{"0x0002c90300f00001:2 xI"}) {
		t.Errorf("after truncation: recorded %q", got)
	}

	// Rotated by renaming: what OpenSM logged into the old file before it
	// reopened its log is read, then the new file from its start.
	if _, err := s.ClearEnforcementErrors(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path+".1", err0507)
	opensmtest.AppendLog(t, path, "") // logrotate's create: the old file is still OpenSM's
	if err := scan(); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path+".1", err0507)
	opensmtest.AppendLog(t, path, "Nov 29 18:16:36 000003 [7F1C] 0x01 -> osm_pkey_mgr: ERR 0513: Clearing Enforcement bit somewhere\n")
	if err := scan(); err != nil {
		t.Fatal(err)
	}
	if got := recorded(t, s); !slices.Equal(got, []string{"0x0002c90300f00001:2 xII", "unattributed xI"}) {
		t.Errorf("after a rotation: recorded %q, want both lines of the old file and the new file's", got)
	}
}

// failingRecorder is a database that cannot record.
type failingRecorder struct{ calls int }

func (f *failingRecorder) RecordEnforcementErrors(context.Context, int64, []store.EnforcementSighting) error {
	f.calls++
	return errors.New("database away")
}

// A record that fails keeps the lines: the next one records them, once.
func TestEnforcementRecorderKeepsWhatItCouldNotRecord(t *testing.T) {
	s := storetest.Open(t, config.EngineSQLite)
	term, err := s.NewTerm(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	path := filepath.Join(t.TempDir(), "opensm.log")
	var found enforcementLog
	tail, err := opensm.OpenTail(path, opensm.Position{}, found.observe)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	opensmtest.AppendLog(t, path, err0507)
	if err := tail.Pump(); err != nil {
		t.Fatal(err)
	}
	away := &failingRecorder{}
	if err := found.record(t.Context(), term, away, log); err == nil || away.calls != 1 {
		t.Fatalf("record with the database away: %v after %d calls; want its error", err, away.calls)
	}
	opensmtest.AppendLog(t, path, err0507)
	if err := tail.Pump(); err != nil {
		t.Fatal(err)
	}
	if err := found.record(t.Context(), term, s, log); err != nil {
		t.Fatal(err)
	}
	if got := recorded(t, s); !slices.Equal(got, []string{"0x0002c90300f00001:2 xII"}) {
		t.Errorf("recorded %q, want both lines, the one kept from the failed record too", got)
	}
}

func TestGatesClosed(t *testing.T) {
	s := storetest.Open(t, config.EngineSQLite)
	ctx := t.Context()
	dump := filepath.Join(t.TempDir(), "opensm-subnet.lst")
	g := Gates{Store: s, SubnetDump: dump}
	reasons, err := g.Closed(ctx)
	if err != nil || !slices.Equal(reasons, []GateReason{{Kind: GateNoExpectedSwitches, Text: NoExpectedSwitches}}) {
		t.Fatalf("new database: %q, %v; want only %q", reasons, err, NoExpectedSwitches)
	}
	if err := s.ConfirmSwitches(ctx, []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"},
		{GUID: 0x0002c90300f00002, Description: "S2"}}); err != nil {
		t.Fatal(err)
	}
	reasons, err = g.Closed(ctx)
	if err != nil || len(reasons) != 1 || reasons[0].Kind != GateSwitchesUnchecked || !strings.Contains(reasons[0].Text, "cannot be checked") {
		t.Errorf("no dump: %q, %v; want the switches unchecked", reasons, err)
	}
	data, err := os.ReadFile(filepath.Join("..", "topology", "testdata", "good", "ibsim-5-hosts-2-switches.lst"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dump, data[:len(data)/2], 0o644); err != nil { // caught mid-write
		t.Fatal(err)
	}
	if reasons, err = g.Closed(ctx); err != nil || len(reasons) != 1 || reasons[0].Kind != GateSwitchesUnchecked ||
		!strings.Contains(reasons[0].Text, "cannot be checked") {
		t.Errorf("half-written dump: %q, %v; want the switches unchecked", reasons, err)
	}
	if err := os.WriteFile(dump, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if reasons, err = g.Closed(ctx); err != nil || len(reasons) != 0 {
		t.Errorf("every switch present: %q, %v; want the gates open", reasons, err)
	}
	// S2's lines removed: it is missing.
	var kept []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.Contains(l, "{S2}") {
			kept = append(kept, l)
		}
	}
	if err := os.WriteFile(dump, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	want := GateReason{Kind: GateSwitchMissing, Text: "expected switch 0x0002c90300f00002 (S2) is missing from OpenSM's last sweep"}
	if reasons, err = g.Closed(ctx); err != nil || !slices.Equal(reasons, []GateReason{want}) {
		t.Errorf("S2 gone: %q, %v; want %q", reasons, err, want)
	}
	// Only S1 confirmed, and S2 in the sweep: a switch nobody confirmed (a
	// host answering NodeInfo as one looks the same) closes its own gate.
	if err := s.ConfirmSwitches(ctx, []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dump, data, 0o644); err != nil {
		t.Fatal(err)
	}
	reasons, err = g.Closed(ctx)
	if err != nil || len(reasons) != 1 || reasons[0].Kind != GateUnconfirmedSwitch ||
		!strings.HasPrefix(reasons[0].Text, "switch 0x0002c90300f00002 (S2) is in OpenSM's last sweep but was not confirmed") {
		t.Errorf("S2 unconfirmed: %q, %v; want the gate unconfirmed_switch naming it", reasons, err)
	}
}
