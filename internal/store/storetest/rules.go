package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The request rules of the networking-mlnx contract, checked on every engine.

const (
	netFlat  = "a1d2c3b4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
	netFlat2 = "f1a7c0de-2222-4a7b-8c9d-0e1f2a3b4c5d"
	netEth   = "e7e7e7e7-3333-4a7b-8c9d-0e1f2a3b4c5d"
	netGone  = "00000000-0000-0000-0000-000000000000"

	staticPKey fabric.PKey = 0x0010
	guidA      uint64      = 0x248a070300b1c2d4
	guidB      uint64      = 0xfa163e00005b7c1d
	guidC      uint64      = 0x0002c90300001039
)

// rulesStore is a store that manages physnet ibnet only, with a static
// partition on 0x0010.
func rulesStore(s *store.Store) *store.Store {
	return s.WithRules(store.Rules{
		PhysicalNetworks: []string{"ibnet"},
		FlatPKey:         store.DefaultFlatPKey,
		StaticPKey: func(p fabric.PKey) (string, bool) {
			return "storage", p == staticPKey
		},
	})
}

func netSpec(id, typ, physnet string, vlan *int64) store.NetworkSpec {
	return store.NetworkSpec{ID: id, Name: "net " + id[:8], Type: typ, PhysicalNetwork: physnet, SegmentationID: vlan}
}

func vlanID(v int64) *int64 { return &v }

// neutron records Neutron's changes: the database (store.DB), which routes
// each to the fabric of its network, or one fabric's view, which records its
// own fabric's only.
type neutron interface {
	RecordNetwork(ctx context.Context, c store.NetworkChange) (store.Job, error)
	RemoveNetwork(ctx context.Context, r store.NetworkRemoval) (store.Job, error)
	RecordPort(ctx context.Context, c store.PortChange) (store.Job, error)
	RemovePort(ctx context.Context, r store.PortRemoval) (store.Job, error)
}

func recordNetwork(s neutron, t *testing.T, spec store.NetworkSpec) (store.Job, error) {
	t.Helper()
	return s.RecordNetwork(t.Context(), store.NetworkChange{Network: spec, Operation: store.OpUpdateNetwork,
		CreatedBy: "test", Request: `{}`})
}

func mustNetwork(t *testing.T, s neutron, spec store.NetworkSpec) store.Job {
	t.Helper()
	j, err := recordNetwork(s, t, spec)
	if err != nil {
		t.Fatalf("RecordNetwork(%s): %v", spec.ID, err)
	}
	return j
}

func boundPort(id, network string, g uint64, host string) store.PortChange {
	return store.PortChange{Port: store.Port{ID: id, NetworkID: network, GUID: guid(g), Host: host},
		DeviceOwner: "compute:nova", Operation: store.OpUpdatePort, CreatedBy: "test", Request: `{}`}
}

func mustPort(t *testing.T, s neutron, c store.PortChange) store.Job {
	t.Helper()
	j, err := s.RecordPort(t.Context(), c)
	if err != nil {
		t.Fatalf("RecordPort(%s): %v", c.Port.ID, err)
	}
	return j
}

// state is everything a request may change, for before/after comparisons.
type state struct {
	Revision int64
	Networks string
	Members  string
	Ports    string
	Jobs     map[string]int64
}

func readState(t *testing.T, s *store.Store, portIDs ...string) state {
	t.Helper()
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.CountJobsByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var nets []string
	for _, n := range snap.Networks {
		nets = append(nets, fmt.Sprintf("%s/%s/%v/%d", n.ID, n.Type, pkeyOf(n.PKey), n.Revision))
	}
	return state{Revision: snap.Revision, Networks: strings.Join(nets, " "), Members: fmt.Sprint(snap.Members),
		Ports: fmt.Sprint(readPorts(t, s, portIDs...)), Jobs: jobs}
}

func pkeyOf(p *fabric.PKey) string {
	if p == nil {
		return "nil"
	}
	return p.String()
}

// readPorts reads ports as they are recorded.
func readPorts(t *testing.T, s *store.Store, ids ...string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		p, err := s.GetPort(t.Context(), id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			out = append(out, id+":absent")
		case err != nil:
			t.Fatalf("read ports: %v", err)
		case p.GUID == nil:
			out = append(out, fmt.Sprintf("%s:%s:no-guid:%q", id, p.NetworkID, p.Host))
		default:
			out = append(out, fmt.Sprintf("%s:%s:%s:%q", id, p.NetworkID, *p.GUID, p.Host))
		}
	}
	return out
}

func members(t *testing.T, s *store.Store) map[fabric.GUID]string {
	t.Helper()
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[fabric.GUID]string{}
	for _, m := range snap.Members {
		out[m.GUID] = m.NetworkID
	}
	return out
}

