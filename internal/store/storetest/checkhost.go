package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// [api] check_host: a port naming a confirmed host's GUID while bound to
// another host is refused.
func init() {
	fabricTests = append(fabricTests,
		storeTest{"CheckHostRefusesAnotherConfirmedHostsGUID", testCheckHostRefused},
		storeTest{"CheckHostAcceptsThePortsOwnHost", testCheckHostAccepted},
		storeTest{"CheckHostOffAcceptsTheSquat", testCheckHostOff},
		storeTest{"CheckHostCancelledChangeWritesNothing", testCheckHostCancelled},
		storeTest{"CheckHostWhileTheHostsAreConfirmed", testCheckHostConfirmedConcurrently})
}

// checkHostStore is s with [api] check_host on, hostA1, hostA2 (node01),
// hostB (node02) and hostC (gpu-7.rack_2) confirmed, and netA and netB.
func checkHostStore(t *testing.T, s *store.Store, on bool) *store.Store {
	t.Helper()
	s = s.WithRules(store.Rules{PhysicalNetworks: []string{"ibnet"}, FlatPKey: store.DefaultFlatPKey, CheckHost: on})
	if err := s.ConfirmHosts(t.Context(), []store.ConfirmedHost{hostA1, hostA2, hostB, hostC}); err != nil {
		t.Fatal(err)
	}
	addNetwork(t, s, netA, 101)
	addNetwork(t, s, netB, 102)
	return s
}

// testCheckHostRefused: each port naming a confirmed host's GUID while
// bound to another is refused, names the GUID and its own host only (not the
// confirmed host's name, nor the network or port holding the GUID), and
// records nothing.
func testCheckHostRefused(t *testing.T, s *store.Store) {
	s = checkHostStore(t, s, true)
	// node02's own port, in netB's partition: a squat on it must not learn
	// that netB holds it.
	mustPort(t, s, boundPort("port-b", netB, uint64(hostB.GUID), "node02"))
	mustPort(t, s, boundPort("port-a", netA, uint64(hostA1.GUID), "node01"))
	read := func(t *testing.T) string {
		return fmt.Sprintf("%q revision %d", readPorts(t, s, "port-a", "port-b", "port-squat"), revision(t, s))
	}
	for _, c := range []struct {
		name   string
		change store.PortChange
		host   string
		hidden []string // the confirmed host's name, the holder's network and port
	}{
		{"another host's idle port", boundPort("port-squat", netA, uint64(hostC.GUID), "node01"), "node01",
			[]string{"gpu-7"}},
		{"a port another network holds", boundPort("port-squat", netA, uint64(hostB.GUID), "node01"), "node01",
			[]string{"node02", netB, "port-b"}},
		{"an FQDN of another host", boundPort("port-squat", netA, uint64(hostA2.GUID), "node02.example.org"),
			"node02.example.org", []string{"node01"}},
		{"a host whose name starts alike", boundPort("port-squat", netA, uint64(hostA1.GUID), "node01x"), "node01x", nil},
		{"the port moved to another host", boundPort("port-a", netA, uint64(hostA1.GUID), "node02"), "node02",
			[]string{"node01"}},
	} {
		assertRefused(t, []refusal{{c.name, func() error {
			_, err := s.RecordPort(t.Context(), c.change)
			for _, h := range c.hidden {
				if err != nil && strings.Contains(err.Error(), h) {
					t.Errorf("refusal %q names %q", err, h)
				}
			}
			return err
		}, []string{fmt.Sprintf("GUID %s is the port of a confirmed host other than the port's binding:host_id %q",
			*c.change.Port.GUID, c.host), "[api] check_host"}}}, read)
	}
}

