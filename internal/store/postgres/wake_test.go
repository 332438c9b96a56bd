package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// A change this process commits wakes its waiters once, at its COMMIT's
// answer: the server's notification of it, a round trip later, is its echo
// and wakes nobody again (each wake-up costs the applier, just done with
// the change, a read of the revision and of the newest job). Another
// process's change, notified after it, still wakes them.
func TestOwnChangeWakesOnce(t *testing.T) {
	ctx := t.Context()
	db := testdb.Fresh(t, "AFM_TEST_POSTGRES_URL", "afm_wake_")
	e := countingEngine(t, db.DSN)
	if err := e.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	wake := make(chan struct{}, 16) // counts every signal, none merged
	e.local.WakeInto(ctx, store.DefaultFabric, wake)
	lctx, stop := context.WithCancel(ctx)
	listened := make(chan error, 1)
	go func() { listened <- e.listen(lctx, store.DefaultFabric, wake) }()
	defer func() { stop(); <-listened }()
	woken := func(what string) {
		t.Helper()
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not wake the waiter", what)
		}
	}
	woken("the listener's start")
	s := store.New(e.Engine, store.Rules{PhysicalNetworks: []string{"ib"}})
	vlan := int64(101)
	if _, err := s.RecordNetwork(ctx, store.NetworkChange{Network: store.NetworkSpec{ID: "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73",
		Name: "n", Type: "vlan", PhysicalNetwork: "ib", SegmentationID: &vlan}, Operation: store.OpCreateNetwork,
		CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	woken("this process's change")
	other, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Exec(ctx, "UPDATE state SET revision = revision + 1 WHERE fabric = 'default'"); err != nil {
		t.Fatal(err)
	}
	// Notified after the echo of this process's change, on the same session.
	woken("another process's change")
	select {
	case <-wake:
		t.Fatal("the waiter was woken again: the notification of this process's own change woke it a second time")
	case <-time.After(300 * time.Millisecond):
	}
}
