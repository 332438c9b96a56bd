package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// testGaleraGroupConflict: a group of three changes through manager a loses
// certification to manager b's change through another Galera node, which
// commits while the group's transaction is open: the cluster aborts the
// group's transaction (a deadlock error), and a runs the whole group again.
// Each change is answered as it would be alone (the second is refused, the
// others accepted after b's change), and each is recorded once.
func testGaleraGroupConflict(t *testing.T, a, b *store.Store) {
	addNetwork(t, a, netA, 101)
	addNetwork(t, a, netB, 102)
	if _, err := addPort(t, a, "held", netA, 0x0002c90300000b01); err != nil {
		t.Fatal(err)
	}
	gt, first := blockFirst(t, a, netA, 0x0002c90300000b00)
	held := newGate(0x0002c90300000b03)
	answers := queue(t, a,
		portChange(t, a, boundPort("c1", netA, 0x0002c90300000b11, "h1")),
		portChange(t, a, boundPort("c2", netB, 0x0002c90300000b01, "h2")), // refused: port "held" holds it
		portChange(t, a.WithRules(held.rules()), boundPort("c3", netA, 0x0002c90300000b03, "h3")),
	)
	close(gt.open)
	if o := first(); o.err != nil || o.job.Revision != 4 {
		t.Fatalf("the first change: revision %d, %v; want 4", o.job.Revision, o.err)
	}
	held.wait(t) // c1 and c2 have run; c3 holds the group's transaction open
	// b's change commits through another node meanwhile (b too may lose
	// certification, while its node has not applied the first change yet,
	// and runs its change again).
	jb := addNetwork(t, b, netC, 103)
	close(held.open)
	got := answers()
	if jb.Revision != 5 {
		t.Errorf("b's change: revision %d; want 5", jb.Revision)
	}
	var rej *store.RejectedError
	if !errors.As(got[1].err, &rej) {
		t.Errorf("c2, whose GUID another network's port holds: %+v, %v; want its refusal", got[1].job, got[1].err)
	}
	for i, want := range map[int]int64{0: 6, 2: 7} {
		o := got[i]
		if o.err != nil || o.job.Revision != want {
			t.Errorf("c%d: revision %d, %v; want revision %d, after b's change", i+1, o.job.Revision, o.err, want)
			continue
		}
		if j, err := a.GetJob(t.Context(), o.job.ID); err != nil || j.Revision != want || j.ObjectID != fmt.Sprintf("c%d", i+1) {
			t.Errorf("c%d: recorded job %+v, %v", i+1, j, err)
		}
	}
	// netA, netB, held, first, b's netC, c1, c3: each once.
	assertGroupLeft(t, a, groupLeft{7, []string{`c1:` + netA + `:0x0002c90300000b11:"h1"`, "c2:absent",
		`c3:` + netA + `:0x0002c90300000b03:"h3"`}, map[string]int64{store.StatusPending: 7}})
}

// testGaleraJobIDsFromTwoNodes: two managers on two Galera nodes record
// changes at the same moments: every change is accepted, and the job ids are
// distinct and grow with the revisions, whatever the nodes' AUTO_INCREMENT
// steps (Galera's auto_increment_increment and offset).
func testGaleraJobIDsFromTwoNodes(t *testing.T, a, b *store.Store) {
	const rounds = 15
	jobs := make([]store.Job, 0, 2*rounds)
	for round := range rounds {
		var got [2]outcome
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, s := range []*store.Store{a, b} {
			wg.Go(func() {
				<-start
				id := fmt.Sprintf("%08x-0000-4000-8000-%012d", i, round)
				j, err := s.RecordNetwork(t.Context(), store.NetworkChange{Network: vlanNetwork(id, int64(200+2*round+i)),
					Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"})
				got[i] = outcome{j, err}
			})
		}
		close(start)
		wg.Wait()
		for i, o := range got {
			if o.err != nil {
				t.Fatalf("round %d: manager %d's change: %v", round, i, o.err)
			}
			jobs = append(jobs, o.job)
		}
	}
	slices.SortFunc(jobs, func(x, y store.Job) int { return cmp.Compare(x.Revision, y.Revision) })
	for i := 1; i < len(jobs); i++ {
		if jobs[i].Revision == jobs[i-1].Revision || jobs[i].ID <= jobs[i-1].ID {
			t.Errorf("revision %d has job %d, revision %d job %d: want distinct revisions and ids growing with them",
				jobs[i-1].Revision, jobs[i-1].ID, jobs[i].Revision, jobs[i].ID)
		}
	}
}

// testGaleraReadsAfterAnotherNodesCommit: a change through one node right
// after another node committed the change before it is judged by the state
// that change left, as on one server: a port recorded through a is found by
// its DELETE through b at once (a DELETE answered "not found" is, for
// networking-mlnx, a port removed, and its GUID would stay in the partition).
func testGaleraReadsAfterAnotherNodesCommit(t *testing.T, a, b *store.Store) {
	addNetwork(t, a, netA, 101)
	for i := range 40 {
		id := fmt.Sprintf("r%d", i)
		if _, err := addPort(t, a, id, netA, 0x0002c90300002000+uint64(i)); err != nil {
			t.Fatalf("port %s through a: %v", id, err)
		}
		if _, err := b.RemovePort(t.Context(), store.PortRemoval{PortID: id, CreatedBy: "test", Request: "{}"}); err != nil {
			t.Fatalf("DELETE of port %s through b right after a recorded it: %v; want it removed", id, err)
		}
	}
}

// testGaleraJobNeverWithoutItsChange: a port moved to another network through
// manager a while manager b records a change through another Galera node at
// the same moment, round after round. b's commit, replicated to a's node,
// aborts a's transaction (both bump the revision) at any point of it, also
// between the port's write and the job's insert: a's change is then run
// again whole, or refused whole, never recorded as a job without the port's
// move. Such a job, at the revision of b's change, is completed by the apply
// of b's change, and networking-mlnx is told the port is in its new network
// while the fabric still has it in the old one.
func testGaleraJobNeverWithoutItsChange(t *testing.T, a, b *store.Store) {
	const rounds = 600
	addNetwork(t, a, netA, 101)
	addNetwork(t, a, netB, 102)
	for i := range rounds {
		if _, err := addPort(t, a, fmt.Sprintf("m%d", i), netA, 0x0002c90300003000+uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for round := range rounds {
		id := fmt.Sprintf("m%d", round)
		var got [2]outcome
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			got[0].job, got[0].err = a.RecordPort(t.Context(), boundPort(id, netB, 0x0002c90300003000+uint64(round), "h1"))
		})
		wg.Go(func() {
			<-start
			got[1].job, got[1].err = b.RecordNetwork(t.Context(), store.NetworkChange{
				Network:   vlanNetwork(fmt.Sprintf("0000000b-0000-4000-8000-%012d", round), int64(300+round)),
				Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"})
		})
		close(start)
		wg.Wait()
		if got[0].err != nil || got[1].err != nil {
			// Refused whole (the conflict retry's bounds): nothing to check.
			t.Logf("round %d: %v, %v", round, got[0].err, got[1].err)
			continue
		}
		if got[0].job.Revision == got[1].job.Revision {
			t.Errorf("round %d: the move's job and b's change share revision %d", round, got[0].job.Revision)
		}
		p, err := a.GetPort(t.Context(), id)
		if err != nil || p.NetworkID != netB || p.Revision != got[0].job.Revision {
			t.Errorf("round %d: job %d (revision %d) answered for the move of port %s, which the database holds as %+v, %v",
				round, got[0].job.ID, got[0].job.Revision, id, p, err)
		}
	}
}
