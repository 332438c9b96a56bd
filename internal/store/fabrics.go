package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// DefaultFabric is the default fabric's name ([opensm], [opensm_conf] and
// [ufm_pkeys]): the fabric of every row an existing database holds.
const DefaultFabric = driver.DefaultFabric

// FabricRules is one fabric's name and the rules its requests are recorded by.
// Rules.PhysicalNetworks are the physical networks the fabric serves.
type FabricRules struct {
	Name  string
	Rules Rules
}

// DB is the shared database: its connections and schema, and the fabrics
// it serves, each through a view of its own (Store) that acts on that
// fabric's rows only. What reaches every fabric goes through the DB: a
// fabric's view by name, each fabric's state rows, the routing of a Neutron
// change to the fabric of its physical network.
type DB struct {
	d driver.Driver
	// order are the fabrics' names, the default first, and views each one's
	// view: both set once, by NewDB or New, and only read after.
	order []string
	views map[string]*Store
	// routes is set when the database serves its fabrics by name (NewDB): a
	// change is routed to the fabric of its object, and a view waits for
	// its own fabric's wake-ups. A store of one fabric (New) routes
	// nothing: its view acts on every change it is given.
	routes bool
}

// NewDB wraps an engine's driver serving several fabrics, the default fabric
// first: Fabric(name) is each one's view.
func NewDB(d driver.Driver, fabrics []FabricRules) *DB {
	db := &DB{d: d, views: map[string]*Store{}, routes: true}
	for _, f := range fabrics {
		v := newView(d, f.Rules)
		v.fabric, v.db, v.rules.fabric = f.Name, db, f.Name
		db.order = append(db.order, f.Name)
		db.views[f.Name] = v
	}
	return db
}

// Name is the engine's name: "postgres", "mysql" or "sqlite".
func (db *DB) Name() string { return db.d.Name() }

// Close closes the engine's connections.
func (db *DB) Close() error { return db.d.Close() }

// Migrate applies the engine's embedded migrations.
func (db *DB) Migrate(ctx context.Context) error { return db.d.Migrate(ctx) }

// Fabric is the view of fabric name: its revision, snapshot, lock, lease,
// gates, keys, enforcement errors, Kubernetes pkeys and status. nil when the
// database serves no such fabric.
func (db *DB) Fabric(name string) *Store { return db.views[name] }

// FabricNames are the fabrics the database serves, the default first.
func (db *DB) FabricNames() []string { return append([]string(nil), db.order...) }

// defaultView is the default fabric's view: where a Neutron change starts
// before it is routed to its fabric.
func (db *DB) defaultView() *Store { return db.views[db.order[0]] }

// fabricView is the view of fabric name; nil when the database serves no
// such fabric. A store of one fabric is its own view (WithRules, WithClock).
func (s *Store) fabricView(name string) *Store {
	if !s.db.routes {
		if name == s.FabricName() {
			return s
		}
		return nil
	}
	return s.db.Fabric(name)
}

// FabricName is the fabric this view acts on.
func (s *Store) FabricName() string {
	if s.fabric == "" {
		return DefaultFabric
	}
	return s.fabric
}

// EnsureFabrics gives every fabric the database serves its own revision,
// leadership and Kubernetes state rows, once: a fabric's first start writes
// them (the migration gave the default fabric the rows it had), later ones
// find them. Serving several fabrics, it first drops the unique indexes that
// kept the previous release's upserts working (driver.LegacyKeyIndexes): from
// then on, that release must not run on the database.
func (db *DB) EnsureFabrics(ctx context.Context) error {
	if d, ok := db.d.(driver.LegacyKeysDropper); ok && len(db.order) > 1 {
		if err := d.DropLegacyKeys(ctx); err != nil {
			return fmt.Errorf("the keys of one fabric: %w", err)
		}
	}
	return db.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		for _, name := range db.order {
			for _, insert := range []func(context.Context, string) error{
				q.InsertFabricState, q.InsertFabricLeadership, q.InsertFabricKubernetesState,
			} {
				if err := insert(ctx, name); err != nil {
					return fmt.Errorf("fabric %s: its state rows: %w", name, err)
				}
			}
		}
		return nil
	})
}

