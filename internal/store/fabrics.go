package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

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

// fabricSet is what every view of one database shares: each fabric's view,
// in the configured order (the default fabric first).
type fabricSet struct {
	mu    sync.Mutex
	order []string
	views map[string]*Store
}

// NewFabrics wraps an engine's driver serving several fabrics, the default
// fabric first; it returns the default fabric's view. Fabric(name) returns
// another fabric's.
func NewFabrics(d driver.Driver, fabrics []FabricRules) *Store {
	set := &fabricSet{views: map[string]*Store{}}
	for _, f := range fabrics {
		v := New(d, f.Rules)
		v.fabric, v.fabrics, v.rules.fabric = f.Name, set, f.Name
		set.order = append(set.order, f.Name)
		set.views[f.Name] = v
	}
	return set.views[fabrics[0].Name]
}

// Fabric is the view of fabric name: its revision, snapshot, lock, lease,
// gates, keys, enforcement errors, Kubernetes pkeys and status. nil when the
// store serves no such fabric.
func (s *Store) Fabric(name string) *Store {
	if s.fabrics == nil {
		if name == s.FabricName() {
			return s
		}
		return nil
	}
	s.fabrics.mu.Lock()
	defer s.fabrics.mu.Unlock()
	return s.fabrics.views[name]
}

// FabricName is the fabric this view acts on.
func (s *Store) FabricName() string {
	if s.fabric == "" {
		return DefaultFabric
	}
	return s.fabric
}

// FabricNames are the fabrics the store serves, the default first.
func (s *Store) FabricNames() []string {
	if s.fabrics == nil {
		return []string{s.FabricName()}
	}
	return append([]string(nil), s.fabrics.order...)
}

// EnsureFabrics gives every fabric the store serves its own revision,
// leadership and Kubernetes state rows, once: a fabric's first start writes
// them (the migration gave the default fabric the rows it had), later ones
// find them. Serving several fabrics, it first drops the unique indexes that
// kept the previous release's upserts working (driver.LegacyKeyIndexes): from
// then on, that release must not run on the database.
func (s *Store) EnsureFabrics(ctx context.Context) error {
	if d, ok := s.d.(driver.LegacyKeysDropper); ok && len(s.FabricNames()) > 1 {
		if err := d.DropLegacyKeys(ctx); err != nil {
			return fmt.Errorf("the keys of one fabric: %w", err)
		}
	}
	return s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		for _, name := range s.FabricNames() {
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
	if s.fabrics == nil {
		return s
	}
	s.fabrics.mu.Lock()
	defer s.fabrics.mu.Unlock()
	for _, name := range s.fabrics.order[1:] {
		if slices.Contains(s.fabrics.views[name].rules.PhysicalNetworks, physnet) {
			return s.fabrics.views[name]
		}
	}
	return s.fabrics.views[s.fabrics.order[0]]
}

// view is the view of fabric name, or s when the store serves no such
// fabric (a row of a fabric no longer configured is left to the caller's).
func (s *Store) view(name string) *Store {
	if v := s.Fabric(name); v != nil {
		return v
	}
	return s
}

// errOtherFabric is a change that found its network or port on another
// fabric than the one it was queued on (deleted and recreated on another
// fabric meanwhile): it writes nothing, and runs again on the right one.
var errOtherFabric = errors.New("the object is on another fabric than its change's")

// maxReroutes bounds how often a change follows its object to another
// fabric: each move is a Neutron delete and create between two reads.
const maxReroutes = 3

// routed runs change on the view of the fabric that where names for it,
// again on the new one while the change finds its object moved.
func (s *Store) routed(ctx context.Context, where func(context.Context) (*Store, error), change func(*Store) (Job, error)) (Job, error) {
	for i := 0; ; i++ {
		v, err := where(ctx)
		if err != nil {
			return Job{}, err
		}
		if v.FabricName() == s.FabricName() {
			v = s // the caller's own view, with its rules and clock (WithRules, WithClock)
		}
		j, err := change(v)
		if !errors.Is(err, errOtherFabric) || i == maxReroutes {
			return j, err
		}
	}
}

// networkView is the view of the fabric network id is recorded on; s when it
// is not recorded.
func (s *Store) networkView(ctx context.Context, id string) (*Store, error) {
	if s.fabrics == nil {
		return s, nil
	}
	n, err := s.d.Queries(ctx).GetNetwork(ctx, id)
	switch {
	case driver.IsNoRows(err):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("network %s: read its fabric: %w", id, err)
	}
	return s.view(n.Fabric), nil
}

// portView is the view of the fabric port id is recorded on; s when it is
// not recorded.
func (s *Store) portView(ctx context.Context, id string) (*Store, error) {
	if s.fabrics == nil {
		return s, nil
	}
	p, err := s.d.Queries(ctx).GetPort(ctx, id)
	switch {
	case driver.IsNoRows(err):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("port %s: read its fabric: %w", id, err)
	}
	return s.view(p.Fabric), nil
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
	if fab == "" || fab == to || s.Fabric(fab) == nil {
		return nil
	}
	return &PhysnetMovedError{NetworkID: n.ID, Physnet: n.PhysicalNetwork, Recorded: fab, Configured: to}
}

// FabricOfPhysnet is the fabric a network on physnet is recorded on now:
// the one whose physical networks list it, else the default fabric.
func (s *Store) FabricOfPhysnet(physnet string) string {
	return s.fabricOfPhysnet(physnet).FabricName()
}
