// Package hostmap resolves host names through the map an operator confirmed
// (--confirm-hosts: each host port's GUID under the host name its node
// description gave then), and says where OpenSM's last sweep no longer
// agrees with it.
//
// A node description is set by whoever runs the host, a bare-metal tenant
// included: a name is never resolved through the live description. The live
// one only refuses: a confirmed port that now describes itself as another
// host (Renamed), or a port that names itself after a confirmed host whose
// port it was not confirmed as (Claimed), makes a request naming that host
// fail, so that a tenant renaming its host gets nothing and a host whose
// identity is in doubt changes no partition until an operator looks
// (--confirm-hosts again once the change is checked).
package hostmap

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Kind is what a Mismatch is.
type Kind string

// The kinds of Mismatch.
const (
	// Renamed: a confirmed port's live description names another host.
	Renamed Kind = "renamed"
	// Claimed: a port not confirmed as the host's names itself after it.
	Claimed Kind = "claimed"
)

// Mismatch is a port where OpenSM's last sweep and the confirmed hosts
// disagree, for the confirmed host Host.
type Mismatch struct {
	Kind Kind
	Host string      // the confirmed host the mismatch puts in doubt
	GUID fabric.GUID // the port
	// Description is the port's node description in the sweep; Confirmed
	// the one it was confirmed with (Renamed only).
	Description, Confirmed string
}

// String says what the mismatch is, naming the host and the port.
// Descriptions are quoted: a tenant writes them.
func (m Mismatch) String() string {
	if m.Kind == Renamed {
		return fmt.Sprintf("host %s: its port %s now describes itself as %q (confirmed as %q)",
			m.Host, m.GUID, m.Description, m.Confirmed)
	}
	return fmt.Sprintf("host %s: port %s, not confirmed as %s's, describes itself as %q",
		m.Host, m.GUID, m.Host, m.Description)
}

// Map is the confirmed hosts, by name.
type Map struct {
	ports  map[string][]fabric.GUID
	byGUID map[fabric.GUID]store.ConfirmedHost
}

// New is the map of the confirmed host ports.
func New(confirmed []store.ConfirmedHost) *Map {
	m := &Map{ports: map[string][]fabric.GUID{}, byGUID: map[fabric.GUID]store.ConfirmedHost{}}
	for _, h := range confirmed {
		m.ports[h.Name] = append(m.ports[h.Name], h.GUID)
		m.byGUID[h.GUID] = h
	}
	return m
}

// Empty says whether no host is confirmed.
func (m *Map) Empty() bool { return len(m.byGUID) == 0 }

// Ports returns the confirmed ports of the hosts named, in their order: an
// error naming every host that is not confirmed.
func (m *Map) Ports(names []string) ([]fabric.GUID, error) {
	var out []fabric.GUID
	var unknown []string
	for _, n := range names {
		ports, ok := m.ports[n]
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		out = append(out, ports...)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s not confirmed: --confirm-hosts records the hosts of OpenSM's last sweep, "+
			"and the hosts API names no other", plural(unknown, "host %s is", "hosts %s are"))
	}
	return out, nil
}

// Mismatches are every port of the sweep (live) that disagrees with the
// confirmed hosts, by host and GUID. A confirmed port the sweep does not
// list (its link down) is none: its GUID is still the one confirmed.
func (m *Map) Mismatches(live []topology.NamedPort) []Mismatch {
	var out []Mismatch
	for _, p := range live {
		if h, ok := m.byGUID[p.GUID]; ok && h.Name != p.Name {
			out = append(out, Mismatch{Kind: Renamed, Host: h.Name, GUID: p.GUID, Description: p.Description,
				Confirmed: h.Description})
		}
		if _, named := m.ports[p.Name]; named && m.byGUID[p.GUID].Name != p.Name {
			out = append(out, Mismatch{Kind: Claimed, Host: p.Name, GUID: p.GUID, Description: p.Description})
		}
	}
	slices.SortFunc(out, func(a, b Mismatch) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(a.GUID, b.GUID), strings.Compare(string(a.Kind), string(b.Kind)))
	})
	return out
}

// Check refuses names when the sweep puts any of their hosts in doubt: an
// error naming each mismatch of those hosts.
func (m *Map) Check(names []string, live []topology.NamedPort) error {
	var doubts []string
	for _, mm := range m.Mismatches(live) {
		if slices.Contains(names, mm.Host) {
			doubts = append(doubts, mm.String())
		}
	}
	if len(doubts) > 0 {
		return fmt.Errorf("OpenSM's last sweep disagrees with the confirmed hosts: %s; no host of the request "+
			"changes partition until an operator checks them and runs --confirm-hosts again", strings.Join(doubts, "; "))
	}
	return nil
}

// plural formats names with one (one name) or many.
func plural(names []string, one, many string) string {
	if len(names) == 1 {
		return fmt.Sprintf(one, names[0])
	}
	return fmt.Sprintf(many, strings.Join(names, ", "))
}
