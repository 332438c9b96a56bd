package applier

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestSetFailuresRecordedBySweeps: the ports recorded as not taking
// OpenSM's Sets follow the sweeps (copySubnetDump's fabric): a sweep that
// came up names the host ports its lines name (a switch port facing a host
// names that host), a failed sweep adds what its read found, a sweep that
// says nothing of the Sets changes nothing, and a clean sweep clears them.
// A new term (a restart, a failover) finds them recorded, since kept. On
// every engine.
func TestSetFailuresRecordedBySweeps(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) { testSetFailuresRecorded(t, engine) })
	}
}

func testSetFailuresRecorded(t *testing.T, engine string) {
	const h1, h2, h3 fabric.GUID = 0x0002c90300000101, 0x0002c90300000201, 0x0002c90300000301
	const (
		h1Full   = "pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x8065 because Pkey table is full for node 0x0002c90300000100 port 1 (H1)"
		s2PortH2 = "pkey_mgr_update_peer_port: ERR 0502: failed to set PKey table block 0 for node 0x0002c90300f00002 port 1"
		s1Port0  = "pkey_mgr_update_port: ERR 0512: Failed to set PKey 0x0300 because Pkey table is full for node 0x0002c90300f00001 port 0 (S1)"
		mad      = "sm_mad_ctrl_send_err_cb: ERR 3113: MAD completed in error (IB_TIMEOUT): SubnSet(P_KeyTable), attr_mod 0x0, TID 0x1234"
	)
	st := storetest.Open(t, engine)
	dump := copySubnetDump(t, t.TempDir())
	id, err := st.NewTerm(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	newTerm := func() *term {
		tm := &term{id: id, Applier: &Applier{Store: st, Log: slog.New(slog.DiscardHandler), Cfg: Config{SubnetDump: dump}}}
		tm.loadSetFailures(t.Context())
		return tm
	}
	tm := newTerm()
	steps := []struct {
		name    string
		outcome opensm.Outcome
		lines   []string
		unset   []fabric.GUID
		newTerm bool // a new term reads what was recorded, then settles the sweep
		want    []fabric.GUID
		kept    []fabric.GUID // recorded since an earlier step: their since unchanged
	}{
		{"a clean sweep, nothing recorded", opensm.Applied, nil, nil, false, nil, nil},
		{"H1's table full, a line for switch port 0", opensm.Applied, []string{h1Full, s1Port0}, nil, false, []fabric.GUID{h1}, nil},
		{"a failed sweep: H3 read unset, a MAD line naming no port", opensm.Failed, []string{mad}, []fabric.GUID{h3}, false,
			[]fabric.GUID{h1, h3}, []fabric.GUID{h1}},
		{"a new term, a sweep that lost mastership", opensm.LostMastership, nil, nil, true, []fabric.GUID{h1, h3}, []fabric.GUID{h1, h3}},
		{"a new term, a sweep that came up with the switch port facing H2 unset", opensm.Applied, []string{s2PortH2}, nil, true,
			[]fabric.GUID{h2}, nil},
		{"a sweep that came up with H1 and H2 named", opensm.Applied, []string{h1Full, s2PortH2}, nil, false,
			[]fabric.GUID{h1, h2}, []fabric.GUID{h2}},
		{"a clean sweep clears them", opensm.Applied, nil, nil, false, nil, nil},
	}
	before := map[fabric.GUID]time.Time{}
	for _, s := range steps {
		if s.newTerm {
			tm = newTerm()
		}
		unset := map[fabric.GUID]bool{}
		for _, p := range s.unset {
			unset[p] = true
		}
		tm.noteSweepSets(t.Context(), opensm.SweepResult{Outcome: s.outcome, PKeyErrors: s.lines}, unset)
		got, err := st.SetFailures(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		now := map[fabric.GUID]time.Time{}
		for _, f := range got {
			now[f.Port] = f.Since
		}
		if ports := slices.Sorted(maps.Keys(now)); !slices.Equal(ports, s.want) {
			t.Fatalf("%s: recorded %v, want %v", s.name, ports, s.want)
		}
		for _, p := range s.kept {
			if !now[p].Equal(before[p]) {
				t.Errorf("%s: port %s since %s, want %s (kept)", s.name, p, now[p], before[p])
			}
		}
		before = now
	}
}

// flakySetFailureStore answers the record of the ports with an error while
// told to, as a database that went away: before writing (failRecord), or
// after a commit whose answer was lost (lostAnswer).
type flakySetFailureStore struct {
	*store.Store
	failRecord, lostAnswer bool
}

func (s *flakySetFailureStore) RecordSetFailures(ctx context.Context, term int64, ports []store.SetFailure) error {
	if s.failRecord {
		return errAway
	}
	if err := s.Store.RecordSetFailures(ctx, term, ports); err != nil || !s.lostAnswer {
		return err
	}
	return errAway
}

// TestSetFailuresRecordedAfterTheDatabaseCameBack: a record that fails is
// written again by the next sweep, whatever the term's copy holds: the
// database may hold the old ports (the write failed) or the new ones (the
// commit's answer was lost). A term that could not read the record at its
// start writes at its first sweep, even one that names none.
func TestSetFailuresRecordedAfterTheDatabaseCameBack(t *testing.T) {
	const h3 fabric.GUID = 0x0002c90300000301
	st := storetest.Open(t, config.EngineSQLite)
	flaky := &flakySetFailureStore{Store: st}
	id, err := st.NewTerm(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	tm := &term{id: id, Applier: &Applier{Store: flaky, Log: slog.New(slog.DiscardHandler),
		Cfg: Config{SubnetDump: copySubnetDump(t, t.TempDir())}}}
	tm.loadSetFailures(t.Context())
	failed, clean := opensm.SweepResult{Outcome: opensm.Failed}, opensm.SweepResult{Outcome: opensm.Applied}
	steps := []struct {
		name                   string
		failRecord, lostAnswer bool
		sweep                  opensm.SweepResult
		unset                  []fabric.GUID
		want                   []fabric.GUID
	}{
		{"H3 unset, the database away", true, false, failed, []fabric.GUID{h3}, nil},
		{"H3 unset again, the database back", false, false, failed, []fabric.GUID{h3}, []fabric.GUID{h3}},
		{"a clean sweep, the commit's answer lost", false, true, clean, nil, nil},
		{"H3 unset again: written, though the term's copy held it", false, false, failed, []fabric.GUID{h3}, []fabric.GUID{h3}},
	}
	for _, s := range steps {
		flaky.failRecord, flaky.lostAnswer = s.failRecord, s.lostAnswer
		unset := map[fabric.GUID]bool{}
		for _, p := range s.unset {
			unset[p] = true
		}
		tm.noteSweepSets(t.Context(), s.sweep, unset)
		got, err := st.SetFailures(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var ports []fabric.GUID
		for _, f := range got {
			ports = append(ports, f.Port)
		}
		if !slices.Equal(ports, s.want) {
			t.Fatalf("%s: recorded %v, want %v", s.name, ports, s.want)
		}
	}
	// A new term that read nothing at its start: its first sweep, clean,
	// clears what the database holds.
	next := &term{id: id, Applier: tm.Applier}
	next.noteSweepSets(t.Context(), clean, nil)
	if got, err := st.SetFailures(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("recorded %v, %v after a clean sweep of a term that read nothing, want none", got, err)
	}
}

// TestUnsetPorts: a port is named when the read reached it and its table
// did not show a want, or it did not answer; not when the bound left it
// unread, it had no LID or another port answered at its LID, or it showed
// every want.
func TestUnsetPorts(t *testing.T) {
	w := func(p fabric.GUID) pkeyread.Want {
		return pkeyread.Want{Port: p, PKey: 0x65, Membership: pkeyread.Full}
	}
	res := func(p fabric.GUID, err error) pkeyread.Result {
		return pkeyread.Result{Target: pkeyread.Target{Port: p}, Err: err}
	}
	results := []pkeyread.Result{res(1, nil), res(2, nil), res(3, errors.New("no answer within 2s")),
		res(4, pkeyread.ErrNotRead), res(5, pkeyread.ErrNoLID), res(6, pkeyread.ErrMoved)}
	verdicts := map[pkeyread.Want]string{w(1): "", w(2): "port 2 lacks pkey 0x0065", w(3): "port 3 could not be read",
		w(4): "port 4 was not read", w(5): "no LID", w(6): "moved", w(7): "not in OpenSM's subnet dump"}
	got := slices.Sorted(maps.Keys(unsetPorts(results, verdicts)))
	if want := []fabric.GUID{2, 3}; !slices.Equal(got, want) {
		t.Errorf("unsetPorts = %v, want %v", got, want)
	}
}

// The store records the ports on every engine.
var _ SetFailureStore = (*store.Store)(nil)
