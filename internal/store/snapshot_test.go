package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
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

func (q countingQueries) SnapshotHead(ctx context.Context, f string, kept int64) (driver.SnapshotHeadRow, error) {
	q.saw("SnapshotHead")
	return q.Queries.SnapshotHead(ctx, f, kept)
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
// written since and the adopted partitions; never one per table or count.
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
	want := []string{"SnapshotHead", "ListNetworksSince", "ListPortsSince", "ListAdoptedPartitions"}
	for i, step := range []struct {
		name string
		full bool
		want []string
	}{
		{"the first read, whole", true, append(want, "ListKubernetesPKeys", "ListKubernetesMembers")},
		{"a port added", false, want},
		{"nothing changed", false, want},
	} {
		if i == 1 {
			g := fabric.GUID(0x0002c90300000001)
			if _, err := s.RecordPort(ctx, PortChange{Port: Port{ID: "p1", NetworkID: net, GUID: &g, Host: "h1"},
				DeviceOwner: "compute:nova", Operation: OpAddPort, CreatedBy: "test", Request: "{}"}); err != nil {
				t.Fatal(err)
			}
		}
		ran = nil
		snap, err := s.ReadSnapshot(ctx, &c)
		if err != nil {
			t.Fatal(err)
		}
		if c.Last().Full != step.full || len(snap.Networks) != 1 || len(snap.Members) != min(i, 1) {
			t.Fatalf("%s: read %+v, snapshot %+v", step.name, c.Last(), snap)
		}
		if fmt.Sprint(ran) != fmt.Sprint(step.want) {
			t.Errorf("%s: queries %v, want %v", step.name, ran, step.want)
		}
	}
}
