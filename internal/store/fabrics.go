package store

import (
	"sync"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// DefaultFabric is the default fabric's name ([opensm], [opensm_conf] and
// [ufm_pkeys]): the fabric of every row an existing database holds.
const DefaultFabric = "default"

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
//
// TODO(fabrics, step 4): the stub gives each fabric a view of its own, but
// the queries do not yet filter by fabric.
func NewFabrics(d driver.Driver, fabrics []FabricRules) *Store {
	set := &fabricSet{views: map[string]*Store{}}
	for _, f := range fabrics {
		v := New(d, f.Rules)
		v.fabric, v.fabrics = f.Name, set
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