// fabricOfPhysnet is the view that serves a network on physnet: the fabric
// whose physical networks list it, else the default fabric (which records it
// without a partition unless its rules take every physnet). s itself when it
// serves one fabric.
func (s *Store) fabricOfPhysnet(physnet string) *Store {
	if !s.db.routes {
		return s
	}
	return s.db.fabricOfPhysnet(physnet)
}

// fabricOfPhysnet is the view of the fabric whose physical networks list
// physnet, else the default fabric's.
func (db *DB) fabricOfPhysnet(physnet string) *Store {
	for _, name := range db.order[1:] {
		if slices.Contains(db.views[name].rules.PhysicalNetworks, physnet) {
			return db.views[name]
		}
	}
	return db.defaultView()
}

// view is the view of fabric name, or s when the store serves no such
// fabric (a row of a fabric no longer configured is left to the caller's).
func (s *Store) view(name string) *Store {
	if v := s.fabricView(name); v != nil {
		return v
	}
	return s
}

// OtherFabricError is a Neutron change given to the view of fabric View
// whose network or port is fabric Fabric's: a view records on its own
// fabric only, and writes nothing of it. The DB's methods route each
// change to its fabric; one whose object moved to another fabric between
// the routing and its transaction (deleted and created again there) runs
// again on that fabric.
type OtherFabricError struct {
	Object, ID   string // ObjectNetwork or ObjectPort, and its id
	Fabric, View string
}

func (e *OtherFabricError) Error() string {
	return fmt.Sprintf("%s %s is fabric %s's, not fabric %s's: the view of fabric %s records only its own fabric's changes "+
		"(the database's methods route a change to its fabric)", e.Object, e.ID, e.Fabric, e.View, e.View)
}

// Is makes every OtherFabricError errOtherFabric, the one the routing follows.
func (e *OtherFabricError) Is(target error) bool { return target == errOtherFabric }

// errOtherFabric is a change that found its network or port on another
// fabric than the view's it was given to (OtherFabricError).
var errOtherFabric = errors.New("the object is on another fabric than its change's")

// otherFabric refuses, in tx, a change of object id recorded on fabric fab.
func otherFabric(tx *changeTx, object, id, fab string) error {
	return &OtherFabricError{Object: object, ID: id, Fabric: fab, View: tx.fabric}
}

// ownFabric refuses a change given to s whose object is served by v.
func (s *Store) ownFabric(v *Store, object, id string) error {
	if v.FabricName() == s.FabricName() {
		return nil
	}
	return &OtherFabricError{Object: object, ID: id, Fabric: v.FabricName(), View: s.FabricName()}
}

// maxReroutes bounds how often a change follows its object to another
// fabric: each move is a Neutron delete and create between two reads.
const maxReroutes = 3

// routed runs change on the view of the fabric that where names for it,
// again on the new one while the change finds its object moved.
func (db *DB) routed(ctx context.Context, where func(context.Context) (*Store, error), change func(*Store) (Job, error)) (Job, error) {
	for i := 0; ; i++ {
		v, err := where(ctx)
		if err != nil {
			return Job{}, err
		}
		j, err := change(v)
		if !errors.Is(err, errOtherFabric) || i == maxReroutes {
			return j, err
		}
	}
}

// recordedView is the view of the fabric a network (object ObjectNetwork)
// or port id is recorded on: the default view when it is not recorded, or
// recorded on a fabric no longer configured, and the only view of a
// database of one fabric, which reads nothing. recorded says it was found.
//
// A database that serves one fabric reads nothing either: every object is
// then the default view's, wherever it is recorded (an object of a fabric
// no longer configured is that view's to refuse, OtherFabricError), and the
// read was a round trip of its own before every Neutron change.
func (db *DB) recordedView(ctx context.Context, object, id string) (v *Store, recorded bool, err error) {
	if !db.routes || len(db.order) == 1 {
		return db.defaultView(), false, nil
	}
	var fab string
	q := db.d.Queries(ctx)
	if object == ObjectNetwork {
		var n driver.Network
		n, err = q.GetNetwork(ctx, id)
		fab = n.Fabric
	} else {
		var p driver.Port
		p, err = q.GetPort(ctx, id)
		fab = p.Fabric
	}
	switch {
	case driver.IsNoRows(err):
		return db.defaultView(), false, nil
	case err != nil:
		return nil, false, fmt.Errorf("%s %s: read its fabric: %w", object, id, err)
	}
	return db.defaultView().view(fab), true, nil
}

