package mysql

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// FinishApply, on every job's path to Completed, sends its transaction in
// two commands on a pipelined connection, as PostgreSQL's two round trips
// (three before, four before that): the beginning, the apply's row and its
// count (ROW_COUNT()) with the gates' read, the completion with the COMMIT
// (the counts of its statements read from the driver's); FinishApplyProven's
// completions of the jobs it names too. A stale term's records nothing, in
// as many.
func TestFinishApplyRoundTrips(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_MYSQL_URL", "afm_finish_")
	e, err := Open(ctx, strings.Replace(db.DSN, "@tcp(", "@afm-counted(", 1), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.pipelined {
		t.Fatal("the engine is not pipelined on the test server")
	}
	e.db.SetMaxOpenConns(1)
	s := store.New(e, store.Rules{})
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	// A confirmed switch and no enforcement error: the gates in one read.
	if err := s.ConfirmSwitches(ctx, []store.ExpectedSwitch{{GUID: 0x0002c90300f00001, Description: "S1"}}); err != nil {
		t.Fatal(err)
	}
	open := func(store.GateState) bool { return true }
	for i, tc := range []struct {
		name      string
		term      int64
		proven    bool  // FinishApplyProven, naming the job
		awaiting  bool  // FinishApplyAwaiting, its proof naming the job
		want      int64 // commands
		completed int64
	}{
		{"a job", term, false, false, 2, 1},
		{"a stale term's", term - 1, false, false, 2, 0},
		{"a job proven by its tables", term, true, false, 2, 1},
		{"a job awaiting its proof", term, false, true, 2, 1},
	} {
		vlan := int64(101 + i)
		j, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: "net-" + tc.name,
			Name: "net", Type: "vlan", PhysicalNetwork: "ibnet", SegmentationID: &vlan},
			Operation: store.OpCreateNetwork, CreatedBy: "test", Request: `{}`})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := s.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		a := store.Apply{Revision: rev, SHA256: "ab", Term: tc.term, Outcome: "applied", Detail: "SUBNET UP",
			StartedAt: now.Add(-time.Second), FinishedAt: now}
		counted.Store(0)
		var f store.Finished
		asked := int64(-1) // round trips sent when the proof was asked for
		if tc.awaiting {
			// The first round trip is sent while the proof is read; only
			// the completions and the COMMIT wait for it.
			proof := func(context.Context) *store.Proven {
				asked = counted.Load()
				return &store.Proven{Jobs: []int64{j.ID}, Kubernetes: true}
			}
			f, err = s.FinishApplyAwaiting(ctx, a, proof, time.Minute, open)
		} else if tc.proven {
			f, err = s.FinishApplyProven(ctx, a, store.Proven{Jobs: []int64{j.ID}, Kubernetes: true}, open)
		} else {
			f, err = s.FinishApply(ctx, a, open)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if f.Completed != tc.completed || f.Recorded != (tc.completed > 0) {
			t.Errorf("%s: %+v, want %d completed", tc.name, f, tc.completed)
		}
		if n := counted.Load(); n != tc.want {
			t.Errorf("%s: FinishApply sent %d commands, want %d", tc.name, n, tc.want)
		}
		if n := counted.Load(); tc.awaiting && (asked != 1 || n-asked != 1) {
			t.Errorf("%s: %d commands before the proof, %d after; want 1 and 1", tc.name, asked, n-asked)
		}
	}
}

// A held write whose count is wanted and that fails is the error of the
// transaction, whichever statement sent it: a query of one row (whose Row
// cannot carry another's error) or of rows (the gates' read, as FinishApply
// sends it) runs no more, the error names the write, and nothing commits,
// even when the caller went on past the query's error (MariaDB undoes the
// failed statement alone).
func TestCountedWriteFailsBeforeAQueryRow(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_MYSQL_URL", "afm_counted_")
	e, err := Open(ctx, db.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.pipelined {
		t.Fatal("the engine is not pipelined on the test server")
	}
	term, err := store.New(e, store.Rules{}).NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	row := func(sha string) driver.RecordApplyOfHistoryParams {
		return driver.RecordApplyOfHistoryParams{Revision: 1, SHA256: sha, Term: term, Outcome: "applied",
			Detail: "SUBNET UP", StartedAt: now, FinishedAt: now, Fabric: driver.DefaultFabric}
	}
	queries := map[string]func(q driver.ChangeTx) error{
		"one row": func(q driver.ChangeTx) error { _, err := q.GetJob(ctx, 1); return err },
		"rows":    func(q driver.ChangeTx) error { _, err := q.GateSwitches(ctx, driver.DefaultFabric); return err },
	}
	for name, query := range queries {
		for _, ignore := range []bool{false, true} {
			var n int64
			err = e.InChangeTx(ctx, func(q driver.ChangeTx) error {
				// A row that goes in, then one refused: sha256 is a
				// varchar(64), and strict mode refuses a longer one.
				for _, sha := range []string{"ab", strings.Repeat("ab", 100)} {
					if _, err := q.Later().RecordApplyOfHistory(driver.CountInto(ctx, &n), row(sha)); err != nil {
						return err
					}
				}
				if err := query(q); err != nil && !ignore {
					return err
				}
				return nil // ignore: a caller that goes on
			})
			if err == nil || !strings.Contains(err.Error(), "Data too long") {
				t.Fatalf("a query of %s, the transaction (the query's error ignored: %t): %v; want the held write's "+
					"error (Data too long)", name, ignore, err)
			}
			if a, err := store.New(e, store.Rules{}).LastApply(ctx); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a query of %s, after the failed transaction (the query's error ignored: %t) LastApply = %+v, %v; "+
					"want none", name, ignore, a, err)
			}
		}
	}
}

