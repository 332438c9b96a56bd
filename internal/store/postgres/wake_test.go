package postgres

import (
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testdb"
)

// A revision notification wakes the waiters of its fabric, and those of
// every fabric; one that names no fabric wakes every waiter.
func TestNotificationWakesItsFabric(t *testing.T) {
	for _, tc := range []struct {
		payload, fabric string
		want            bool
	}{
		{"default:12", "default", true},
		{"default:12", "storage", false},
		{"storage:3", "storage", true},
		{"storage:3", "", true},
		{"12", "storage", true},
	} {
		if got := forFabric(tc.payload, tc.fabric); got != tc.want {
			t.Errorf("forFabric(%q, %q) = %t, want %t", tc.payload, tc.fabric, got, tc.want)
		}
	}
}

// A change this process commits wakes its own waiters as soon as its COMMIT
// has answered, with its revision, without the server's notification: here
// the listener cannot connect at all (its DSN names a closed port), so only
// the process's own wake-up can come. A waiter of another fabric is not
// woken.
func TestOwnChangeWakesWithoutTheNotification(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_wake_")
	e := countingEngine(t, db.DSN)
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e.dsn = "postgres://afm@127.0.0.1:1/none?connect_timeout=1" // the listener's only
	wake, other := e.WakeFabric(ctx, store.DefaultFabric), e.WakeFabric(ctx, "storage")
	s := store.New(e.Engine, store.Rules{PhysicalNetworks: []string{"ib"}})
	vlan := int64(101)
	job, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73",
		Name: "n", Type: "vlan", PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork,
		CreatedBy: "test", Request: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the change this process committed did not wake its own waiter")
	}
	if rev, ok := s.TakeCommitted(); !ok || rev != job.Revision {
		t.Errorf("TakeCommitted = %d, %t; want the change's revision %d", rev, ok, job.Revision)
	}
	if rev, ok := s.TakeCommitted(); ok {
		t.Errorf("TakeCommitted again = %d; want none: it was taken", rev)
	}
	select {
	case <-other:
		t.Error("another fabric's waiter was woken")
	default:
	}
}
