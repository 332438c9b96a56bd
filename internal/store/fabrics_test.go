package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// A change is queued on the fabric its object was on when it was read; if
// the object is on another fabric by the time the change runs (its network
// deleted and created again there in between), the change writes nothing on
// the fabric it was queued on and says so (errOtherFabric), so that the
// database's routing runs it again on the right one. Each case calls the default
// fabric's change directly for an object of the storage fabric: the window
// between the routing's read and the change, held open.
func TestChangeOfAnObjectOnAnotherFabricWritesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	db, port := storagePort(ctx, t, migratedSQLite(ctx, t))
	s, net := db.Fabric(DefaultFabric), port.NetworkID
	changes := map[string]func() (Job, error){
		"RemovePort": func() (Job, error) {
			return s.removePort(ctx, PortRemoval{PortID: "p1", CreatedBy: "test", Request: "{}"})
		},
		"RecordPort": func() (Job, error) {
			return s.recordPortChange(ctx, PortChange{Port: port, DeviceOwner: "compute:nova", Operation: OpUpdatePort,
				CreatedBy: "test", Request: "{}"})
		},
		"RemoveNetwork": func() (Job, error) {
			return s.removeNetwork(ctx, NetworkRemoval{NetworkID: net, CreatedBy: "test", Request: "{}"})
		},
	}
	for name, change := range changes {
		if _, err := change(); !errors.Is(err, errOtherFabric) {
			t.Errorf("%s on the default fabric of the storage fabric's object = %v, want errOtherFabric", name, err)
		}
	}
	if rev, err := s.Revision(ctx); err != nil || rev != 0 {
		t.Errorf("default revision = %d, %v; want 0: nothing written there", rev, err)
	}
	var c SnapshotCache
	snap, err := db.Fabric("storage").ReadSnapshot(ctx, &c)
	if err != nil || len(snap.Networks) != 1 || len(snap.Members) != 1 {
		t.Errorf("storage snapshot = %+v, %v; want the network and its port, untouched", snap, err)
	}
}

// A network goes to the fabric whose physical networks list its physnet,
// else to the default fabric, which gives it a partition only when its
// physical networks list it or are "*" (the default of [api]
// physical_networks): one fabric's configuration serves every physnet.
func TestPhysnetRouting(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e := migratedSQLite(ctx, t)
	two := NewDB(e, []FabricRules{
		{Name: DefaultFabric, Rules: Rules{PhysicalNetworks: []string{"ibnet", "ibnet-2"}}},
		{Name: "storage", Rules: Rules{PhysicalNetworks: []string{"storage"}}},
	})
	one := NewDB(e, []FabricRules{{Name: DefaultFabric, Rules: Rules{PhysicalNetworks: []string{"*"}}}})
	for _, tc := range []struct {
		s         *Store
		physnet   string
		fabric    string
		partition bool
	}{
		{two.Fabric(DefaultFabric), "ibnet-2", DefaultFabric, true}, {two.Fabric(DefaultFabric), "storage", "storage", true},
		{two.Fabric(DefaultFabric), "elsewhere", DefaultFabric, false},
		{two.Fabric("storage"), "ibnet", DefaultFabric, true}, {one.Fabric(DefaultFabric), "anything", DefaultFabric, true},
	} {
		v := tc.s.fabricOfPhysnet(tc.physnet)
		if got := tc.s.db.FabricOfPhysnet(tc.physnet); got != tc.fabric || v.FabricName() != tc.fabric {
			t.Errorf("physnet %q routed to %q (view %q), want %q", tc.physnet, got, v.FabricName(), tc.fabric)
		}
		if got := v.rules.managesPhysnet(tc.physnet); got != tc.partition {
			t.Errorf("physnet %q: a partition on fabric %s = %v, want %v", tc.physnet, tc.fabric, got, tc.partition)
		}
	}
}