// testCheckHostAccepted: the host's own ports under its short name or an
// FQDN, in any case; a GUID no host was confirmed with (a VM's virtual
// GUID, a host added since); and a port not bound yet, which holds no GUID.
func testCheckHostAccepted(t *testing.T, s *store.Store) {
	s = checkHostStore(t, s, true)
	for _, c := range []struct {
		change store.PortChange
		want   string
	}{
		{boundPort("p1", netA, uint64(hostA1.GUID), "node01"), `p1:` + netA + `:0x0002c90300000101:"node01"`},
		{boundPort("p2", netA, uint64(hostA2.GUID), "NODE01.example.org"), `p2:` + netA + `:0x0002c90300000102:"NODE01.example.org"`},
		{boundPort("p3", netA, uint64(hostC.GUID), "gpu-7"), `p3:` + netA + `:0x0002c90300000301:"gpu-7"`},
		{boundPort("p4", netA, 0x0002c90300000999, "node02"), `p4:` + netA + `:0x0002c90300000999:"node02"`},
		{boundPort("p5", netB, uint64(hostB.GUID), ""), `p5:` + netB + `:no-guid:""`},
	} {
		if _, err := s.RecordPort(t.Context(), c.change); err != nil {
			t.Errorf("port %s on host %q: %v", c.change.Port.ID, c.change.Port.Host, err)
			continue
		}
		if got := readPorts(t, s, c.change.Port.ID)[0]; got != c.want {
			t.Errorf("port %s = %s, want %s", c.change.Port.ID, got, c.want)
		}
	}
}

// testCheckHostOff: with check_host off (the default) the squat the check
// refuses is accepted, as before it.
func testCheckHostOff(t *testing.T, s *store.Store) {
	s = checkHostStore(t, s, false)
	if _, err := s.RecordPort(t.Context(), boundPort("port-squat", netA, uint64(hostC.GUID), "node01")); err != nil {
		t.Errorf("check_host off: %v", err)
	}
}

// testCheckHostCancelled: a squat whose context is cancelled fails before
// its transaction, at the reads of its checks: it is neither accepted
// unchecked nor recorded.
func testCheckHostCancelled(t *testing.T, s *store.Store) {
	s = checkHostStore(t, s, true)
	before := fmt.Sprintf("%q revision %d", readPorts(t, s, "port-squat"), revision(t, s))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.RecordPort(ctx, boundPort("port-squat", netA, uint64(hostC.GUID), "node01")); !errors.Is(err, context.Canceled) {
		t.Errorf("a squat on a cancelled context: %v, want context.Canceled", err)
	}
	if after := fmt.Sprintf("%q revision %d", readPorts(t, s, "port-squat"), revision(t, s)); after != before {
		t.Errorf("the cancelled change wrote: before %s, after %s", before, after)
	}
}

// testCheckHostConfirmedConcurrently: --confirm-hosts adds a host while a
// port bound to another host names its GUID, a few rounds on GUIDs of their
// own. The confirmed hosts are read before the change's transaction, so the
// port may be judged by the previous set and recorded; either it is refused,
// saying why, or recorded; its next update is refused either way.
func testCheckHostConfirmedConcurrently(t *testing.T, s *store.Store) {
	s = checkHostStore(t, s, true)
	for round := range uint64(4) {
		added := store.ConfirmedHost{GUID: 0x0002c90300000d01 + fabric.GUID(round), Name: fmt.Sprintf("node%02d", 10+round)}
		added.Description = added.Name + " mlx5_0"
		change := boundPort(fmt.Sprintf("port-%d", round), netA, uint64(added.GUID), "node01")
		var wg sync.WaitGroup
		var confirmErr, portErr error
		wg.Go(func() {
			confirmErr = s.ConfirmHosts(t.Context(), []store.ConfirmedHost{hostA1, hostA2, hostB, hostC, added})
		})
		wg.Go(func() { _, portErr = s.RecordPort(t.Context(), change) })
		wg.Wait()
		if confirmErr != nil {
			t.Fatal(confirmErr)
		}
		const why = "is the port of a confirmed host other than the port's binding:host_id"
		if rej := (*store.RejectedError)(nil); portErr != nil && (!errors.As(portErr, &rej) || !strings.Contains(rej.Reason, why)) {
			t.Errorf("round %d: the port: %v, want accepted or refused saying it %s", round, portErr, why)
		}
		if _, err := s.RecordPort(t.Context(), change); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("round %d: the port sent again: %v, want refused", round, err)
		}
	}
}
