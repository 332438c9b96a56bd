package store

import (
	"context"
	"slices"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// tx is the store's view of the queries of one transaction: the change path
// speaks in Networks and Ports, the queries in rows. Each method is the query
// of the same name.
type tx struct {
	q      driver.Queries
	fabric string // the fabric whose rows it reads and writes
}

func (t tx) GetNetwork(ctx context.Context, id string) (Network, error) {
	n, _, err := t.getNetwork(ctx, id)
	return n, err
}

// getNetwork is GetNetwork with the fabric the network is recorded on.
func (t tx) getNetwork(ctx context.Context, id string) (Network, string, error) {
	n, err := t.q.GetNetwork(ctx, id)
	return network(n), n.Fabric, notFound(err)
}

func (t tx) GetNetworkByPKey(ctx context.Context, pkey fabric.PKey) (Network, error) {
	n, err := t.q.GetNetworkByPKey(ctx, t.fabric, &pkey)
	return network(n), notFound(err)
}

func (t tx) UpsertNetwork(ctx context.Context, n Network, now time.Time) error {
	// Type and PhysicalNetwork are checked (Rules.network): cleaned only.
	return t.q.UpsertNetwork(ctx, driver.UpsertNetworkParams{Fabric: t.fabric, ID: n.ID, Name: boundChars(n.Name, MaxName),
		NetworkType: boundChars(n.Type, maxNetworkType), PhysicalNetwork: boundChars(n.PhysicalNetwork, maxPhysicalNetwork),
		PKey: n.PKey, Managed: n.Managed, Revision: n.Revision, Now: now})
}

func (t tx) DeleteNetwork(ctx context.Context, id string) (int64, error) {
	return t.q.DeleteNetwork(ctx, t.fabric, id)
}

func (t tx) GetPort(ctx context.Context, id string) (Port, error) {
	p, _, err := t.getPort(ctx, id)
	return p, err
}

// getPort is GetPort with the fabric the port is recorded on.
func (t tx) getPort(ctx context.Context, id string) (Port, string, error) {
	p, err := t.q.GetPort(ctx, id)
	return port(p), p.Fabric, notFound(err)
}

// GetPortsByIDOrGUID returns, in one read, the port with this id and the port
// holding guid (nil guid: none), in no particular order: none, one (both or
// either) or two ports.
func (t tx) GetPortsByIDOrGUID(ctx context.Context, id string, guid *fabric.GUID) ([]Port, error) {
	rows, err := t.q.GetPortsByIDOrGUID(ctx, t.fabric, id, guid)
	return driver.Convert(rows, port), err
}

// portChangeRows are what GetPortChange reads for a port change.
type portChangeRows struct {
	n              Network
	before, holder *Port
	// fabrics are the network's fabric and the fabric of the port recorded
	// as the change's port ("" when there is none).
	fabrics [2]string
	adopted int64 // the fabric's adopted partitions
	// stateRevision is the fabric's revision as the transaction left it.
	stateRevision int64
	// sms are the subnet manager ports recorded with the change's GUID:
	// one for each fabric whose OpenSM runs on it (none, nearly always).
	sms []SMPort
}

// GetPortChange reads, in one round trip, the network of a port change, the
// port recorded as portID and the port holding guid (nil guid: none; each nil
// when there is none), the fabric's count of adopted partitions and the
// subnet manager ports recorded with guid: ErrNotFound when the network is
// not recorded.
func (t tx) GetPortChange(ctx context.Context, networkID, portID string, guid *fabric.GUID) (portChangeRows, error) {
	var out portChangeRows
	rows, err := t.q.GetPortChangeRows(ctx, t.fabric, portID, guid, networkID)
	if err != nil {
		return out, err
	}
	if len(rows) == 0 {
		return out, ErrNotFound
	}
	r := rows[0]
	out.fabrics[0], out.adopted, out.stateRevision = r.Fabric, r.Adopted, r.StateRevision
	out.n = Network{ID: r.ID, Name: r.Name, Type: r.NetworkType, PhysicalNetwork: r.PhysicalNetwork,
		PKey: r.Pkey, Managed: r.Managed, Revision: r.Revision}
	for _, r := range rows {
		if r.SmFabric != nil && guid != nil && !slices.ContainsFunc(out.sms, func(sm SMPort) bool { return sm.Fabric == *r.SmFabric }) {
			out.sms = append(out.sms, SMPort{Fabric: *r.SmFabric, GUID: *guid})
		}
		if r.PortID == nil {
			continue // the network has neither port: its one row
		}
		p := &Port{ID: *r.PortID, NetworkID: *r.PortNetworkID, GUID: r.PortGuid, Host: *r.PortHost, Revision: *r.PortRevision}
		if p.ID == portID {
			out.before = p
			if r.PortFabric != nil {
				out.fabrics[1] = *r.PortFabric
			}
		}
		if guid != nil && p.GUID != nil && *p.GUID == *guid {
			out.holder = p
		}
	}
	return out, nil
}

func (t tx) UpsertPort(ctx context.Context, p Port, now time.Time) error {
	return t.q.UpsertPort(ctx, driver.UpsertPortParams{Fabric: t.fabric, ID: p.ID, NetworkID: p.NetworkID, GUID: p.GUID,
		Host: boundChars(p.Host, MaxName), Revision: p.Revision, Now: now})
}

func (t tx) DeletePort(ctx context.Context, id string) (int64, error) {
	return t.q.DeletePort(ctx, t.fabric, id)
}

func (t tx) DeletePortsOfNetwork(ctx context.Context, networkID string) (int64, error) {
	return t.q.DeletePortsOfNetwork(ctx, t.fabric, networkID)
}

func (t tx) ClearGUIDsOfNetwork(ctx context.Context, networkID string, revision int64, now time.Time) (int64, error) {
	return t.q.ClearGUIDsOfNetwork(ctx, t.fabric, revision, now, networkID)
}

// notFound is ErrNotFound for a query that found no row.
func notFound(err error) error {
	if driver.IsNoRows(err) {
		return ErrNotFound
	}
	return err
}

func network(n driver.Network) Network {
	return Network{ID: n.ID, Name: n.Name, Type: n.NetworkType, PhysicalNetwork: n.PhysicalNetwork,
		PKey: n.Pkey, Managed: n.Managed, Revision: n.Revision}
}

func port(p driver.Port) Port {
	return Port{ID: p.ID, NetworkID: p.NetworkID, GUID: p.Guid, Host: p.Host, Revision: p.Revision}
}