// A database serves its fabrics by name, the default first, each through a
// view that knows its database; a store of one fabric (New) is the default
// fabric's view of a database of its own. A Neutron change given to the
// database, as the API gives it, is recorded on the fabric of its physnet.
func TestDBAndItsViews(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e := migratedSQLite(ctx, t)
	two := NewDB(e, []FabricRules{
		{Name: DefaultFabric, Rules: Rules{PhysicalNetworks: []string{"ibnet"}}},
		{Name: "storage", Rules: Rules{PhysicalNetworks: []string{"storage"}}},
	})
	if err := two.EnsureFabrics(ctx); err != nil {
		t.Fatal(err)
	}
	one := New(e, Rules{})
	for _, tc := range []struct {
		name  string
		db    *DB
		names []string
	}{
		{"two fabrics", two, []string{DefaultFabric, "storage"}},
		{"one fabric", one.DB(), []string{DefaultFabric}},
	} {
		if got := tc.db.FabricNames(); !slices.Equal(got, tc.names) {
			t.Errorf("%s: FabricNames = %v, want %v", tc.name, got, tc.names)
		}
		for _, name := range tc.names {
			if v := tc.db.Fabric(name); v == nil || v.FabricName() != name || v.DB() != tc.db {
				t.Errorf("%s: Fabric(%q) = %v, want its view of the database", tc.name, name, v)
			}
		}
		if v := tc.db.Fabric("elsewhere"); v != nil {
			t.Errorf("%s: Fabric(elsewhere) = %v, want nil", tc.name, v)
		}
	}
	if one.DB().Fabric(DefaultFabric) != one {
		t.Error("a store of one fabric is not its database's view")
	}
	vlan := int64(100)
	if _, err := two.RecordNetwork(ctx, NetworkChange{Network: NetworkSpec{ID: "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73",
		Name: "n", Type: "vlan", PhysicalNetwork: "storage", SegmentationID: &vlan}, Operation: OpCreateNetwork,
		CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{DefaultFabric: 0, "storage": 1} {
		if rev, err := two.Fabric(name).Revision(ctx); err != nil || rev != want {
			t.Errorf("fabric %s: revision %d, %v; want %d", name, rev, err, want)
		}
	}
}

// The database's routing follows a change whose object moved to another
// fabric between the routing's read and the change (errOtherFabric), at most
// maxReroutes times, and gives up at once on any other error: a cancelled
// context is not followed, and writes nothing.
func TestDBRoutingFollowsAMovedObject(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	db, _ := storagePort(ctx, t, migratedSQLite(ctx, t))
	removal := PortRemoval{PortID: "p1", CreatedBy: "test", Request: "{}"}

	// Always the stale fabric: tried maxReroutes+1 times, then refused.
	var tries int
	_, err := db.routed(ctx, func(context.Context) (*Store, error) { tries++; return db.defaultView(), nil },
		func(v *Store) (Job, error) { return v.removePort(ctx, removal) })
	if !errors.Is(err, errOtherFabric) || tries != maxReroutes+1 {
		t.Errorf("a change always sent to the stale fabric = %v after %d tries, want errOtherFabric after %d",
			err, tries, maxReroutes+1)
	}

	// A cancelled context: one try, its error, nothing written.
	cancelled, stop := context.WithCancel(ctx)
	stop()
	tries = 0
	_, err = db.routed(cancelled, func(context.Context) (*Store, error) { tries++; return db.Fabric("storage"), nil },
		func(v *Store) (Job, error) { return v.removePort(cancelled, removal) })
	if !errors.Is(err, context.Canceled) || tries != 1 {
		t.Errorf("a change with a cancelled context = %v after %d tries, want context.Canceled after 1", err, tries)
	}
	for name, want := range map[string]int64{DefaultFabric: 0, "storage": 2} {
		if rev, err := db.Fabric(name).Revision(ctx); err != nil || rev != want {
			t.Errorf("fabric %s: revision %d, %v; want %d: nothing written by the refused changes", name, rev, err, want)
		}
	}

	// Stale once, then its fabric: the change runs again there.
	tries = 0
	j, err := db.routed(ctx, func(ctx context.Context) (*Store, error) {
		tries++
		if tries == 1 {
			return db.defaultView(), nil
		}
		v, _, err := db.recordedView(ctx, ObjectPort, removal.PortID)
		return v, err
	}, func(v *Store) (Job, error) { return v.removePort(ctx, removal) })
	if err != nil || j.Fabric != "storage" || tries != 2 {
		t.Errorf("a change sent once to the stale fabric = %+v, %v after %d tries; want the storage fabric's job after 2", j, err, tries)
	}
}

// A database that serves one fabric routes by reading nothing: every object
// is its view's. One recorded on a fabric no longer configured (the storage
// fabric, dropped from the configuration) is refused by that view, writing
// nothing, as when the routing read where it was recorded.
func TestOneFabricRefusesAnObjectOfAnUnconfiguredFabric(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e := migratedSQLite(ctx, t)
	two, port := storagePort(ctx, t, e)
	net := port.NetworkID
	one := NewDB(e, []FabricRules{{Name: DefaultFabric, Rules: Rules{PhysicalNetworks: []string{"ibnet"}}}})
	for name, change := range map[string]func() (Job, error){
		"RecordPort": func() (Job, error) {
			return one.RecordPort(ctx, PortChange{Port: port, DeviceOwner: "compute:nova", Operation: OpUpdatePort,
				CreatedBy: "test", Request: "{}"})
		},
		"RemovePort": func() (Job, error) {
			return one.RemovePort(ctx, PortRemoval{PortID: "p1", CreatedBy: "test", Request: "{}"})
		},
		"RemoveNetwork": func() (Job, error) {
			return one.RemoveNetwork(ctx, NetworkRemoval{NetworkID: net, CreatedBy: "test", Request: "{}"})
		},
	} {
		var other *OtherFabricError
		if _, err := change(); !errors.As(err, &other) || other.Fabric != "storage" || other.View != DefaultFabric {
			t.Errorf("%s of the storage fabric's object on a database of the default fabric alone = %v; "+
				"want the default view's refusal naming the storage fabric", name, err)
		}
	}
	if rev, err := one.Fabric(DefaultFabric).Revision(ctx); err != nil || rev != 0 {
		t.Errorf("default revision = %d, %v; want 0: nothing written there", rev, err)
	}
	var c SnapshotCache
	snap, err := two.Fabric("storage").ReadSnapshot(ctx, &c)
	if err != nil || len(snap.Networks) != 1 || len(snap.Members) != 1 {
		t.Errorf("storage snapshot = %+v, %v; want the network and its port, untouched", snap, err)
	}
}

// storagePort is a database of two fabrics on e, the default and the
// storage fabric, with a network of the storage fabric's physnet and port
// p1 bound to it with a GUID: objects of the storage fabric, for the
// default fabric's view to refuse.
func storagePort(ctx context.Context, t *testing.T, e driver.Driver) (*DB, Port) {
	t.Helper()
	db := NewDB(e, []FabricRules{
		{Name: DefaultFabric, Rules: Rules{PhysicalNetworks: []string{"ibnet"}}},
		{Name: "storage", Rules: Rules{PhysicalNetworks: []string{"storage"}}},
	})
	if err := db.EnsureFabrics(ctx); err != nil {
		t.Fatal(err)
	}
	vlan, g := int64(100), fabric.GUID(0x248a070300b1c2d4)
	const net = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	if _, err := db.RecordNetwork(ctx, NetworkChange{Network: NetworkSpec{ID: net, Name: "n", Type: "vlan",
		PhysicalNetwork: "storage", SegmentationID: &vlan}, Operation: OpCreateNetwork, CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	port := Port{ID: "p1", NetworkID: net, GUID: &g, Host: "h1"}
	if _, err := db.RecordPort(ctx, PortChange{Port: port, DeviceOwner: "compute:nova", Operation: OpAddPort,
		CreatedBy: "test", Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	return db, port
}