// refusal is a request that a rule must refuse with a RejectedError whose
// reason mentions each of mention.
type refusal struct {
	name    string
	do      func() error
	mention []string
}

// assertRefused runs each refusal as a subtest: it must be refused, and what
// read reads must be the same after it as before.
func assertRefused(t *testing.T, refusals []refusal, read func(t *testing.T) string) {
	t.Helper()
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before := read(t)
			err := tc.do()
			var rej *store.RejectedError
			if !errors.As(err, &rej) {
				t.Errorf("error = %v, want a RejectedError", err)
			}
			for _, m := range tc.mention {
				if rej != nil && !strings.Contains(rej.Reason, m) {
					t.Errorf("reason %q does not mention %q", rej.Reason, m)
				}
			}
			if after := read(t); after != before {
				t.Errorf("a refused request changed the state:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// testRejectionsChangeNothing: each 400 rule refuses its request with a
// RejectedError naming the object and the value, and leaves the revision, the
// networks, the ports and the jobs as they were.
func testRejectionsChangeNothing(t *testing.T, s *store.Store) {
	s = rulesStore(s)
	mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(101)))
	mustNetwork(t, s, netSpec(netB, "vlan", "ibnet", vlanID(102)))
	mustNetwork(t, s, netSpec(netFlat, "flat", "ibnet", nil))
	mustNetwork(t, s, netSpec(netFlat2, "flat", "ibnet", nil))
	mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	mustPort(t, s, boundPort("pf", netFlat, guidB, "h2"))

	noClientID := boundPort("p2", netA, 0, "h3")
	noClientID.Port.GUID = nil
	badClientID := boundPort("p2", netA, 0, "h3")
	badClientID.Port.GUID, badClientID.ClientIDError = nil, errors.New(`client-id "24:8a:07": 3 octets, want at least 9`)
	embeddedBad := boundPort("p2", netGone, guidC, "h3")
	embeddedBad.Network = &store.NetworkSpec{ID: netGone, Type: "vlan", PhysicalNetwork: "ibnet", SegmentationID: vlanID(101)}
	port := func(c store.PortChange) func() error {
		return func() error { _, err := s.RecordPort(t.Context(), c); return err }
	}
	network := func(vlan *int64) func() error {
		return func() error { _, err := recordNetwork(s, t, netSpec(netEth, "vlan", "ibnet", vlan)); return err }
	}
	assertRefused(t, []refusal{
		{"bound port without client-id", port(noClientID), []string{"p2", "no usable client-id", "mechanism_drivers"}},
		{"port with unusable client-id", port(badClientID), []string{"p2", "24:8a:07", "client-id"}},
		{"port with client-id on unknown network", port(boundPort("p2", netGone, guidC, "h3")),
			[]string{"p2", netGone, "unknown"}},
		{"port whose embedded network takes a used VLAN ID", port(embeddedBad), []string{netGone, "VLAN ID 101", netA}},
		{"network on another network's VLAN ID", network(vlanID(101)), []string{netEth, "VLAN ID 101", netA}},
		{"network moved to another network's VLAN ID", func() error {
			_, err := recordNetwork(s, t, netSpec(netA, "vlan", "ibnet", vlanID(102)))
			return err
		}, []string{netA, "VLAN ID 102", netB}},
		{"network on a static partition's pkey", network(vlanID(0x10)),
			[]string{netEth, "VLAN ID 16", "static partition", "storage"}},
		{"VLAN ID 0", network(vlanID(0)), []string{netEth, "VLAN ID 0", "1 to 32766"}},
		{"VLAN ID of the default partition", network(vlanID(0x7fff)), []string{netEth, "VLAN ID 32767", "1 to 32766"}},
		{"VLAN ID of the flat partition", network(vlanID(0x7ffe)), []string{netEth, "VLAN ID 32766", "flat_pkey"}},
		{"VLAN network without VLAN ID", network(nil), []string{netEth, "segmentation_id"}},
		{"GUID in another VLAN network's partition", port(boundPort("p2", netB, guidA, "h3")),
			[]string{"p2", "0x248a070300b1c2d4", netA, "only one network"}},
		{"GUID in the flat partition, port on a VLAN network", port(boundPort("p2", netA, guidB, "h3")),
			[]string{"p2", "0xfa163e00005b7c1d", netFlat, "only one network"}},
		{"GUID in another flat network", port(boundPort("p2", netFlat2, guidB, "h3")),
			[]string{"p2", "0xfa163e00005b7c1d", netFlat, "only one network"}},
	}, func(t *testing.T) string { return fmt.Sprintf("%+v", readState(t, s, "p1", "pf", "p2")) })
}

// testUnmanagedNetworks: networks on other physnets or of other types, and their
// ports, are recorded with jobs Completed at once and no revision.
func testUnmanagedNetworks(t *testing.T, s *store.Store) {
	s = rulesStore(s)
	mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(101)))
	rev := revision(t, s)
	for _, spec := range []store.NetworkSpec{
		netSpec(netEth, "vlan", "ethnet", vlanID(101)), // an Ethernet VLAN may reuse an IB VLAN ID
		netSpec(netB, "vxlan", "", vlanID(5000)),
		netSpec(netFlat, "flat", "ethnet", nil),
	} {
		j := mustNetwork(t, s, spec)
		if j.Status != store.StatusCompleted || j.FinishedAt == nil || !strings.Contains(j.Description, "no partition") {
			t.Errorf("job for %s = %+v, want Completed at once with no partition", spec.ID, j)
		}
	}
	j := mustPort(t, s, boundPort("pe", netEth, guidC, "h1"))
	if j.Status != store.StatusCompleted {
		t.Errorf("port on an unmanaged network: job %+v, want Completed", j)
	}
	if r := revision(t, s); r != rev {
		t.Errorf("revision %d -> %d for changes that touch no partition", rev, r)
	}
	if m := members(t, s); len(m) != 0 {
		t.Errorf("members = %v, want none", m)
	}
	// The GUID an Ethernet port carried is free for an InfiniBand port.
	if _, err := s.RecordPort(t.Context(), boundPort("p1", netA, guidC, "h1")); err != nil {
		t.Errorf("GUID of an unmanaged port: %v", err)
	}
	// Known unmanaged objects are removed with a completed job.
	if j, err := s.RemovePort(t.Context(), store.PortRemoval{PortID: "pe"}); err != nil || j.Status != store.StatusCompleted {
		t.Errorf("RemovePort(unmanaged) = %+v, %v", j, err)
	}
	if j, err := s.RemoveNetwork(t.Context(), store.NetworkRemoval{NetworkID: netEth, CreatedBy: "test", Request: "{}"}); err != nil || j.Status != store.StatusCompleted {
		t.Errorf("RemoveNetwork(unmanaged) = %+v, %v", j, err)
	}
	// A port without client-id on a network never announced is not ours either.
	before := revision(t, s)
	c := boundPort("pv", netGone, 0, "h1")
	c.Port.GUID = nil
	if j, err := s.RecordPort(t.Context(), c); err != nil || j.Status != store.StatusCompleted {
		t.Errorf("port without client-id on an unknown network = %+v, %v", j, err)
	}
	if got := readPorts(t, s, "pv"); got[0] != "pv:absent" || revision(t, s) != before {
		t.Errorf("port on an unknown network was recorded: %v", got)
	}
	if _, err := s.RemovePort(t.Context(), store.PortRemoval{PortID: "pv"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RemovePort(never recorded) = %v, want ErrNotFound", err)
	}
}

