package store

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/sqlite"
)

// A Kubernetes change never waits in networking-mlnx's queue, nor shares a
// group with its changes: while a networking-mlnx group runs, a Kubernetes
// change waits for the database in its own lane, and a networking-mlnx change
// sent then is the only change queued in its lane. Both are recorded once the
// group ends.
func TestKubernetesChangesHaveTheirOwnLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e := migratedSQLite(ctx, t)
	s := New(e, Rules{PhysicalNetworks: []string{"ibnet"}, KubernetesRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff}})

	// A networking-mlnx group holds its lane's committer and the database.
	started, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.change(ctx, func(context.Context, *changeTx) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	kube := make(chan error, 1)
	go func() {
		_, err := s.AddKubernetesGUIDs(ctx, KubernetesAddition{PKey: 0x1005, CreatedBy: "ib-kubernetes",
			Members: []KubernetesMember{{GUID: 0x020000000000003e, Membership: fabric.Full}}})
		kube <- err
	}()
	waitFor(t, "the Kubernetes change to commit in its own lane", func() bool {
		s.kubeGroups.mu.Lock()
		defer s.kubeGroups.mu.Unlock()
		return s.kubeGroups.committer && len(s.kubeGroups.queue) == 0
	})
	vlan := int64(101)
	neutron := make(chan error, 1)
	go func() {
		_, err := s.RecordNetwork(ctx, NetworkChange{Operation: OpCreateNetwork, Network: NetworkSpec{
			ID: "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", Name: "n", Type: TypeVLAN, PhysicalNetwork: "ibnet",
			SegmentationID: &vlan}})
		neutron <- err
	}()
	waitFor(t, "the networking-mlnx change to queue", func() bool { return s.QueuedChanges() == 1 })
	s.groups.mu.Lock()
	queued := len(s.groups.queue)
	s.groups.mu.Unlock()
	if queued != 1 {
		t.Errorf("networking-mlnx's lane holds %d changes, want its own 1", queued)
	}
	close(release)
	for name, done := range map[string]chan error{"the held group": held, "the Kubernetes change": kube,
		"the networking-mlnx change": neutron} {
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// migratedSQLite is a new SQLite database in t's directory, migrated, closed
// when t ends: for the tests that need the store's unexported parts.
func migratedSQLite(ctx context.Context, t *testing.T) driver.Driver {
	t.Helper()
	e, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "afm.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}