// A counted held write that goes in gives its count with the query sent
// after it, in the same command, and the query's own answer is its own: a
// query that finds no row says so, and a caller that goes on past it
// commits the write.
func TestCountedWriteThenAQueryOfNoRow(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_MYSQL_URL", "afm_counted_")
	e, err := Open(ctx, strings.Replace(db.DSN, "@tcp(", "@afm-counted(", 1), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.pipelined {
		t.Fatal("the engine is not pipelined on the test server")
	}
	e.db.SetMaxOpenConns(1)
	s := store.New(e, store.Rules{})
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var n, before int64
	var queryErr error
	counted.Store(0)
	err = e.InChangeTx(ctx, func(q driver.ChangeTx) error {
		if _, err := q.Later().RecordApplyOfHistory(driver.CountInto(ctx, &n), driver.RecordApplyOfHistoryParams{
			Revision: 1, SHA256: "ab", Term: term, Outcome: "applied", Detail: "SUBNET UP", StartedAt: now,
			FinishedAt: now, Fabric: driver.DefaultFabric}); err != nil {
			return err
		}
		before = n
		_, queryErr = q.GetJob(ctx, 1<<40) // no such job
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(queryErr, sql.ErrNoRows) {
		t.Errorf("the query of no row after the counted write: %v; want no rows", queryErr)
	}
	if before != 0 || n != 1 {
		t.Errorf("the write's count: %d before the query, %d after it; want 0, then 1", before, n)
	}
	if c := counted.Load(); c != 2 {
		t.Errorf("the transaction sent %d commands, want 2 (the write and its count with the query; the COMMIT)", c)
	}
	if a, err := s.LastApply(ctx); err != nil || a.Revision != 1 {
		t.Errorf("after the transaction LastApply = %+v, %v; want revision 1's", a, err)
	}
}

// AddGUIDPlaces, beside the read-back of every change that brings a host not
// placed yet, sends its beginning, its inserts and its COMMIT in one command
// on a pipelined connection (three before), and still says how many it
// recorded: a GUID already placed and a deposed leader's record none.
func TestAddGUIDPlacesRoundTrips(t *testing.T) {
	ctx := t.Context()
	e := countedEngine(t, "afm_places_")
	s := store.New(e, store.Rules{})
	term, err := s.NewTerm(ctx, "manager-1")
	if err != nil {
		t.Fatal(err)
	}
	const sw = fabric.GUID(0x0002c90300f00001)
	place := func(i int) store.GUIDPlaceUpdate {
		return store.GUIDPlaceUpdate{GUID: fabric.GUID(0x0002c90300000101 + uint64(i)), Switch: sw, Port: 1 + i, New: true}
	}
	for _, tc := range []struct {
		name  string
		term  int64
		news  []store.GUIDPlaceUpdate
		added int64
	}{
		{"one host", term, []store.GUIDPlaceUpdate{place(1)}, 1},
		{"two hosts, one placed already", term, []store.GUIDPlaceUpdate{place(1), place(2)}, 1},
		{"a deposed leader's", term - 1, []store.GUIDPlaceUpdate{place(3)}, 0},
	} {
		counted.Store(0)
		n, err := s.AddGUIDPlaces(ctx, tc.term, tc.news)
		if err != nil || n != tc.added {
			t.Fatalf("%s: AddGUIDPlaces = %d, %v; want %d", tc.name, n, err, tc.added)
		}
		if sent := counted.Load(); sent != 1 {
			t.Errorf("%s: AddGUIDPlaces sent %d commands, want 1", tc.name, sent)
		}
	}
	places, err := s.GUIDPlaces(ctx)
	if err != nil || len(places) != 2 {
		t.Fatalf("GUIDPlaces = %+v, %v; want the two recorded", places, err)
	}
}
