package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// PortLimit keeps host ports below their switch ports' pkey table capacity when
// a port is sent, so that OpenSM never silently stops enforcing partitions on a
// switch port (see capacityReached). The dump is re-read when it changes: OpenSM
// rewrites it at every SUBNET UP. It is safe for concurrent use.
type PortLimit struct {
	DumpFile string // OpenSM's opensm-subnet.lst, read through Dump when that is set
	// Dump is the shared reader of DumpFile (the applier's gates read it
	// too); nil: one of its own.
	Dump     *Dump
	Capacity int // [opensm] switch_pkey_capacity
	// Static returns the pkeys a host port carries whatever its network: the
	// default partition's and those of the template's static partitions that
	// list it. nil: the default partition only.
	Static func(fabric.GUID) []fabric.PKey

	mu       sync.Mutex
	topology *Topology // the last dump read whole
}

// Check returns, as refusal, why host port guid may not become a member of
// partitions (a network's one, or the Kubernetes pkeys it would be in): it
// is a switch's GUID (the refusal names the switch), or the port would reach its
// switch port's capacity (the refusal names the host port, its switch port and
// the numbers). err is a failure to stat the dump.
//
// A port the dump does not place (its link is down, it is not cabled yet, or
// it is a virtual port, which the dump never lists) is checked too: OpenSM
// gives it its pkeys at the sweep that finds it, with no apply of the manager
// in between, so what is accepted now must fit wherever it lands. A switch
// port faces one host port, so the port's own pkeys are what its switch port
// holds; the check is the same as for a placed port, against the switch port
// it will be behind, whichever that is. So it is without a dump, or while none
// was read whole.
func (l *PortLimit) Check(guid fabric.GUID, partitions ...fabric.PKey) (refusal string, err error) {
	check, err := l.Checker()
	if err != nil {
		return "", err
	}
	return check(guid, partitions...), nil
}

// Checker reads the dump as it is now and returns Check on it, which does no
// I/O: a change transaction calls it while it holds the revision's lock.
func (l *PortLimit) Checker() (func(guid fabric.GUID, partitions ...fabric.PKey) (refusal string), error) {
	t, err := l.current()
	if err != nil {
		return nil, err
	}
	return func(guid fabric.GUID, partitions ...fabric.PKey) string { return l.check(t, guid, partitions) }, nil
}

func (l *PortLimit) check(t *Topology, guid fabric.GUID, partitions []fabric.PKey) (refusal string) {
	if t != nil {
		if sw, ok := t.switches[guid]; ok {
			// A switch's port GUID is its node GUID (port 0, its management
			// port): a member there would let a tenant's partition reach the
			// switch itself.
			return fmt.Sprintf("GUID %s is switch %s's (%q in OpenSM's subnet dump), not a host port's: "+
				"a switch is never a partition's member", guid, sw.GUID, sw.Description)
		}
	}
	pkeys := slices.Clone(partitions)
	if l.Static != nil {
		pkeys = append(pkeys, l.Static(guid)...)
	}
	n := countPKeys(pkeys)
	if n < l.Capacity {
		return ""
	}
	at := "the switch port it is linked to, wherever that is (it is not on the fabric now: its link is down, " +
		"or it is a virtual port)"
	if t != nil {
		if sw, placed := t.behind[guid]; placed {
			at = "switch port " + sw.String()
		}
	}
	return fmt.Sprintf("host port %s would carry %d pkeys (the default partition, its network's or "+
		"Kubernetes pkeys, and the template's that list it), reaching the %d-entry pkey table of %s "+
		"([opensm] switch_pkey_capacity), where OpenSM would stop enforcing partitions without a word; "+
		"at most %d are allowed", guid, n, l.Capacity, at, l.Capacity-1)
}

// Room returns how many pkeys host port guid may carry besides the default
// partition's and the template's static ones, wherever it is linked: capacity
// - 1 less those. The applier leaves out of the file the Kubernetes pkeys
// past it (the latest given first), so that a port that appears later (a
// link that comes up, a virtual port) never fills its switch port's table.
func (l *PortLimit) Room(guid fabric.GUID) int {
	held := []fabric.PKey{fabric.DefaultPKey & 0x7fff}
	if l.Static != nil {
		held = appendDistinct(held, l.Static(guid))
	}
	return max(0, l.Capacity-1-len(held))
}

// Reached returns the host ports that reach their switch port's capacity as
// members of the partitions given, by host port GUID, with the static ones
// added: ports already over it (after a topology or template change) that the
// manager must treat as no longer isolated.
func (l *PortLimit) Reached(partitions map[fabric.GUID][]fabric.PKey) ([]Reached, error) {
	t, err := l.current()
	return l.reached(t, err, partitions)
}

// ReachedIn is Reached on the dump as its caller has just read it: t and
// loadErr are what Load of this limit's Dump (or of another reader of the
// same file) returned. The applier reads the dump once per apply, for this
// check and for the gates' switches alike, so that both judge the same
// content; reading it for each would compare the 1 MB file with the last
// content twice, since an apply reads it just after OpenSM rewrote it.
func (l *PortLimit) ReachedIn(t *Topology, loadErr error, partitions map[fabric.GUID][]fabric.PKey) ([]Reached, error) {
	l.mu.Lock()
	t, err := l.use(t, loadErr)
	l.mu.Unlock()
	return l.reached(t, err, partitions)
}

func (l *PortLimit) reached(t *Topology, err error, partitions map[fabric.GUID][]fabric.PKey) ([]Reached, error) {
	if err != nil || t == nil {
		return nil, err
	}
	return t.capacityReached(partitions, l.Static, l.Capacity), nil
}

// current returns the topology of the dump as it is now; nil when there is none.
func (l *PortLimit) current() (*Topology, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Dump == nil {
		l.Dump = NewDump(l.DumpFile)
	}
	return l.use(l.Dump.Load())
}

// use returns the topology to check against, given what a read of the dump
// returned; l.mu is held.
func (l *PortLimit) use(t *Topology, err error) (*Topology, error) {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		l.topology = nil
		return nil, nil
	case errors.As(err, &pe):
		return nil, fmt.Errorf("OpenSM's subnet dump: %w", err)
	case err != nil:
		// OpenSM rewrites the dump in place at every SUBNET UP, so a read can
		// catch it half written: go on with the last dump read whole (nil
		// before the first), and read it again next time.
		return l.topology, nil
	}
	l.topology = t
	return t, nil
}