// PhysnetMovedError is a change of a network, or of one of its ports,
// recorded on fabric Recorded while the configuration now gives its physical
// network to fabric Configured: an operator moved the physnet to another
// fabric after its networks were recorded. Recorded on the old fabric the
// change would be applied to the wrong subnet, or to none; it is refused,
// nothing is written, and it can be sent again once --move-physnet has
// moved the networks (the API answers 409).
type PhysnetMovedError struct {
	NetworkID, Physnet, Recorded, Configured string
}

func (e *PhysnetMovedError) Error() string {
	return fmt.Sprintf("network %s is recorded on fabric %s, but its physical network %q is now configured for fabric %s: "+
		"its changes are refused until an operator moves the physical network's networks with "+
		"`alternative-fabric-manager --move-physnet %s` (docs/multi-fabric.md)",
		e.NetworkID, e.Recorded, e.Physnet, e.Configured, e.Physnet)
}

// physnetMoved refuses a change of network n, recorded on fabric fab, whose
// physical network the configuration now gives another fabric. A network
// of a fabric no longer configured is left to the routing (view).
func (s *Store) physnetMoved(n Network, fab string) error {
	to := s.fabricOfPhysnet(n.PhysicalNetwork).FabricName()
	if fab == "" || fab == to || s.fabricView(fab) == nil {
		return nil
	}
	return &PhysnetMovedError{NetworkID: n.ID, Physnet: n.PhysicalNetwork, Recorded: fab, Configured: to}
}

// FabricOfPhysnet is the fabric a network on physnet is recorded on now:
// the one whose physical networks list it, else the default fabric.
func (db *DB) FabricOfPhysnet(physnet string) string {
	return db.defaultView().fabricOfPhysnet(physnet).FabricName()
}

// RecordNetwork records a Neutron network change on the fabric of its
// physical network.
func (db *DB) RecordNetwork(ctx context.Context, c NetworkChange) (Job, error) {
	return db.fabricOfPhysnet(c.Network.PhysicalNetwork).recordNetwork(ctx, c)
}

// RemoveNetwork records a network's deletion on the fabric it is recorded on,
// following it to the fabric it was created again on meanwhile.
func (db *DB) RemoveNetwork(ctx context.Context, r NetworkRemoval) (Job, error) {
	return db.routed(ctx, func(ctx context.Context) (*Store, error) {
		v, _, err := db.recordedView(ctx, ObjectNetwork, r.NetworkID)
		return v, err
	}, func(v *Store) (Job, error) { return v.removeNetwork(ctx, r) })
}

// RecordPort records a Neutron port change on the fabric of its network: the
// one it is recorded on, else the one of the physical network of the network
// the port embeds.
func (db *DB) RecordPort(ctx context.Context, c PortChange) (Job, error) {
	return db.routed(ctx, func(ctx context.Context) (*Store, error) {
		v, recorded, err := db.recordedView(ctx, ObjectNetwork, c.Port.NetworkID)
		if !recorded && err == nil && c.Network != nil {
			v = db.fabricOfPhysnet(c.Network.PhysicalNetwork)
		}
		return v, err
	}, func(v *Store) (Job, error) { return v.recordPortChange(ctx, c) })
}

// RemovePort records a port's deletion on the fabric it is recorded on.
func (db *DB) RemovePort(ctx context.Context, r PortRemoval) (Job, error) {
	return db.routed(ctx, func(ctx context.Context) (*Store, error) {
		v, _, err := db.recordedView(ctx, ObjectPort, r.PortID)
		return v, err
	}, func(v *Store) (Job, error) { return v.removePort(ctx, r) })
}

// GetJob returns job id, of whichever fabric (Store.GetJob).
func (db *DB) GetJob(ctx context.Context, id int64) (Job, error) {
	return db.defaultView().GetJob(ctx, id)
}

// MovePhysnet moves the networks of a physical network to the fabric the
// configuration now gives it (physnetmove.go).
func (db *DB) MovePhysnet(ctx context.Context, m PhysnetMove) (PhysnetMoveOutcome, error) {
	return db.fabricOfPhysnet(m.Physnet).movePhysnet(ctx, m)
}
