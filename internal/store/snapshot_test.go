package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// countingDriver is a real engine whose read-only transactions name each
// query a snapshot read can run, in order (each is a round trip on
// PostgreSQL and MariaDB).
type countingDriver struct {
	driver.Driver
	ran *[]string
}

func (d countingDriver) InTx(ctx context.Context, mode driver.TxMode, fn func(q driver.Queries) error) error {
	return d.Driver.InTx(ctx, mode, func(q driver.Queries) error { return fn(countingQueries{q, d.ran}) })
}

// countingQueries names every query of driver.Queries that ReadSnapshot,
// or what it calls, may run.
type countingQueries struct {
	driver.Queries
	ran *[]string
}

func (q countingQueries) saw(name string) { *q.ran = append(*q.ran, name) }

func (q countingQueries) SnapshotHead(ctx context.Context, f string, kept, since int64) (driver.SnapshotHeadRow, error) {
	q.saw("SnapshotHead")
	return q.Queries.SnapshotHead(ctx, f, kept, since)
}
func (q countingQueries) Revision(ctx context.Context, f string) (int64, error) {
	q.saw("Revision")
	return q.Queries.Revision(ctx, f)
}
func (q countingQueries) NewestJobID(ctx context.Context, f string) (int64, error) {
	q.saw("NewestJobID")
	return q.Queries.NewestJobID(ctx, f)
}
func (q countingQueries) GetJob(ctx context.Context, id int64) (driver.Job, error) {
	q.saw("GetJob")
	return q.Queries.GetJob(ctx, id)
}
func (q countingQueries) ListNetworksSince(ctx context.Context, f string, rev int64) ([]driver.Network, error) {
	q.saw("ListNetworksSince")
	return q.Queries.ListNetworksSince(ctx, f, rev)
}
func (q countingQueries) ListPortsSince(ctx context.Context, f string, rev int64) ([]driver.Port, error) {
	q.saw("ListPortsSince")
	return q.Queries.ListPortsSince(ctx, f, rev)
}
func (q countingQueries) CountMembersByNetwork(ctx context.Context, f string) ([]driver.CountMembersByNetworkRow, error) {
	q.saw("CountMembersByNetwork")
	return q.Queries.CountMembersByNetwork(ctx, f)
}
func (q countingQueries) ListPortsOfNetwork(ctx context.Context, f, network string) ([]driver.Port, error) {
	q.saw("ListPortsOfNetwork")
	return q.Queries.ListPortsOfNetwork(ctx, f, network)
}
func (q countingQueries) ListAdoptedPartitions(ctx context.Context, f string) ([]driver.AdoptedPartition, error) {
	q.saw("ListAdoptedPartitions")
	return q.Queries.ListAdoptedPartitions(ctx, f)
}
func (q countingQueries) KubernetesState(ctx context.Context, f string) (driver.KubernetesStateRow, error) {
	q.saw("KubernetesState")
	return q.Queries.KubernetesState(ctx, f)
}
func (q countingQueries) ListKubernetesPKeys(ctx context.Context, f string) ([]driver.KubernetesPKey, error) {
	q.saw("ListKubernetesPKeys")
	return q.Queries.ListKubernetesPKeys(ctx, f)
}
func (q countingQueries) ListKubernetesMembers(ctx context.Context, f string) ([]driver.KubernetesMember, error) {
	q.saw("ListKubernetesMembers")
	return q.Queries.ListKubernetesMembers(ctx, f)
}

// A snapshot read after a change costs a fixed number of queries: one for
// the revision, the history and the counts, then the networks and ports
// written since; never one per table or count. The adopted partitions are
// read only when the head shows them written since the cache's revision (at
// it too: a change that takes no revision writes at the current one), or
// deleted.
func TestSnapshotReadQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var ran []string
	s := New(countingDriver{Driver: migratedSQLite(ctx, t), ran: &ran}, Rules{PhysicalNetworks: []string{"ib"}})
	net, vlan := "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", int64(101)
	if _, err := s.RecordNetwork(ctx, NetworkChange{Network: NetworkSpec{ID: net, Name: "n", Type: "vlan",
		PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: OpCreateNetwork, CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	var c SnapshotCache
	want := []string{"SnapshotHead", "ListNetworksSince", "ListPortsSince"}
	adopted := append(slices.Clone(want), "ListAdoptedPartitions")
	addPort := func(id string, g fabric.GUID) {
		if _, err := s.RecordPort(ctx, PortChange{Port: Port{ID: id, NetworkID: net, GUID: &g, Host: "h1"},
			DeviceOwner: "compute:nova", Operation: OpAddPort, CreatedBy: "test", Request: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name    string
		change  func()
		full    bool
		members int
		adopted int
		want    []string
	}{
		{"the first read, whole", func() {}, true, 0, 0, append(slices.Clone(adopted), "ListKubernetesPKeys", "ListKubernetesMembers")},
		{"a port added", func() { addPort("p1", 0x0002c90300000001) }, false, 1, 0, want},
		{"nothing changed", func() {}, false, 1, 0, want},
		{"a partition adopted", func() { adopt(ctx, t, s, "tenant=0x0020 : 0x0002c90300000009=full ;") }, false, 1, 1, adopted},
		{"a port added at the adoption's revision's next", func() { addPort("p2", 0x0002c90300000002) }, false, 2, 1, adopted},
		{"a port added after", func() { addPort("p3", 0x0002c90300000003) }, false, 3, 1, want},
		{"the adopted members released", func() { releaseAdopted(ctx, t, s, 0x0020) }, false, 3, 0, adopted},
	} {
		step.change()
		ran = nil
		snap, err := s.ReadSnapshot(ctx, &c)
		if err != nil {
			t.Fatal(err)
		}
		if c.Last().Full != step.full || len(snap.Networks) != 1 || len(snap.Members) != step.members ||
			len(snap.Adopted) != step.adopted {
			t.Fatalf("%s: read %+v, snapshot %+v", step.name, c.Last(), snap)
		}
		if fmt.Sprint(ran) != fmt.Sprint(step.want) {
			t.Errorf("%s: queries %v, want %v", step.name, ran, step.want)
		}
	}
}

// adopt adopts the partition of statement text.
func adopt(ctx context.Context, t *testing.T, s *Store, text string) {
	t.Helper()
	st, err := partitions.ParseStatement(text)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.AdoptPartitions(ctx, Adoption{Partitions: []partitions.Statement{st}, CreatedBy: "test"})
	if err != nil || !out.Changed {
		t.Fatalf("adopt %s: %+v, %v", text, out, err)
	}
}

// releaseAdopted releases the adopted members of pkey.
func releaseAdopted(ctx context.Context, t *testing.T, s *Store, pkey fabric.PKey) {
	t.Helper()
	if _, err := s.ReleaseAdoptedMembers(ctx, AdoptedRelease{PKey: pkey, CreatedBy: "test"}); err != nil {
		t.Fatalf("release %s: %v", pkey, err)
	}
}