// testNetworkChanges: a PUT moves a network's partition and members, or takes
// it in or out of management.
func testNetworkChanges(t *testing.T, s *store.Store) {
	s = rulesStore(s)
	mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(101)))
	mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	rev := revision(t, s)
	j := mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(105)))
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != store.StatusPending || j.Revision != rev+1 || len(snap.Networks) != 1 || *snap.Networks[0].PKey != 105 ||
		members(t, s)[fabric.GUID(guidA)] != netA {
		t.Errorf("VLAN change: job %+v, snapshot %+v", j, snap)
	}
	// The old VLAN ID is free again.
	mustNetwork(t, s, netSpec(netB, "vlan", "ibnet", vlanID(101)))

	// Out of management: the partition goes, the ports lose their GUIDs.
	j = mustNetwork(t, s, netSpec(netA, "vlan", "ethnet", vlanID(105)))
	if j.Status != store.StatusPending || len(members(t, s)) != 0 {
		t.Errorf("managed -> unmanaged: job %+v, members %v", j, members(t, s))
	}
	if got := readPorts(t, s, "p1")[0]; !strings.Contains(got, "no-guid") {
		t.Errorf("port of an unmanaged network: %s", got)
	}
	// Back in: a partition again, ports join when they are sent again.
	mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(105)))
	mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	// VLAN -> flat: the member moves to the flat partition.
	mustNetwork(t, s, netSpec(netA, "flat", "ibnet", nil))
	snap, _ = s.Snapshot(t.Context())
	flat := slices.IndexFunc(snap.Networks, func(n store.Network) bool { return n.ID == netA })
	if flat < 0 || snap.Networks[flat].PKey != nil || snap.Networks[flat].Type != "flat" || members(t, s)[fabric.GUID(guidA)] != netA {
		t.Errorf("VLAN -> flat: snapshot %+v", snap)
	}
}

