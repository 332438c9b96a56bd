package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Group commit: the changes that queue while a change holds the revision's
// lock are committed together, in one transaction. To form a group at will,
// a first change blocks inside its transaction (in a rule the change path
// calls under the lock, StaticMember), the changes of the group are queued
// behind it one by one, in a known order, and the first is let go: the
// committer then takes them all at once.

var groupTests = []storeTest{
	{"GroupWithRefusedChangesCommitsTheOthers", testGroupWithRefusals},
	{"GroupJudgesEachChangeByItsPredecessors", testGroupJudgesByPredecessors},
	{"GroupWhoseTransactionFailsAppliesNone", testGroupTransactionFails},
	{"CallerGoneBeforeItsGroupIsDropped", testGroupDropsGoneCaller},
	{"GroupsUnderLoadWithCallersGivingUp", testGroupsUnderLoad},
}

// gate blocks the changes of the GUIDs it holds inside their transaction
// until opened.
type gate struct {
	guids   map[fabric.GUID]bool
	entered chan fabric.GUID
	open    chan struct{}
}

func newGate(guids ...uint64) *gate {
	g := &gate{guids: map[fabric.GUID]bool{}, entered: make(chan fabric.GUID, len(guids)), open: make(chan struct{})}
	for _, v := range guids {
		g.guids[fabric.GUID(v)] = true
	}
	return g
}

// rules are store rules under which a change of a held GUID waits at the gate
// (while its group holds the revision's lock), then goes on as without them.
func (g *gate) rules() store.Rules {
	return store.Rules{StaticMember: func(guid fabric.GUID) (string, bool) {
		if g.guids[guid] {
			g.entered <- guid
			<-g.open
		}
		return "", false
	}}
}

func (g *gate) wait(t *testing.T) fabric.GUID {
	t.Helper()
	select {
	case guid := <-g.entered:
		return guid
	case <-time.After(time.Minute):
		t.Fatal("no change reached the gate")
		return 0
	}
}

// outcome is what a queued change was answered.
type outcome struct {
	job store.Job
	err error
}

// queue starts each change in turn, the next once the one before waits in
// the store's queue, and returns their outcomes, in order, once all are
// answered. Call it while a change holds the revision's lock.
func queue(t *testing.T, s *store.Store, changes ...func() (store.Job, error)) func() []outcome {
	t.Helper()
	outcomes := make([]outcome, len(changes))
	var wg sync.WaitGroup
	base := s.QueuedChanges()
	for i, change := range changes {
		wg.Go(func() {
			j, err := change()
			outcomes[i] = outcome{j, err}
		})
		waitQueued(t, s, base+i+1)
	}
	return func() []outcome { wg.Wait(); return outcomes }
}

