package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// The applier's snapshot read after a change that deleted nothing sends its
// BEGIN, its head, the networks and ports written since and its COMMIT in
// one round trip (four through InTx, each query waiting for the one before;
// the adopted partitions, unchanged, are not read), and reads what a full
// read reads. A removal
// makes it read the deleted rows' networks again, in a transaction of its own.
func TestSnapshotReadIsOneRoundTrip(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_batch_")
	e := countingEngine(t, db.DSN)
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := store.New(e.Engine, store.Rules{PhysicalNetworks: []string{"ib"}})
	net, vlan := "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", int64(101)
	if _, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: net, Name: "n", Type: "vlan",
		PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork, CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	addPort := func(i int) {
		t.Helper()
		g := fabric.GUID(0x0002c90300000001 + uint64(i))
		if _, err := s.RecordPort(ctx, store.PortChange{Port: store.Port{ID: fmt.Sprintf("p%d", i), NetworkID: net, GUID: &g, Host: "h1"},
			DeviceOwner: "compute:nova", Operation: store.OpAddPort, CreatedBy: "test", Request: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	var c store.SnapshotCache
	read := func(step string, members int) (sent int64) {
		t.Helper()
		e.writes.Store(0)
		snap, err := s.ReadSnapshot(ctx, &c)
		sent = e.writes.Load()
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Members) != members || fmt.Sprint(snap) != fmt.Sprint(want) {
			t.Fatalf("%s: read %+v\nfull %+v", step, snap, want)
		}
		return sent
	}
	read("the first read, whole", 0)
	for i := range 2 { // the connection prepares the batch's statements
		addPort(i)
		read("warming up", i+1)
	}
	addPort(2)
	if n := read("a port added", 3); n != 1 || c.Last().Adopted {
		t.Errorf("the snapshot read after a port was added sent %d times, want 1; read %+v, want no adopted partition", n, c.Last())
	}
	if n := read("nothing changed", 3); n != 1 {
		t.Errorf("the snapshot read after no change sent %d times, want 1", n)
	}
	if _, err := s.RemovePort(ctx, store.PortRemoval{PortID: "p1", CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	read("a port removed", 2)
	if c.Last().Full || c.Last().NetworksRead != 1 {
		t.Errorf("the read after a removal: %+v, want the network read again, not everything", c.Last())
	}
}

// A batched read that the server refuses leaves no transaction open on its
// connection,
// and a read that makes other than one query is refused before anything is
// sent.
func TestReadBatchFailures(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_batch_")
	e := countingEngine(t, db.DSN) // one connection: the next read gets it
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	newest := func(q driver.Queries) error {
		_, err := q.NewestJobID(ctx, driver.DefaultFabric)
		return err
	}
	e.writes.Store(0)
	for _, reads := range [][]func(driver.Queries) error{
		{newest, func(driver.Queries) error { return nil }},
		{newest, func(q driver.Queries) error {
			if err := newest(q); !errors.Is(err, driver.ErrBatchQueried) {
				return err
			}
			return newest(q)
		}},
	} {
		if err := e.ReadBatch(ctx, reads...); err == nil {
			t.Error("a batched read of no query, or of two, was run")
		}
	}
	if n := e.writes.Load(); n != 0 {
		t.Errorf("refused batched reads sent %d times", n)
	}
	err := e.ReadBatch(ctx, newest, func(q driver.Queries) error {
		// Not UTF-8: the server refuses the query, and the transaction is
		// aborted there.
		_, err := q.NewestJobID(ctx, "\xff")
		return err
	}, newest)
	if err == nil {
		t.Fatal("a batched read whose query the server refused succeeded")
	}
	// Inside the batch's transaction a query fails (aborted) or shows its
	// isolation; outside it, the server's default.
	var isolation string
	if err := e.pool.QueryRow(ctx, "SHOW transaction_isolation").Scan(&isolation); err != nil || isolation != "read committed" {
		t.Fatalf("after the failed batch the connection is inside a transaction (%q, %v)", isolation, err)
	}
	if err := e.ReadBatch(ctx, newest, newest); err != nil {
		t.Fatalf("a batched read after a failed one: %v", err)
	}
}