// testPortChanges: host, client-id and membership changes of one port.
func testPortChanges(t *testing.T, s *store.Store) {
	s = rulesStore(s)
	mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(101)))
	mustNetwork(t, s, netSpec(netFlat, "flat", "ibnet", nil))

	// Unbound with a client-id: recorded without membership, nothing to apply.
	j := mustPort(t, s, boundPort("p1", netA, guidA, ""))
	if j.Status != store.StatusCompleted || len(members(t, s)) != 0 {
		t.Errorf("unbound port: job %+v, members %v", j, members(t, s))
	}
	// Bound: a member.
	j = mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	if j.Status != store.StatusPending || members(t, s)[fabric.GUID(guidA)] != netA {
		t.Errorf("bound port: job %+v, members %v", j, members(t, s))
	}
	// Host change: same membership, a job answered all the same.
	if j = mustPort(t, s, boundPort("p1", netA, guidA, "h2")); j.ID == 0 || len(members(t, s)) != 1 {
		t.Errorf("host change: job %+v, members %v", j, members(t, s))
	}
	// Client-id change: the GUID moves.
	mustPort(t, s, boundPort("p1", netA, guidC, "h2"))
	if m := members(t, s); m[fabric.GUID(guidC)] != netA || len(m) != 1 {
		t.Errorf("client-id change: members %v", m)
	}
	// Network change: the membership moves to the flat partition.
	mustPort(t, s, boundPort("p1", netFlat, guidC, "h2"))
	if m := members(t, s); m[fabric.GUID(guidC)] != netFlat || len(m) != 1 {
		t.Errorf("network change: members %v", m)
	}
	// A DHCP port without client-id: no membership, completed at once.
	dhcp := boundPort("pd", netA, 0, "net-node")
	dhcp.Port.GUID, dhcp.DeviceOwner = nil, "network:dhcp"
	if j = mustPort(t, s, dhcp); j.Status != store.StatusCompleted {
		t.Errorf("DHCP port: job %+v", j)
	}
	// A port whose network the body embeds is recorded with it.
	emb := boundPort("pn", netFlat2, guidB, "h3")
	emb.Network = &store.NetworkSpec{ID: netFlat2, Type: "flat", PhysicalNetwork: "ibnet"}
	if j = mustPort(t, s, emb); j.Status != store.StatusPending || members(t, s)[fabric.GUID(guidB)] != netFlat2 {
		t.Errorf("port with its flat network: job %+v, members %v", j, members(t, s))
	}
}

// testPortDeleteByBody: a DELETE removes exactly the GUID its body names.
func testPortDeleteByBody(t *testing.T, s *store.Store) {
	s = rulesStore(s)
	mustNetwork(t, s, netSpec(netA, "vlan", "ibnet", vlanID(101)))
	mustPort(t, s, boundPort("p1", netA, guidA, "h1"))
	mustPort(t, s, boundPort("p1", netA, guidC, "h1")) // a later PUT moved it to guidC
	rev := revision(t, s)
	j, err := s.RemovePort(t.Context(), store.PortRemoval{PortID: "p1", GUID: guid(guidA)})
	if err != nil || j.Status != store.StatusCompleted || revision(t, s) != rev || members(t, s)[fabric.GUID(guidC)] != netA {
		t.Errorf("stale DELETE: job %+v, %v; members %v", j, err, members(t, s))
	}
	// Migration race: a new port of the same network takes the GUID; the old
	// port stays without it, and its DELETE leaves the GUID with the new one.
	if _, err := s.RecordPort(t.Context(), boundPort("p2", netA, guidC, "h2")); err != nil {
		t.Fatal(err)
	}
	if got := readPorts(t, s, "p1", "p2"); !strings.Contains(got[0], "no-guid") || !strings.Contains(got[1], "0x0002c90300001039") {
		t.Errorf("after the take-over: %v", got)
	}
	if _, err := s.RemovePort(t.Context(), store.PortRemoval{PortID: "p1", GUID: guid(guidC)}); err != nil {
		t.Fatal(err)
	}
	if got := readPorts(t, s, "p1")[0]; got != "p1:absent" || members(t, s)[fabric.GUID(guidC)] != netA {
		t.Errorf("DELETE of the old port: %s, members %v", got, members(t, s))
	}
	// Migration in order: DELETE from the old host, then the re-add: the GUID is in.
	j, err = s.RemovePort(t.Context(), store.PortRemoval{PortID: "p2", GUID: guid(guidC)})
	if err != nil || j.Status != store.StatusPending || len(members(t, s)) != 0 {
		t.Fatalf("DELETE: %+v, %v, members %v", j, err, members(t, s))
	}
	last := mustPort(t, s, boundPort("p2", netA, guidC, "h3"))
	if members(t, s)[fabric.GUID(guidC)] != netA || last.Revision != revision(t, s) {
		t.Errorf("re-add: job %+v, members %v", last, members(t, s))
	}
}
