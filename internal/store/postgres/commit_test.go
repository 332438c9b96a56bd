package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// commitWindows are triggers on jobs that open the windows of a change's
// last round trip, where its job's insert goes with the COMMIT: a deferred
// constraint that refuses the COMMIT, one that fails it once for a
// serialization failure, an insert refused at once, and an insert that waits
// (for a kill, or past the caller's deadline). Each acts on its port's job
// alone.
const commitWindows = `
CREATE SEQUENCE afm_test_attempts;
CREATE FUNCTION afm_test_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.object_id = 'refused' THEN
		RAISE EXCEPTION 'refused at commit' USING ERRCODE = '23514';
	END IF;
	IF NEW.object_id = 'conflict' THEN
		IF nextval('afm_test_attempts') = 1 THEN
			RAISE EXCEPTION 'could not serialize at commit' USING ERRCODE = '40001';
		END IF;
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER afm_test_at_commit AFTER INSERT ON jobs DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION afm_test_at_commit();
CREATE FUNCTION afm_test_slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.object_id = 'refused-insert' THEN
		RAISE EXCEPTION 'insert refused' USING ERRCODE = '23514';
	ELSIF NEW.object_id = 'killed' THEN
		PERFORM pg_sleep(30);
	ELSIF NEW.object_id = 'late' THEN
		PERFORM pg_sleep(0.3);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER afm_test_slow BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION afm_test_slow();
`

// A port POST's job insert goes with its COMMIT, in one round trip: the API
// is answered with the job's id only once the COMMIT has answered. A COMMIT
// refused after the insert's id was read is the change's error, and nothing
// of it is recorded (port, job, revision), nor told to this process's
// applier (TakeCommitted); a serialization failure at the COMMIT runs the
// change again, which is answered with the job of the attempt that
// committed; a connection killed in that round trip records nothing; a
// caller's deadline that passes once the COMMIT is sent does not cut it
// short: the change is recorded and answered as such.
func TestChangeCommitWindows(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_commit_")
	e, err := Open(ctx, db.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, commitWindows); err != nil {
		t.Fatal(err)
	}
	s := store.New(e, store.Rules{PhysicalNetworks: []string{"ib"}})
	net, vlan := "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", int64(101)
	if _, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: net, Name: "n", Type: "vlan",
		PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		port     string
		deadline time.Duration // the caller's; 0: none
		during   func(t *testing.T)
		recorded bool
		attempts int64 // the conflict's attempts, counted by its sequence
	}{
		{port: "refused"},
		{port: "conflict", recorded: true, attempts: 2},
		{port: "killed", during: func(t *testing.T) { terminateSleeper(t, db.DSN) }},
		{port: "late", deadline: 100 * time.Millisecond, recorded: true},
		{port: "plain", recorded: true},
	} {
		t.Run(tc.port, func(t *testing.T) {
			before, err := s.Revision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.TakeCommitted()
			done := make(chan struct{})
			if tc.during != nil {
				go func() { defer close(done); tc.during(t) }()
			} else {
				close(done)
			}
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if tc.deadline > 0 {
				cctx, cancel = context.WithTimeout(ctx, tc.deadline)
			}
			g := fabric.GUID(0x0002c90300000001 + uint64(i))
			job, err := s.RecordPort(cctx, store.PortChange{Port: store.Port{ID: tc.port, NetworkID: net, GUID: &g, Host: "h1"},
				DeviceOwner: "compute:nova", Operation: store.OpAddPort, CreatedBy: "test", Request: "{}"})
			cancel()
			<-done
			if tc.recorded {
				checkRecorded(t, s, e, tc.port, job, err, before)
			} else {
				checkNotRecorded(t, s, e, tc.port, err, before)
			}
			if tc.attempts > 0 {
				var n int64
				if err := e.pool.QueryRow(ctx, "SELECT last_value FROM afm_test_attempts").Scan(&n); err != nil || n != tc.attempts {
					t.Errorf("the change ran %d times (%v), want %d", n, err, tc.attempts)
				}
			}
		})
	}
}

// checkRecorded checks that a change answered with job committed it: its
// job and port as answered, at the next revision, told to the applier.
func checkRecorded(t *testing.T, s *store.Store, e *Engine, port string, job store.Job, err error, before int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("the change: %v, want it recorded", err)
	}
	got, err := s.GetJob(t.Context(), job.ID)
	if err != nil || got.ObjectID != port || got.Revision != before+1 || job.Revision != before+1 {
		t.Errorf("answered with job %d at revision %d; recorded %+v, %v; want port %s's at %d", job.ID, job.Revision, got, err, port, before+1)
	}
	if n := countRows(t, e, "SELECT count(*) FROM jobs WHERE object_id = $1", port); n != 1 {
		t.Errorf("%d jobs of port %s, want 1", n, port)
	}
	if rev, ok := s.TakeCommitted(); !ok || rev != before+1 {
		t.Errorf("TakeCommitted = %d, %t; want %d", rev, ok, before+1)
	}
}