func waitQueued(t *testing.T, s *store.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s.QueuedChanges() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d changes queued, waiting for %d", s.QueuedChanges(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// blockFirst records a port whose change waits at a gate, holding the
// revision's lock, and returns the gate and the port's outcome.
func blockFirst(t *testing.T, s *store.Store, network string, g uint64) (*gate, func() outcome) {
	t.Helper()
	gt := newGate(g)
	done := make(chan outcome, 1)
	go func() {
		j, err := s.WithRules(gt.rules()).RecordPort(t.Context(), boundPort("first", network, g, "h0"))
		done <- outcome{j, err}
	}()
	gt.wait(t)
	return gt, func() outcome { return <-done }
}

func portChange(t *testing.T, s *store.Store, c store.PortChange) func() (store.Job, error) {
	return func() (store.Job, error) { return s.RecordPort(t.Context(), c) }
}

// testGroupWithRefusals: a group of seven changes, three of them refused (a
// GUID already in another network's partition, a VLAN ID another network's
// partition has, a port that is not recorded) and one that touches no
// partition. The others are committed with consecutive revisions, in queue
// order; the one that touches no partition is Completed at the revision
// before it; a refused one is answered as alone and leaves no row and no job.
func testGroupWithRefusals(t *testing.T, s *store.Store) {
	seed := func(s *store.Store) {
		addNetwork(t, s, netA, 101)
		addNetwork(t, s, netB, 102)
		addPort(t, s, "held", netA, 0x0002c90300000a01)
	}
	port := func(c store.PortChange) func(*store.Store) (store.Job, error) {
		return func(s *store.Store) (store.Job, error) { return s.RecordPort(t.Context(), c) }
	}
	rejected := func(err error) bool { var rej *store.RejectedError; return errors.As(err, &rej) }
	notFound := func(err error) bool { return errors.Is(err, store.ErrNotFound) }
	// The group in queue order, and the answer each change must get: a job at
	// a revision with a status, or a refusal of a kind, worded as alone.
	group := []struct {
		change   func(*store.Store) (store.Job, error)
		revision int64
		status   string
		refused  func(error) bool
	}{
		{port(boundPort("g1", netA, 0x0002c90300000a11, "h1")), 5, store.StatusPending, nil},
		{port(boundPort("g2", netB, 0x0002c90300000a01, "h2")), 0, "", rejected}, // netA holds the GUID
		{func(s *store.Store) (store.Job, error) {
			return s.RecordNetwork(t.Context(), store.NetworkChange{Network: vlanNetwork(netC, 101),
				Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"})
		}, 0, "", rejected}, // netA's VLAN
		{port(boundPort("g4", netB, 0x0002c90300000a14, "h4")), 6, store.StatusPending, nil},
		{port(boundPort("g5", netA, 0x0002c90300000a15, "")), 6, store.StatusCompleted, nil}, // unbound: no partition
		{func(s *store.Store) (store.Job, error) {
			return s.RemovePort(t.Context(), store.PortRemoval{PortID: "nope", CreatedBy: "test", Request: "{}"})
		}, 0, "", notFound},
		{port(boundPort("g7", netA, 0x0002c90300000a17, "h7")), 7, store.StatusPending, nil},
	}
	seed(s)
	alone := Open(t, s.DB().Name()) // the refusals, as a change alone is answered them
	seed(alone)
	aloneErrs := make([]string, len(group))
	changes := make([]func() (store.Job, error), len(group))
	for i, c := range group {
		if c.refused != nil {
			_, err := c.change(alone)
			aloneErrs[i] = errText(err)
		}
		changes[i] = func() (store.Job, error) { return c.change(s) }
	}

	gt, first := blockFirst(t, s, netA, 0x0002c90300000a00)
	answers := queue(t, s, changes...)
	close(gt.open)
	if o := first(); o.err != nil || o.job.Revision != 4 {
		t.Fatalf("the first change: revision %d, %v; want 4", o.job.Revision, o.err)
	}
	for i, o := range answers() {
		want := group[i]
		if want.refused != nil {
			if !want.refused(o.err) || errText(o.err) != aloneErrs[i] {
				t.Errorf("change %d: error %q; want %q, as alone, and a refusal of its kind", i+1, errText(o.err), aloneErrs[i])
			}
			continue
		}
		if o.err != nil || o.job.Revision != want.revision || o.job.Status != want.status {
			t.Errorf("change %d: revision %d, %s, %v; want revision %d, %s", i+1, o.job.Revision, o.job.Status, o.err,
				want.revision, want.status)
		}
		if j, err := s.GetJob(t.Context(), o.job.ID); err != nil || j.Revision != want.revision || j.Status != want.status {
			t.Errorf("change %d: recorded job %+v, %v", i+1, j, err)
		}
	}
	// 2 networks, "held", the first, g1, g4, g7 Pending; g5 Completed; no job of a refusal.
	assertGroupLeft(t, s, groupLeft{7, []string{`g1:` + netA + `:0x0002c90300000a11:"h1"`, "g2:absent",
		`g4:` + netB + `:0x0002c90300000a14:"h4"`, `g5:` + netA + `:no-guid:""`, `g7:` + netA + `:0x0002c90300000a17:"h7"`},
		map[string]int64{store.StatusPending: 7, store.StatusCompleted: 1}})
	if st := readState(t, s); !strings.Contains(st.Networks, netA) || !strings.Contains(st.Networks, netB) ||
		strings.Contains(st.Networks, netC) {
		t.Errorf("networks %s; want %s and %s only", st.Networks, netA, netB)
	}
}

// groupLeft is what a group must leave recorded: the revision, the ports of
// the group as readPorts reads them ("id:absent" for one refused) and the
// number of jobs by status.
type groupLeft struct {
	revision int64
	ports    []string
	jobs     map[string]int64
}

func assertGroupLeft(t *testing.T, s *store.Store, want groupLeft) {
	t.Helper()
	if r := revision(t, s); r != want.revision {
		t.Errorf("revision %d after the group; want %d", r, want.revision)
	}
	var ids []string
	for _, p := range want.ports {
		id, _, _ := strings.Cut(p, ":")
		ids = append(ids, id)
	}
	if p := readPorts(t, s, ids...); !slices.Equal(p, want.ports) {
		t.Errorf("ports %v; want %v", p, want.ports)
	}
	if st := readState(t, s); !maps.Equal(st.Jobs, want.jobs) {
		t.Errorf("jobs by status %v; want %v", st.Jobs, want.jobs)
	}
}

const netC = "7d1f3e5a-2222-4b8c-9d0e-1f2a3b4c5d6e"

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// testGroupJudgesByPredecessors: in one group, two ports of two networks claim
// one GUID, then a network takes a VLAN ID a network recorded earlier in the
// group has, then a port of that earlier network is recorded: each is judged
// by the state its predecessors leave (the second claim and the VLAN refused,
// the port of a network recorded in the same group accepted), as if they had
// come one after another.
func testGroupJudgesByPredecessors(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	addNetwork(t, s, netB, 102)
	gt, first := blockFirst(t, s, netA, 0x0002c90300000b00)
	const g = 0x0002c90300000b01
	answers := queue(t, s,
		portChange(t, s, boundPort("pa", netA, g, "h1")),
		portChange(t, s, boundPort("pb", netB, g, "h2")),
		func() (store.Job, error) {
			return s.RecordNetwork(t.Context(), store.NetworkChange{Network: vlanNetwork(netC, 103),
				Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"})
		},
		func() (store.Job, error) {
			return s.RecordNetwork(t.Context(), store.NetworkChange{Network: vlanNetwork(netD, 103),
				Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"})
		},
		portChange(t, s, boundPort("pc", netC, 0x0002c90300000b03, "h3")),
	)
	close(gt.open)
	if o := first(); o.err != nil {
		t.Fatal(o.err)
	}
	got := answers()
	var rej *store.RejectedError
	switch {
	case got[0].err != nil || got[0].job.Revision != 4:
		t.Errorf("first claim: revision %d, %v; want 4", got[0].job.Revision, got[0].err)
	case !errors.As(got[1].err, &rej) || !strings.Contains(rej.Reason, "already in the partition of network "+netA):
		t.Errorf("second claim, of another network: %v; want refused, the GUID being in %s's partition", got[1].err, netA)
	case got[2].err != nil || got[2].job.Revision != 5:
		t.Errorf("network %s: revision %d, %v; want 5", netC, got[2].job.Revision, got[2].err)
	case !errors.As(got[3].err, &rej) || !strings.Contains(rej.Reason, "network "+netC):
		t.Errorf("network %s on the VLAN ID of %s: %v; want refused", netD, netC, got[3].err)
	case got[4].err != nil || got[4].job.Revision != 6:
		t.Errorf("port of the network recorded in the group: revision %d, %v; want 6", got[4].job.Revision, got[4].err)
	}
	if m := members(t, s); m[fabric.GUID(g)] != netA || m[fabric.GUID(0x0002c90300000b03)] != netC {
		t.Errorf("members %v; want %s in %s, the port of %s", m, fabric.GUID(g), netA, netC)
	}
	if r := revision(t, s); r != 6 {
		t.Errorf("revision %d; want 6", r)
	}
}

const netD = "9e2a4f6b-3333-4c9d-8e1f-2a3b4c5d6e7f"

// testGroupTransactionFails: the transaction of a group fails after some of
// its changes ran (the callers' deadlines all pass while one change of the
// group is held, so the group's next statement fails): every change of the
// group is answered with a failure (the held one its statement's, the others
// the transaction's) and none is recorded. The changes
// committed before are untouched, and the next change is recorded.
func testGroupTransactionFails(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	gt, first := blockFirst(t, s, netA, 0x0002c90300000c00)
	// The group's deadline is its callers' latest; the second change of the
	// group waits at a gate of its own until it has passed.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	held := newGate(0x0002c90300000c02)
	heldStore := s.WithRules(held.rules())
	answers := queue(t, s,
		func() (store.Job, error) { return s.RecordPort(ctx, boundPort("f1", netA, 0x0002c90300000c01, "h1")) },
		func() (store.Job, error) {
			return heldStore.RecordPort(ctx, boundPort("f2", netA, 0x0002c90300000c02, "h2"))
		},
		func() (store.Job, error) { return s.RecordPort(ctx, boundPort("f3", netA, 0x0002c90300000c03, "h3")) },
	)
	close(gt.open)
	if o := first(); o.err != nil || o.job.Revision != 2 {
		t.Fatalf("the first change: revision %d, %v; want 2", o.job.Revision, o.err)
	}
	held.wait(t) // f1 has run its statements; f2 is in the transaction
	// The group's context has a timer of its own, set to the same deadline:
	// f2 goes on once that timer has surely fired too.
	<-ctx.Done()
	deadline, _ := ctx.Deadline()
	time.Sleep(time.Until(deadline.Add(200 * time.Millisecond)))
	close(held.open)
	// f2 is answered its own statement's failure, f1 and f3 the group's
	// (how a statement fails past its deadline is the driver's: pgx closes
	// the connection), which is no refusal of theirs.
	got := answers()
	groupErr := func(i int) string {
		return strings.TrimPrefix(errText(got[i].err), fmt.Sprintf("record port f%d: ", i+1))
	}
	for i, o := range got {
		var rej *store.RejectedError
		if o.err == nil || errors.As(o.err, &rej) || errors.Is(o.err, store.ErrNotFound) {
			t.Errorf("change f%d of the failed group: job %+v, error %v; want the group's failure", i+1, o.job, o.err)
		}
	}
	if groupErr(0) != groupErr(2) || !strings.Contains(groupErr(0), "roll back") {
		t.Errorf("f1 and f3 answered %q and %q; want the same failure of their group's transaction", groupErr(0), groupErr(2))
	}
	if r := revision(t, s); r != 2 {
		t.Errorf("revision %d after the failed group; want 2", r)
	}
	st := readState(t, s, "first", "f1", "f2", "f3")
	if want := fmt.Sprint([]string{`first:` + netA + `:0x0002c90300000c00:"h0"`, "f1:absent", "f2:absent", "f3:absent"}); st.Ports != want {
		t.Errorf("ports %s; want %s", st.Ports, want)
	}
	if st.Jobs[store.StatusPending] != 2 || len(st.Jobs) != 1 {
		t.Errorf("jobs by status %v; want the network's and the first port's only", st.Jobs)
	}
	if j, err := addPort(t, s, "f1", netA, 0x0002c90300000c01); err != nil || j.Revision != 3 {
		t.Errorf("a change after the failed group: revision %d, %v; want 3", j.Revision, err)
	}
}

// testGroupDropsGoneCaller: a change whose caller gives up while it is still
// queued is answered with its context's error and never recorded; the
// changes queued beside it are.
func testGroupDropsGoneCaller(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	gt, first := blockFirst(t, s, netA, 0x0002c90300000d00)
	ctx, cancel := context.WithCancel(context.Background())
	answers := queue(t, s,
		portChange(t, s, boundPort("d1", netA, 0x0002c90300000d01, "h1")),
		func() (store.Job, error) { return s.RecordPort(ctx, boundPort("d2", netA, 0x0002c90300000d02, "h2")) },
		portChange(t, s, boundPort("d3", netA, 0x0002c90300000d03, "h3")),
	)
	cancel()
	deadline := time.Now().Add(time.Minute)
	for s.QueuedChanges() != 2 { // the caller gone has dropped its change
		if time.Now().After(deadline) {
			t.Fatalf("%d changes queued after a caller gave up; want 2", s.QueuedChanges())
		}
		time.Sleep(time.Millisecond)
	}
	close(gt.open)
	if o := first(); o.err != nil {
		t.Fatal(o.err)
	}
	got := answers()
	if got[0].err != nil || got[0].job.Revision != 3 || got[2].err != nil || got[2].job.Revision != 4 {
		t.Errorf("the changes beside the dropped one: %+v, %+v; want revisions 3 and 4", got[0], got[2])
	}
	if !errors.Is(got[1].err, context.Canceled) {
		t.Errorf("the dropped change: %+v; want its context's error", got[1])
	}
	if p := readPorts(t, s, "d2"); p[0] != "d2:absent" {
		t.Errorf("the dropped change is recorded: %v", p)
	}
}

// testGroupConnectionKilled: the server ends a group's connection while one
// of its changes is held in the transaction (after the change before it ran
// its statements): every change of the group fails and none is recorded; the
// next change is.
func testGroupConnectionKilled(t *testing.T, db Database, s *store.Store) {
	addNetwork(t, s, netA, 101)
	gt, first := blockFirst(t, s, netA, 0x0002c90300000f00)
	held := newGate(0x0002c90300000f02)
	heldStore := s.WithRules(held.rules())
	answers := queue(t, s,
		portChange(t, s, boundPort("k1", netA, 0x0002c90300000f01, "h1")),
		portChange(t, heldStore, boundPort("k2", netA, 0x0002c90300000f02, "h2")),
		portChange(t, s, boundPort("k3", netA, 0x0002c90300000f03, "h3")),
	)
	close(gt.open)
	if o := first(); o.err != nil || o.job.Revision != 2 {
		t.Fatalf("the first change: revision %d, %v; want 2", o.job.Revision, o.err)
	}
	held.wait(t)
	killTransaction(t, db)
	close(held.open)
	for i, o := range answers() {
		if o.err == nil {
			t.Errorf("change k%d of the group whose connection was killed: job %+v, no error", i+1, o.job)
		}
	}
	if r := revision(t, s); r != 2 {
		t.Errorf("revision %d after the failed group; want 2", r)
	}
	if p := fmt.Sprint(readPorts(t, s, "k1", "k2", "k3")); p != "[k1:absent k2:absent k3:absent]" {
		t.Errorf("ports %s; want none of the group", p)
	}
	if j, err := addPort(t, s, "k1", netA, 0x0002c90300000f01); err != nil || j.Revision != 3 {
		t.Errorf("a change after the failed group: revision %d, %v; want 3", j.Revision, err)
	}
}

// testGroupHeldWriteFails: a change of a group passes the rules, then its
// port's write fails: another session deleted the port's network after the
// change read it, and the port's foreign key refuses the write. On the server
// engines the write is held and sent with the job's insert, so its error
// comes with the insert: that change fails alone and records nothing,
// neither port nor job; the changes before and after it in the group commit,
// at consecutive revisions.
func testGroupHeldWriteFails(t *testing.T, db Database, s *store.Store) {
	addNetwork(t, s, netA, 101)
	addNetwork(t, s, netB, 102)
	const g2 = 0x0002c90300000e02
	gt, first := blockFirst(t, s, netA, 0x0002c90300000e00)
	held := newGate(g2)
	answers := queue(t, s,
		portChange(t, s, boundPort("w1", netA, 0x0002c90300000e01, "h1")),
		portChange(t, s.WithRules(held.rules()), boundPort("w2", netB, g2, "h2")),
		portChange(t, s, boundPort("w3", netA, 0x0002c90300000e03, "h3")),
	)
	close(gt.open)
	if o := first(); o.err != nil || o.job.Revision != 3 {
		t.Fatalf("the first change: revision %d, %v; want 3", o.job.Revision, o.err)
	}
	held.wait(t) // w2 has read its network
	execBeside(t, db, fmt.Sprintf("DELETE FROM networks WHERE id = '%s'", netB))
	close(held.open)
	got := answers()
	if got[0].err != nil || got[0].job.Revision != 4 || got[2].err != nil || got[2].job.Revision != 5 {
		t.Errorf("w1 and w3: revisions %d, %d, %v, %v; want 4 and 5", got[0].job.Revision, got[2].job.Revision,
			got[0].err, got[2].err)
	}
	var rej *store.RejectedError
	if got[1].err == nil || errors.As(got[1].err, &rej) {
		t.Errorf("w2, whose network is gone: job %+v, %v; want a database error", got[1].job, got[1].err)
	}
	// 2 networks, the first, w1, w3: no job of w2.
	assertGroupLeft(t, s, groupLeft{5, []string{`w1:` + netA + `:0x0002c90300000e01:"h1"`, "w2:absent",
		`w3:` + netA + `:0x0002c90300000e03:"h3"`}, map[string]int64{store.StatusPending: 5}})
}

// beside runs, on a session of its own beside the store's, the function
// for db's engine: postgres on PostgreSQL, mysql on MariaDB.
func beside(t *testing.T, db Database, postgres func(ctx context.Context, conn *pgx.Conn),
	mysql func(ctx context.Context, conn *sql.DB)) {
	t.Helper()
	ctx := t.Context()
	switch db.Engine {
	case config.EnginePostgres:
		conn, err := pgx.Connect(ctx, db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		postgres(ctx, conn)
	case config.EngineMySQL:
		conn, err := sql.Open("mysql", db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mysql(ctx, conn)
	default:
		t.Fatalf("no session beside the store's on %s", db.Engine)
	}
}

// execBeside runs statement from a session of its own, beside the store's
// (whose changes would wait for the revision's lock).
func execBeside(t *testing.T, db Database, statement string) {
	t.Helper()
	beside(t, db, func(ctx context.Context, conn *pgx.Conn) {
		if _, err := conn.Exec(ctx, statement); err != nil {
			t.Fatalf("%s: %v", statement, err)
		}
	}, func(ctx context.Context, conn *sql.DB) {
		if _, err := conn.ExecContext(ctx, statement); err != nil {
			t.Fatalf("%s: %v", statement, err)
		}
	})
}

// killTransaction ends, from a session of its own, the session of db that
// is inside a transaction.
func killTransaction(t *testing.T, db Database) {
	t.Helper()
	beside(t, db, func(ctx context.Context, conn *pgx.Conn) {
		var killed int
		err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid()`).Scan(&killed)
		if err != nil || killed != 1 {
			t.Fatalf("terminate the group's session: %d terminated, %v; want 1", killed, err)
		}
	}, func(ctx context.Context, conn *sql.DB) {
		// Which session is in a transaction takes the PROCESS privilege to
		// see (information_schema.innodb_trx): every session of the
		// database but this one is ended, the store's idle ones too (its
		// pool replaces them).
		c, err := conn.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var ids []int64
		rows, err := c.QueryContext(ctx, `SELECT id FROM information_schema.processlist
			WHERE db = DATABASE() AND id <> CONNECTION_ID()`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil || len(ids) == 0 {
			t.Fatalf("the store's sessions: %v, %v; want at least the group's", ids, err)
		}
		for _, id := range ids {
			if _, err := c.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
				t.Fatalf("kill session %d: %v", id, err)
			}
		}
	})
}

// testGroupsUnderLoad: 64 changes at once, every third from a caller that
// gives up at some point: the changes answered as recorded hold the
// revisions after the network's, each its own, with no gap; those answered
// with their context's error are not recorded.
func testGroupsUnderLoad(t *testing.T, s *store.Store) {
	addNetwork(t, s, netA, 101)
	const n = 64
	revs := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx := t.Context()
			if i%3 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(i)*100*time.Microsecond)
				defer cancel()
			}
			j, err := s.RecordPort(ctx, boundPort(fmt.Sprintf("l%d", i), netA, 0x0002c90300001000+uint64(i), "h1"))
			revs[i], errs[i] = j.Revision, err
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("l%d", i))
		switch {
		case errs[i] == nil:
			if seen[revs[i]] {
				t.Errorf("revision %d twice", revs[i])
			}
			seen[revs[i]] = true
		case i%3 != 0 || !errors.Is(errs[i], context.DeadlineExceeded):
			t.Errorf("change %d: %v", i, errs[i])
		}
	}
	last := revision(t, s)
	for r := int64(2); r <= last; r++ {
		if !seen[r] {
			t.Errorf("revision %d of %d taken by no change answered as recorded", r, last)
		}
	}
	if int(last-1) != len(seen) {
		t.Errorf("revision %d after %d recorded changes; want %d", last, len(seen), len(seen)+1)
	}
	for i, p := range readPorts(t, s, ids...) {
		if recorded := !strings.HasSuffix(p, ":absent"); recorded != (errs[i] == nil) {
			t.Errorf("change %d answered %v, port recorded: %v", i, errs[i], recorded)
		}
	}
}
