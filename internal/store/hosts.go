package store

import (
	"context"
	"errors"
	"fmt"
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
