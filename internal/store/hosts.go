package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// The hosts an operator confirmed (confirmed_hosts): each host port's GUID
// with the host name its node description gave when it was confirmed. UFM's
// hosts API resolves host names through them alone, since a node description
// is set by whoever runs the host.

// ConfirmedHost is one port of a host an operator confirmed.
type ConfirmedHost struct {
	GUID        fabric.GUID // the port's GUID
	Name        string      // the host's name: the first word of its node description
	Description string      // the node description when it was confirmed
	ConfirmedAt time.Time
}

// maxHostName is the longest host name recorded: a DNS label's.
const maxHostName = 63

// CheckHostName says whether name can be a confirmed host's name: 1 to 63
// letters, digits, '-', '_' or '.', what a Slurm node name is made of (a
// hostlist's brackets and commas never are).
func CheckHostName(name string) error {
	if name == "" || len(name) > maxHostName {
		return fmt.Errorf("host name %q: want 1 to %d characters", name, maxHostName)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("host name %q: want only letters, digits, '-', '_' or '.'", name)
		}
	}
	return nil
}

// ConfirmHosts records hosts as the fabric's whole set of host ports,
// replacing the previous set in one transaction. Each port is given once;
// an empty set is refused (OpenSM has not swept a host yet). Not fenced, as
// ConfirmSwitches: it is an operator's command.
func (s *Store) ConfirmHosts(ctx context.Context, hosts []ConfirmedHost) error {
	if len(hosts) == 0 {
		return errors.New("confirm hosts: no host given: OpenSM has not swept a fabric with hosts yet")
	}
	seen := make(map[fabric.GUID]bool, len(hosts))
	for _, h := range hosts {
		switch {
		case h.GUID == 0:
			return fmt.Errorf("confirm hosts: host %q: port GUID %s: want a non-zero GUID", h.Name, h.GUID)
		case seen[h.GUID]:
			return fmt.Errorf("confirm hosts: port %s is given twice", h.GUID)
		case !utf8.ValidString(h.Description) || len(h.Description) > 255:
			return fmt.Errorf("confirm hosts: port %s: description %q: want at most 255 bytes of UTF-8",
				h.GUID, h.Description)
		}
		if err := CheckHostName(h.Name); err != nil {
			return fmt.Errorf("confirm hosts: port %s: %w", h.GUID, err)
		}
		seen[h.GUID] = true
	}
	now := s.now()
	err := s.d.InTx(ctx, driver.Write, func(q driver.Queries) error {
		if err := q.DeleteConfirmedHosts(ctx, s.FabricName()); err != nil {
			return err
		}
		for _, h := range hosts {
			if err := q.InsertConfirmedHost(ctx, driver.InsertConfirmedHostParams{Fabric: s.FabricName(),
				GUID: h.GUID, Name: h.Name, Description: h.Description, Now: now}); err != nil {
				return fmt.Errorf("host %q port %s: %w", h.Name, h.GUID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("confirm hosts: %w", err)
	}
	return nil
}

// ConfirmedHosts returns the confirmed host ports, by host name and GUID.
func (s *Store) ConfirmedHosts(ctx context.Context) ([]ConfirmedHost, error) {
	return readRows(ctx, "confirmed hosts", s.FabricName(), s.d.Queries(ctx).ConfirmedHosts,
		func(r driver.ConfirmedHostsRow) ConfirmedHost {
			return ConfirmedHost{GUID: r.Guid, Name: r.Name, Description: r.Description, ConfirmedAt: r.ConfirmedAt.UTC()}
		})
}

// HostCheck says why a port bound to host may not name guid ("" when it may).
type HostCheck func(host string, guid fabric.GUID) (refusal string)

// hostCheck reads the confirmed hosts once for a change and returns the
// check of Rules.CheckHost ([api] check_host): a GUID that is a confirmed
// host's port is named only by a port bound to that host. nil when the
// check is off.
//
// A GUID no confirmed host has is not refused: a VM's port names a virtual
// GUID that no sweep lists as a host's, and a host added since the last
// --confirm-hosts would fail to boot until an operator confirmed it. The
// check protects the confirmed hosts' own ports (an idle host's, a bare-metal
// tenant's); docs/security.md says to confirm hosts as they are added.
func (s *Store) hostCheck(ctx context.Context) (HostCheck, error) {
	if !s.rules.CheckHost {
		return nil, nil
	}
	hosts, err := s.ConfirmedHosts(ctx)
	if err != nil {
		return nil, orGaveUp(ctx, err)
	}
	owner := make(map[fabric.GUID]string, len(hosts))
	for _, h := range hosts {
		owner[h.GUID] = h.Name
	}
	return func(host string, guid fabric.GUID) string {
		name, confirmed := owner[guid]
		if !confirmed || SameHost(name, host) {
			return ""
		}
		// The confirmed host's name is not given: it may be another
		// tenant's bare-metal host.
		return fmt.Sprintf("GUID %s is the port of a confirmed host other than the port's binding:host_id %q: "+
			"with [api] check_host a port names only a GUID of the host it is bound to "+
			"(the hosts --confirm-hosts recorded)", guid, host)
	}, nil
}

// SameHost says whether a confirmed host's name and a port's binding:host_id
// name the same host: Nova binds a port to the compute host's name, an FQDN
// or a short name, while a node description usually starts with the short
// host name, so both compare up to their first dot, without case.
func SameHost(confirmed, bound string) bool {
	short := func(s string) string {
		if i := strings.IndexByte(s, '.'); i >= 0 {
			return s[:i]
		}
		return s
	}
	return strings.EqualFold(short(confirmed), short(bound))
}
