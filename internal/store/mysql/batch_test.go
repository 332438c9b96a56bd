package mysql

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// countedEngine opens a migrated database's engine, pipelined, on one
// connection dialled through "afm-counted".
func countedEngine(t *testing.T, prefix string) *Engine {
	t.Helper()
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_MYSQL_URL", prefix)
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
	return e
}

// The applier's snapshot read after a change that deleted nothing sends its
// beginning, its head, the networks and ports written since and its COMMIT
// in one query (four round trips through InTx, each query waiting for the
// one before; the adopted partitions, unchanged, are not read), and reads
// what a full read reads.
// A removal makes it read the deleted rows' networks again, in a transaction
// of its own.
func TestSnapshotReadIsOneRoundTrip(t *testing.T) {
	checkSnapshotReads(t, countedEngine(t, "afm_batch_"), 1)
}

// On a connection that sends each statement on its own (a DSN without
// multiStatements, or Galera) the batched reads go one after the other, in
// one read-only transaction, and read the same.
func TestSnapshotReadNotPipelined(t *testing.T) {
	e := openMigrated(t, "multiStatements=false")
	if e.pipelined {
		t.Fatal("the engine is pipelined without multiStatements")
	}
	checkSnapshotReads(t, e, 0)
}

// checkSnapshotReads reads e's snapshot through a cache after changes, each
// read compared with a full one; when the engine's connections are counted
// (sent > 0), a read after a change that deleted nothing sends that many
// commands.
func checkSnapshotReads(t *testing.T, e *Engine, sent int64) {
	ctx := t.Context()
	s := store.New(e, store.Rules{PhysicalNetworks: []string{"ib"}})
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
	read := func(step string, members int, counts bool) {
		t.Helper()
		counted.Store(0)
		snap, err := s.ReadSnapshot(ctx, &c)
		n := counted.Load()
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
		if counts && sent > 0 && n != sent {
			t.Errorf("%s: the snapshot read sent %d commands, want %d", step, n, sent)
		}
		if counts && c.Last().Adopted {
			t.Errorf("%s: the snapshot read read the adopted partitions, which no change wrote", step)
		}
	}
	read("the first read, whole", 0, false)
	addPort(0)
	read("a port added", 1, true)
	read("nothing changed", 1, true)
	addPort(1)
	read("another port added", 2, true)
	if _, err := s.RemovePort(ctx, store.PortRemoval{PortID: "p1", CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	read("a port removed", 1, false)
	if c.Last().Full || c.Last().NetworksRead != 1 {
		t.Errorf("the read after a removal: %+v, want the network read again, not everything", c.Last())
	}
}

// A batched read that the server refuses leaves no transaction open on its
// connection, and a read that makes other than one query is refused before
// anything is sent.
func TestReadBatchFailures(t *testing.T) {
	ctx := t.Context()
	e := countedEngine(t, "afm_batch_")
	newest := func(q driver.Queries) error {
		_, err := q.NewestJobID(ctx, driver.DefaultFabric)
		return err
	}
	counted.Store(0)
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
	if n := counted.Load(); n != 0 {
		t.Errorf("refused batched reads sent %d commands", n)
	}
	// A table gone: the server refuses the second query, and runs none after.
	if _, err := e.db.ExecContext(ctx, "DROP TABLE adopted_partitions"); err != nil {
		t.Fatal(err)
	}
	err := e.ReadBatch(ctx, newest, func(q driver.Queries) error {
		_, err := q.ListAdoptedPartitions(ctx, driver.DefaultFabric)
		return err
	}, newest)
	if err == nil {
		t.Fatal("a batched read whose query the server refused succeeded")
	}
	// Inside the batch's transaction, a read-only one, a write fails.
	if _, err := e.db.ExecContext(ctx, "CREATE TEMPORARY TABLE afm_batch_probe (n INT)"); err != nil {
		t.Fatalf("after the failed batch the connection is inside a read-only transaction: %v", err)
	}
	if err := e.ReadBatch(ctx, newest, newest); err != nil {
		t.Fatalf("a batched read after a failed one: %v", err)
	}
}
