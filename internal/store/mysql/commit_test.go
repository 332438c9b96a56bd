package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// commitWindows are a sequence and a trigger on jobs that open the windows
// of a change's last round trip, where its job's insert goes with the COMMIT
// on a pipelined connection: an insert refused (two), one that fails once as
// a deadlock does, and one that waits (for a kill, or past the caller's
// deadline). Each acts on its port's job alone.
var commitWindows = []string{
	"CREATE SEQUENCE afm_test_attempts",
	`CREATE TRIGGER afm_test_jobs BEFORE INSERT ON jobs FOR EACH ROW
BEGIN
	IF NEW.object_id = 'refused' THEN
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused in the round trip of the COMMIT';
	ELSEIF NEW.object_id = 'conflict' THEN
		IF NEXT VALUE FOR afm_test_attempts = 1 THEN
			SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock found when trying to get lock';
		END IF;
	ELSEIF NEW.object_id = 'refused-insert' THEN
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'insert refused';
	ELSEIF NEW.object_id = 'killed' THEN
		DO SLEEP(30);
	ELSEIF NEW.object_id = 'late' THEN
		DO SLEEP(0.3);
	END IF;
END`,
}

// A port POST's job insert goes with its COMMIT, in one query on a
// pipelined connection: the API is answered with the job's id only once
// the COMMIT has answered. An insert refused in that query fails the change,
// and nothing of it is recorded (port, job, revision; the COMMIT after it
// never ran), nor told to this process's applier (TakeCommitted); a
// deadlock there runs the change again, which is answered with the job of
// the attempt that committed; a connection killed in that round trip
// records nothing; a caller's deadline that passes once the COMMIT is sent
// does not cut it short. The same holds on a connection that sends each
// statement on its own (Galera's), but that the deadline cuts the insert,
// sent before the COMMIT, short there, and nothing is recorded.
func TestChangeCommitWindows(t *testing.T) {
	for _, params := range []string{"", "multiStatements=false"} {
		t.Run("dsn "+params, func(t *testing.T) { checkCommitWindows(t, openMigrated(t, params)) })
	}
}

func checkCommitWindows(t *testing.T, e *Engine) {
	ctx := t.Context()
	for _, stmt := range commitWindows {
		if _, err := e.db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
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
		// held: recorded only where the insert goes with the COMMIT (a
		// connection that sends it on its own sends it under the deadline,
		// which cuts it short: nothing is recorded)
		held     bool
		attempts int64 // the conflict's attempts, counted by its sequence
	}{
		{port: "refused"},
		{port: "conflict", recorded: true, attempts: 2},
		{port: "killed", during: func(t *testing.T) { killSleeper(t, e.db) }},
		{port: "late", deadline: 100 * time.Millisecond, recorded: true, held: true},
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
			if tc.recorded && (!tc.held || e.pipelined) {
				checkRecorded(t, s, e, tc.port, job, err, before)
			} else {
				checkNotRecorded(t, s, e, tc.port, err, before)
			}
			if tc.attempts > 0 {
				// The sequence's next value says how many it gave.
				var next int64
				if err := e.db.QueryRowContext(ctx, "SELECT NEXT VALUE FOR afm_test_attempts").Scan(&next); err != nil || next-1 != tc.attempts {
					t.Errorf("the change ran %d times (%v), want %d", next-1, err, tc.attempts)
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
	if n := countRows(t, e, "SELECT count(*) FROM jobs WHERE object_id = ?", port); n != 1 {
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
	if err == nil {
		t.Error("the change was answered as recorded, want its error")
	}
	for _, q := range []string{"SELECT count(*) FROM jobs WHERE object_id = ?", "SELECT count(*) FROM ports WHERE id = ?"} {
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
	if err := e.db.QueryRowContext(t.Context(), query, arg).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// killSleeper kills, from a connection of its own, the session that sleeps
// in the jobs' trigger, once there is one.
func killSleeper(t *testing.T, db *sql.DB) {
	ctx := t.Context()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var id int64
		err := db.QueryRowContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND STATE = 'User sleep' AND ID <> CONNECTION_ID()`).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err == nil {
			_, err = db.ExecContext(ctx, "KILL CONNECTION ?", id)
		}
		if err != nil && !strings.Contains(err.Error(), "Unknown thread") {
			t.Errorf("kill the sleeper: %v", err)
		}
		return
	}
	t.Error("no session slept in the jobs' trigger")
}

// In a group of several changes, each change's job insert is held only
// until its change ends: an insert refused fails its change alone, and the
// changes around it commit, each answered with its own job's id (see
// checkGroupInserts), on a pipelined connection and on one that sends each
// statement on its own.
func TestGroupJobInsertsHeld(t *testing.T) {
	for _, params := range []string{"", "multiStatements=false"} {
		t.Run("dsn "+params, func(t *testing.T) {
			e := openMigrated(t, params)
			for _, stmt := range commitWindows {
				if _, err := e.db.ExecContext(t.Context(), stmt); err != nil {
					t.Fatal(err)
				}
			}
			checkGroupInserts(t, store.New(e, store.Rules{PhysicalNetworks: []string{"ib"}}), func(query, arg string) int64 {
				return countRows(t, e, query, arg)
			})
		})
	}
}

// checkGroupInserts, as postgres' (a test of one engine's package cannot
// share it), queues three port changes behind a first one held in
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

// A query after an insert held for its id (driver.IDInto), which no change
// makes today, sends the insert first, on its own (LAST_INSERT_ID() does not
// give an id the insert set itself): the id is given, and the query answers
// as ever. An insert refused there fails the query, and the transaction does
// not commit, even for a caller that goes on.
func TestQueryAfterAHeldInsert(t *testing.T) {
	e := openMigrated(t, "")
	ctx := t.Context()
	for _, stmt := range commitWindows {
		if _, err := e.db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, object := range []string{"held", "refused-insert"} {
		now := time.Now().UTC()
		var id, rev int64
		var readErr error
		err := e.InChangeTx(ctx, func(q driver.ChangeTx) error {
			if _, err := q.Later().InsertJob(driver.IDInto(ctx, &id), driver.Job{Fabric: driver.DefaultFabric, ObjectType: "port",
				ObjectID: object, Operation: "test", Status: "Completed", CreatedBy: "test", Request: "{}",
				CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			rev, readErr = q.Revision(ctx, driver.DefaultFabric)
			return nil // goes on whatever the read said
		})
		n := countRows(t, e, "SELECT count(*) FROM jobs WHERE object_id = ?", object)
		if object == "refused-insert" {
			if readErr == nil || err == nil || n != 0 {
				t.Errorf("%s: read %v, transaction %v, %d jobs; want both failed and no job", object, readErr, err, n)
			}
			continue
		}
		if err != nil || readErr != nil || rev != 0 || id == 0 || n != 1 {
			t.Errorf("%s: read %d, %v; transaction %v; id %d, %d jobs", object, rev, readErr, err, id, n)
		}
		if j, err := newQueries(e.db).GetJob(ctx, id); err != nil || j.ObjectID != object {
			t.Errorf("job %d: %+v, %v", id, j, err)
		}
	}
}