// checkNotRecorded checks that a change that failed recorded nothing, and
// told the applier nothing.
func checkNotRecorded(t *testing.T, s *store.Store, e *Engine, port string, err error, before int64) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "commit") {
		t.Errorf("the change: %v, want its COMMIT's error", err)
	}
	for _, q := range []string{"SELECT count(*) FROM jobs WHERE object_id = $1", "SELECT count(*) FROM ports WHERE id = $1"} {
		if n := countRows(t, e, q, port); n != 0 {
			t.Errorf("%s: %d, want 0", q, n)
		}
	}
	if rev, err := s.Revision(t.Context()); err != nil || rev != before {
		t.Errorf("revision %d, %v; want %d as before", rev, err, before)
	}
	if rev, ok := s.TakeCommitted(); ok {
		t.Errorf("TakeCommitted = %d after a change that failed", rev)
	}
}

func countRows(t *testing.T, e *Engine, query string, arg string) int64 {
	t.Helper()
	var n int64
	if err := e.pool.QueryRow(t.Context(), query, arg).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// terminateSleeper ends, from a connection of its own, the session that
// sleeps in the jobs' trigger, once there is one.
func terminateSleeper(t *testing.T, dsn string) {
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(context.Background())
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var ended bool
		err := conn.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()`).Scan(&ended)
		if err == nil && ended {
			return
		}
		if err != nil && err != pgx.ErrNoRows {
			t.Error(fmt.Errorf("terminate the sleeper: %w", err))
			return
		}
	}
	t.Error("no session slept in the jobs' trigger")
}

// In a group of several changes, each change's job insert is held only
// until its change ends (what it left held is sent before the next change
// starts): an insert refused fails its change alone, rolled back to its
// savepoint, and the changes around it commit, each answered with its own
// job's id. The group forms behind a first change held inside its
// transaction (a rule that waits for its GUID).
func TestGroupJobInsertsHeld(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_commit_")
	e, err := Open(ctx, db.DSN, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, commitWindows); err != nil {
		t.Fatal(err)
	}
	checkGroupInserts(t, store.New(e, store.Rules{PhysicalNetworks: []string{"ib"}}), func(query, arg string) int64 {
		return countRows(t, e, strings.ReplaceAll(query, "?", "$1"), arg)
	})
}

// checkGroupInserts queues three port changes behind a first one held in
// its group's transaction, the second refused at its job's insert, and
// checks what each was answered and what is recorded (count: a count of
// rows of one argument, "?" its placeholder).
func checkGroupInserts(t *testing.T, s *store.Store, count func(query, arg string) int64) {
	ctx := t.Context()
	net, vlan := "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", int64(101)
	if _, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: net, Name: "n", Type: "vlan",
		PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	port := func(id string, g uint64) store.PortChange {
		guid := fabric.GUID(g)
		return store.PortChange{Port: store.Port{ID: id, NetworkID: net, GUID: &guid, Host: "h1"},
			DeviceOwner: "compute:nova", Operation: store.OpAddPort, CreatedBy: "test", Request: "{}"}
	}
	const held = fabric.GUID(0x0002c903000000f0)
	entered, open := make(chan struct{}), make(chan struct{})
	gated := s.WithRules(store.Rules{PhysicalNetworks: []string{"ib"}, StaticMember: func(g fabric.GUID) (string, bool) {
		if g == held {
			close(entered)
			<-open
		}
		return "", false
	}})
	ids := []string{"first", "g1", "refused-insert", "g3"}
	jobs, errs := make([]store.Job, len(ids)), make([]error, len(ids))
	var wg sync.WaitGroup
	wg.Go(func() { jobs[0], errs[0] = gated.RecordPort(ctx, port(ids[0], uint64(held))) })
	<-entered
	for i := 1; i < len(ids); i++ {
		wg.Go(func() { jobs[i], errs[i] = s.RecordPort(ctx, port(ids[i], uint64(held)+uint64(i))) })
		for deadline := time.Now().Add(10 * time.Second); s.QueuedChanges() < i; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d changes queued, want %d", s.QueuedChanges(), i)
			}
		}
	}
	close(open)
	wg.Wait()
	for i, id := range ids {
		n := count("SELECT count(*) FROM jobs WHERE object_id = ?", id)
		if id == "refused-insert" {
			if errs[i] == nil || n != 0 || count("SELECT count(*) FROM ports WHERE id = ?", id) != 0 {
				t.Errorf("%s: %v, %d jobs; want its error and nothing recorded", id, errs[i], n)
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("%s: %v", id, errs[i])
			continue
		}
		got, err := s.GetJob(ctx, jobs[i].ID)
		if err != nil || got.ObjectID != id || got.Revision != jobs[i].Revision || n != 1 {
			t.Errorf("%s: answered job %d at revision %d; recorded %+v, %v, %d jobs", id, jobs[i].ID, jobs[i].Revision, got, err, n)
		}
	}
}
