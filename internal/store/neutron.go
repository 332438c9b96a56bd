package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Neutron's changes, as networking-mlnx sends them: networks (a VLAN network
// becomes a partition, pkey = VLAN ID) and ports (a port's GUID becomes a
// full member of its network's partition). Each is checked against the rules
// (rules.go), recorded in one change transaction (change.go) and answered
// with its job.

// NetworkChange is a POST or PUT of a network.
type NetworkChange struct {
	Network   NetworkSpec
	Operation string // OpCreateNetwork or OpUpdateNetwork
	CreatedBy string
	Request   string
	// RequestID is the API request's ID (X-Request-ID): every job the change
	// records keeps it, so that a DBA reading a job finds the request's log lines.
	RequestID string
}

// RecordNetwork records a network (create or update alike: both make it so). A
// PUT may move a network to another VLAN ID (its members move with it), or
// make it managed or not (its ports lose their GUIDs when it stops being).
//
// The network's physical network must be the view's fabric's
// (OtherFabricError otherwise): DB.RecordNetwork routes it there.
func (s *Store) RecordNetwork(ctx context.Context, c NetworkChange) (Job, error) {
	if err := s.ownFabric(s.fabricOfPhysnet(c.Network.PhysicalNetwork), ObjectNetwork, c.Network.ID); err != nil {
		return Job{}, err
	}
	return s.recordNetwork(ctx, c)
}

// recordNetwork is RecordNetwork on s's fabric, which serves the network's
// physical network.
func (s *Store) recordNetwork(ctx context.Context, c NetworkChange) (Job, error) {
	n, err := s.rules.network(c.Network)
	if err != nil {
		return Job{}, err
	}
	return s.record(ctx, s.groups, "record network", n.ID, func(ctx context.Context, tx *changeTx) (Job, error) {
		before, beforeFabric, err := tx.getNetwork(ctx, n.ID)
		known := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Job{}, err
		}
		if known {
			// Its physical network given to another fabric since it was
			// recorded: --move-physnet moves it (a 409, not a 400).
			if err := s.physnetMoved(before, beforeFabric); err != nil {
				return Job{}, err
			}
		}
		if err := checkSameFabric(tx, ObjectNetwork, n.ID, beforeFabric, "physical network "+n.PhysicalNetwork); err != nil {
			return Job{}, err
		}
		if err := s.checkPKeyFree(ctx, tx, n); err != nil {
			return Job{}, err
		}
		if known && sameNetwork(before, n) {
			if same, err := tx.unchanged(ctx, ObjectNetwork, n.ID, c.CreatedBy, before.Revision); err != nil || same {
				return Job{}, err
			}
		}
		rev, err := tx.touches(ctx, n.Managed || (known && before.Managed))
		if err != nil {
			return Job{}, err
		}
		n.Revision = rev
		if known {
			if err := s.promiseNetworkMove(ctx, tx, before, n); err != nil {
				return Job{}, err
			}
		}
		if err := tx.UpsertNetwork(ctx, n, tx.now); err != nil {
			return Job{}, err
		}
		if known && before.Managed && !n.Managed {
			if _, err := tx.ClearGUIDsOfNetwork(ctx, n.ID, rev, tx.now); err != nil {
				return Job{}, err
			}
		}
		if known && before.Managed && before.PKey != nil && (!n.Managed || n.PKey == nil || *n.PKey != *before.PKey) {
			// The network leaves its pkey: its adopted members leave with it (adopted.go).
			if _, err := endAdoption(ctx, tx, *before.PKey); err != nil {
				return Job{}, err
			}
		}
		takeOver := ""
		if n.Managed && n.PKey != nil && !(known && before.Managed && before.PKey != nil && *before.PKey == *n.PKey) {
			// The network arrives on its pkey: an adopted partition there
			// becomes its own, with its flags.
			owner := partitions.State{Networks: []partitions.Network{{ID: n.ID, PKey: *n.PKey}}}
			if takeOver, err = s.takeOverText(ctx, tx, owner, *n.PKey); err != nil {
				return Job{}, err
			}
		}
		return Job{
			ObjectType: ObjectNetwork, ObjectID: n.ID, NetworkID: n.ID, Operation: c.Operation,
			Description: fmt.Sprintf("%s %s (%s)", verb(c.Operation), n.ID, s.rules.partitionText(n)),
			Result:      s.networkResult(n) + takeOver,
			CreatedBy:   c.CreatedBy, Request: c.Request, RequestID: c.RequestID,
		}, nil
	})
}

// sameNetwork says whether network n is the network as recorded (before),
// its revision aside: a change that changes nothing (unchanged.go).
func sameNetwork(before, n Network) bool {
	samePKey := (before.PKey == nil && n.PKey == nil) || (before.PKey != nil && n.PKey != nil && *before.PKey == *n.PKey)
	return samePKey && before.ID == n.ID && before.Name == n.Name && before.Type == n.Type &&
		before.PhysicalNetwork == n.PhysicalNetwork && before.Managed == n.Managed
}

// promiseNetworkMove states the places of a network's update from before to
// n: when the network leaves its partition (another VLAN ID, or no longer
// managed), each member's GUID absent there, and full in the partition it
// moves to, if any. A network that keeps its partition moves no member.
// Absent means absent: see promisePort.
func (s *Store) promiseNetworkMove(ctx context.Context, tx *changeTx, before, n Network) error {
	if !before.Managed || (n.Managed && s.rules.partitionOf(n) == s.rules.partitionOf(before)) {
		return nil
	}
	return s.promiseMembers(ctx, tx, before, n)
}

// promiseMembers states each member of network from (read now, before the
// change writes) absent from its partition and, if to is managed, full in
// to's.
func (s *Store) promiseMembers(ctx context.Context, tx *changeTx, from, to Network) error {
	ports, err := tx.q.ListPortsOfNetwork(ctx, tx.fabric, from.ID)
	if err != nil {
		return fmt.Errorf("the members of network %s: %w", from.ID, err)
	}
	for _, p := range ports {
		if p.Guid == nil {
			continue
		}
		tx.promise(Place{GUID: *p.Guid, PKey: s.rules.partitionOf(from), Want: WantAbsent})
		if to.Managed {
			tx.promise(Place{GUID: *p.Guid, PKey: s.rules.partitionOf(to), Want: WantFull})
		}
	}
	return nil
}

// checkPKeyFree refuses a VLAN network whose pkey another network's partition
// uses: a second network on the same VLAN ID would merge two tenants.
func (s *Store) checkPKeyFree(ctx context.Context, tx *changeTx, n Network) error {
	if n.PKey == nil {
		return nil
	}
	other, err := tx.GetNetworkByPKey(ctx, *n.PKey)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	case other.ID != n.ID:
		return rejectf("network %s: VLAN ID %d is already the partition key %s of network %s",
			n.ID, uint16(*n.PKey), *n.PKey, other.ID)
	}
	// A Kubernetes pkey recorded before [ufm_pkeys] pkey_range moved (with no
	// range, none is recorded: see membership).
	if !s.rules.anyKubernetesRange() {
		return nil
	}
	switch _, err := tx.q.GetKubernetesPKey(ctx, tx.fabric, *n.PKey); {
	case err == nil:
		return rejectf("network %s: VLAN ID %d is the partition key %s of a Kubernetes partition",
			n.ID, uint16(*n.PKey), *n.PKey)
	case !driver.IsNoRows(err):
		return err
	}
	return nil
}

func (s *Store) networkResult(n Network) string {
	switch {
	case !n.Managed:
		return fmt.Sprintf("network %s is recorded with %s", n.ID, s.rules.partitionText(n))
	case n.PKey == nil:
		return fmt.Sprintf("network %s shares the flat partition %s", n.ID, s.rules.flatPKey())
	}
	return fmt.Sprintf("partition %s of network %s is in place", *n.PKey, n.ID)
}

// NetworkRemoval is a DELETE of a network.
type NetworkRemoval struct {
	NetworkID string
	CreatedBy string
	Request   string
	RequestID string // as in NetworkChange
}

// RemoveNetwork deletes a network, its partition and its ports. The network
// must be recorded on the view's fabric (OtherFabricError otherwise, nothing
// written): DB.RemoveNetwork routes the removal there.
func (s *Store) RemoveNetwork(ctx context.Context, r NetworkRemoval) (Job, error) {
	return s.removeNetwork(ctx, r)
}

// removeNetwork is RemoveNetwork on s's fabric; it refuses, writing nothing,
// a network recorded on another (OtherFabricError, which DB.RemoveNetwork
// follows).
func (s *Store) removeNetwork(ctx context.Context, r NetworkRemoval) (Job, error) {
	networkID := r.NetworkID
	return s.record(ctx, s.groups, "remove network", networkID, func(ctx context.Context, tx *changeTx) (Job, error) {
		n, fab, err := tx.getNetwork(ctx, networkID)
		if err != nil {
			return Job{}, err
		}
		if fab != tx.fabric {
			return Job{}, otherFabric(tx, ObjectNetwork, networkID, fab)
		}
		if _, err := tx.touches(ctx, n.Managed); err != nil {
			return Job{}, err
		}
		if n.Managed {
			if err := s.promiseMembers(ctx, tx, n, Network{}); err != nil {
				return Job{}, err
			}
		}
		if _, err := tx.DeletePortsOfNetwork(ctx, networkID); err != nil {
			return Job{}, err
		}
		if _, err := tx.DeleteNetwork(ctx, networkID); err != nil {
			return Job{}, err
		}
		if n.Managed && n.PKey != nil {
			// Its adopted members leave with it (adopted.go).
			if _, err := endAdoption(ctx, tx, *n.PKey); err != nil {
				return Job{}, err
			}
		}
		result := fmt.Sprintf("network %s and its ports are removed", networkID)
		if n.Managed {
			result = fmt.Sprintf("network %s is removed, with its ports, from its partition (%s)",
				networkID, s.rules.partitionText(n))
		}
		return Job{
			ObjectType: ObjectNetwork, ObjectID: networkID, NetworkID: networkID, Operation: OpDeleteNetwork,
			Description: fmt.Sprintf("Delete network %s (%s)", networkID, s.rules.partitionText(n)),
			Result:      result,
			CreatedBy:   r.CreatedBy, Request: r.Request, RequestID: r.RequestID,
		}, nil
	})
}

// PortChange is a POST or PUT of a port.
type PortChange struct {
	// Port is the port as the request describes it; its GUID comes from the
	// client-id and is nil when the port carries none.
	Port Port
	// ClientIDError says why the client-id the port carries is unusable.
	ClientIDError error
	DeviceOwner   string
	// Network is the network embedded in the port body, if any: it defines a
	// network the manager has not heard of (a newer driver sends it).
	Network   *NetworkSpec
	Operation string // OpAddPort or OpUpdatePort
	CreatedBy string
	Request   string
	// RequestID is the API request's ID (X-Request-ID): every job the change
	// records keeps it, so that a DBA reading a job finds the request's log lines.
	RequestID string
}

// RecordPort records a port and its membership in its network's partition.
//
// A port on a managed network is a member when it is bound to a host and has a
// client-id. Bound without a client-id, it is refused, unless it is one of
// Neutron's own network ports (DHCP, routers). Unbound, it holds no membership:
// an unbound port's deletion sends nothing, so a GUID given now could never be
// taken back. A port on a network that is not managed never holds a GUID.
//
// The port's network must be the view's fabric's: recorded there or, not
// recorded, the network the port embeds on its physical network
// (OtherFabricError otherwise, nothing written). DB.RecordPort routes the
// change there.
func (s *Store) RecordPort(ctx context.Context, c PortChange) (Job, error) {
	return s.recordPortChange(ctx, c)
}

// recordPortChange is RecordPort on s's fabric; it refuses, writing
// nothing, a port whose network is another fabric's (OtherFabricError,
// which DB.RecordPort follows).
func (s *Store) recordPortChange(ctx context.Context, c PortChange) (Job, error) {
	var embedded *Network
	if c.Network != nil {
		n, err := s.rules.network(*c.Network)
		if err != nil {
			return Job{}, err
		}
		embedded = &n
	}
	// The fabric and the confirmed hosts are read now, not while the change
	// holds the revision's lock. The subnet managers' ports are read by the
	// change itself, with its rows (readPortState).
	var limit PortCheck
	var host HostCheck
	if c.Port.GUID != nil {
		var err error
		if host, err = s.hostCheck(ctx); err != nil {
			return Job{}, fmt.Errorf("record port %s: check its GUID against the confirmed hosts: %w", c.Port.ID, err)
		}
	}
	if c.Port.GUID != nil && s.rules.PortLimit != nil {
		var err error
		if limit, err = s.rules.PortLimit(); err != nil {
			return Job{}, fmt.Errorf("record port %s: check its switch port's pkey table: %w", c.Port.ID, err)
		}
	}
	return s.record(ctx, s.groups, "record port", c.Port.ID, func(ctx context.Context, tx *changeTx) (Job, error) {
		return s.recordPort(ctx, tx, c, embedded, portChecks{limit: limit, host: host})
	})
}

// portState is what RecordPort's change reads before it decides.
type portState struct {
	n          Network
	before     *Port // the port as recorded, nil if it is not
	holder     *Port // the port recorded with the requested GUID, if any
	newNetwork bool  // n is the network the port embeds, recorded with it
	// sms are the subnet manager ports recorded with the port's GUID, read
	// under the revision's lock.
	sms []SMPort
}

// recordPort is RecordPort's change in tx: it reads the port's network and
// the ports it may displace, applies the rules, writes, and says the job.
func (s *Store) recordPort(ctx context.Context, tx *changeTx, c PortChange, embedded *Network, checks portChecks) (Job, error) {
	// The rules below change p (a GUID the port may not hold): each run
	// of the change (a transaction the database aborted runs again)
	// starts from the port as requested.
	p := c.Port
	st, known, err := s.readPortState(ctx, tx, c, embedded)
	if err != nil {
		return Job{}, err
	}
	if !known {
		// Nothing here is ours: most likely a port of a network that is
		// never announced (VXLAN, Geneve) under [sdn] physical_networks = *.
		if _, err := tx.touches(ctx, false); err != nil {
			return Job{}, err
		}
		return Job{
			ObjectType: ObjectPort, ObjectID: p.ID, NetworkID: p.NetworkID, Operation: c.Operation,
			Description: fmt.Sprintf("%s %s (no client-id) on network %s, which is not known",
				verb(c.Operation), p.ID, p.NetworkID),
			Result:    fmt.Sprintf("nothing to do: port %s has no client-id and network %s is not known", p.ID, p.NetworkID),
			CreatedBy: c.CreatedBy, Request: c.Request, RequestID: c.RequestID,
		}, nil
	}
	if p.GUID != nil {
		checks.reserved = s.rules.reserved(st.sms)
	}
	reason, err := s.membership(ctx, tx, &p, c, st.n, st.holder, checks)
	if err != nil {
		return Job{}, err
	}
	if samePort(p, st) {
		if same, err := tx.unchanged(ctx, ObjectPort, p.ID, c.CreatedBy, max(st.before.Revision, st.n.Revision)); err != nil || same {
			return Job{}, err
		}
	}
	heldGUID := st.before != nil && st.before.GUID != nil
	rev, err := tx.touches(ctx, p.GUID != nil || heldGUID || (st.newNetwork && st.n.Managed))
	if err != nil {
		return Job{}, err
	}
	if err := writePort(ctx, tx, p, st, rev); err != nil {
		return Job{}, err
	}
	if err := s.promisePort(ctx, tx, p, st); err != nil {
		return Job{}, err
	}
	guid, result := "no GUID", fmt.Sprintf("port %s holds no membership: %s", p.ID, reason)
	if p.GUID != nil {
		guid = "GUID " + p.GUID.String()
		result = fmt.Sprintf("GUID %s is a full member of %s", *p.GUID, s.rules.memberOf(st.n))
		// The port decides the GUID's partitions from now on (adopted.go).
		released, err := releaseGUIDs(ctx, tx, []fabric.GUID{*p.GUID}, rev)
		if err != nil {
			return Job{}, err
		}
		result += releasedText("GUID "+p.GUID.String(), released)
	}
	return Job{
		ObjectType: ObjectPort, ObjectID: p.ID, NetworkID: p.NetworkID, Operation: c.Operation,
		Description: fmt.Sprintf("%s %s (%s) to network %s (%s)",
			verb(c.Operation), p.ID, guid, st.n.ID, s.rules.partitionText(st.n)),
		Result:    result,
		CreatedBy: c.CreatedBy, Request: c.Request, RequestID: c.RequestID,
	}, nil
}

// samePort says whether port p, as the rules leave it, is the port as
// recorded (st.before), on its recorded network, holding what it held: a
// change that changes nothing (unchanged.go). Its GUID is then held by no
// adopted partition (an owned GUID is adopted by none, and its port's
// change released it), so nothing is left to release.
func samePort(p Port, st portState) bool {
	b := st.before
	if b == nil || st.newNetwork || (st.holder != nil && st.holder.ID != p.ID) {
		return false
	}
	sameGUID := (p.GUID == nil && b.GUID == nil) || (p.GUID != nil && b.GUID != nil && *p.GUID == *b.GUID)
	return sameGUID && p.NetworkID == b.NetworkID && p.Host == b.Host
}

// readPortState reads what RecordPort's change decides on: every row, in one
// round trip (the revision's row lock is held from the first statement to the
// commit), but for a network's first port, whose network the port embeds.
// known is false, with no error, when the network is not known and the port
// asks for nothing (no client-id); a port that asks for a GUID on a network
// that is not known is refused.
func (s *Store) readPortState(ctx context.Context, tx *changeTx, c PortChange, embedded *Network) (st portState, known bool, err error) {
	p := c.Port
	r, err := tx.GetPortChange(ctx, p.NetworkID, p.ID, p.GUID)
	if err == nil {
		tx.learnRevision(r.stateRevision)
		// Read under the revision's lock, which every change of the
		// adopted partitions takes too: none can appear before this
		// change's releaseGUIDs, which then need not read them.
		tx.noAdopted = r.adopted == 0
		// Its network's physical network given to another fabric since it
		// was recorded: recorded here, the port would join a partition of
		// the wrong subnet, or none.
		if err := s.physnetMoved(r.n, r.fabrics[0]); err != nil {
			return portState{}, false, err
		}
	}
	switch {
	case err == nil && r.fabrics[0] != tx.fabric:
		return portState{}, false, otherFabric(tx, ObjectNetwork, p.NetworkID, r.fabrics[0])
	case err == nil && r.before != nil && r.fabrics[1] != tx.fabric:
		return portState{}, false, movedPort(p.ID, r.fabrics[1], p.NetworkID, tx.fabric)
	case errors.Is(err, ErrNotFound) && embedded != nil:
		if err := s.ownFabric(s.fabricOfPhysnet(embedded.PhysicalNetwork), ObjectNetwork, embedded.ID); err != nil {
			return portState{}, false, err
		}
		if err := s.checkPKeyFree(ctx, tx, *embedded); err != nil {
			return portState{}, false, err
		}
		// A network's first port: its ports are read on their own.
		before, holder, err := portAndHolder(ctx, tx, p.ID, p.GUID)
		if err == nil && before != nil {
			var fab string
			if _, fab, err = tx.getPort(ctx, p.ID); err == nil {
				err = checkSameFabric(tx, ObjectPort, p.ID, fab, "network "+p.NetworkID)
			}
		}
		var sms []SMPort
		if err == nil && p.GUID != nil {
			sms, err = tx.smPorts(ctx)
		}
		return portState{n: *embedded, before: before, holder: holder, newNetwork: true, sms: sms}, err == nil, err
	case errors.Is(err, ErrNotFound) && p.GUID == nil && c.ClientIDError == nil:
		return portState{}, false, nil
	case errors.Is(err, ErrNotFound):
		return portState{}, false, rejectf("port %s: network %s is unknown, so there is no partition for the port; "+
			"networking-mlnx sends a VLAN network's creation before its ports, and the manager learns of a flat network from its first update",
			p.ID, p.NetworkID)
	case err != nil:
		return portState{}, false, err
	}
	return portState{n: r.n, before: r.before, holder: r.holder, sms: r.sms}, true, nil
}

// writePort writes port p, at revision rev, with what its change decided:
// its network first if the port embeds a new one, then the GUID it takes
// from another port. The writes go with the job's insert, in one round trip;
// an error of one of them is the insert's.
func writePort(ctx context.Context, tx *changeTx, p Port, st portState, rev int64) error {
	if st.newNetwork {
		n := st.n
		n.Revision = rev
		if err := tx.later.UpsertNetwork(ctx, n, tx.now); err != nil {
			return err
		}
	}
	if p.GUID != nil {
		if err := takeGUID(ctx, tx.later, p, st.holder, rev, tx.now); err != nil {
			return err
		}
	}
	p.Revision = rev
	return tx.later.UpsertPort(ctx, p, tx.now)
}

// promisePort states the places of port p's change: its GUID full in its
// network's partition, always (even unchanged); the membership the port held
// before, absent, when it differs (another GUID, another partition, or none);
// and the membership of the port it took the GUID from, likewise.
//
// Absent means absent: a GUID is held by at most one port of a fabric (the
// ports' unique (fabric, guid)), and while a port holds it it is in no
// Kubernetes pkey and no partition of the template (membership), nor any
// adopted partition (releaseGUIDs): the GUID a port lets go of, from the
// flat pkey too, which flat networks share, stays in no other membership of
// that pkey. A place both left and taken (a port moving between two flat
// networks, or a GUID taken from another port of the network) is full.
func (s *Store) promisePort(ctx context.Context, tx *changeTx, p Port, st portState) error {
	if p.GUID != nil {
		tx.promise(Place{GUID: *p.GUID, PKey: s.rules.partitionOf(st.n), Want: WantFull})
	}
	olds := []*Port{st.before}
	if st.holder != nil && st.holder.ID != p.ID && p.GUID != nil { // the port takeGUID took it from
		olds = append(olds, st.holder)
	}
	for _, old := range olds {
		if old == nil || old.GUID == nil {
			continue
		}
		pkey, err := s.pkeyOfPort(ctx, tx, *old, st.n)
		if err != nil {
			return err
		}
		tx.promise(Place{GUID: *old.GUID, PKey: pkey, Want: WantAbsent})
	}
	return nil
}

// pkeyOfPort is the pkey of port p's network, n or another (a port recorded
// on another network, read then): a port that holds a GUID is on a managed
// network.
func (s *Store) pkeyOfPort(ctx context.Context, tx *changeTx, p Port, n Network) (fabric.PKey, error) {
	if p.NetworkID != n.ID {
		var err error
		if n, _, err = tx.getNetwork(ctx, p.NetworkID); err != nil {
			return 0, fmt.Errorf("the network %s of port %s: %w", p.NetworkID, p.ID, err)
		}
	}
	return s.rules.partitionOf(n), nil
}

// portAndHolder reads the port recorded as id and the port holding guid (nil
// when there is none, or guid is nil).
func portAndHolder(ctx context.Context, tx *changeTx, id string, guid *fabric.GUID) (port, holder *Port, err error) {
	ports, err := tx.GetPortsByIDOrGUID(ctx, id, guid)
	if err != nil {
		return nil, nil, err
	}
	for i := range ports {
		if ports[i].ID == id {
			port = &ports[i]
		}
		if guid != nil && ports[i].GUID != nil && *ports[i].GUID == *guid {
			holder = &ports[i]
		}
	}
	return port, holder, nil
}

// portChecks are what a port's change checks its GUID against, read before
// its transaction: the fabric's port limit (nil: none), the GUIDs no
// client may name (nil when the port names no GUID; a port's change reads
// the subnet managers' ports among its rows, a Kubernetes change before its
// transaction) and the confirmed hosts' ports (nil: [api] check_host is off,
// or the port names no GUID).
type portChecks struct {
	limit    PortCheck
	reserved ReservedCheck
	host     HostCheck
}

// membership decides whether port p, on network n, holds its GUID: it clears
// p.GUID when it does not and says why, or refuses the port. holder is the
// port recorded with p's GUID, if any. It reads, in tx, whether a Kubernetes
// pkey holds the GUID.
func (s *Store) membership(ctx context.Context, tx *changeTx, p *Port, c PortChange, n Network, holder *Port, checks portChecks) (string, error) {
	if !n.Managed {
		p.GUID = nil
		return fmt.Sprintf("network %s has %s", n.ID, s.rules.partitionText(n)), nil
	}
	if c.ClientIDError != nil {
		return "", rejectf("port %s: its client-id cannot give a GUID for the partition of network %s: %v",
			p.ID, n.ID, c.ClientIDError)
	}
	switch {
	case p.GUID == nil && p.Host != "" && !networkOwner(c.DeviceOwner):
		return "", rejectf("port %s: bound to host %q on network %s (%s) but has no usable client-id in extra_dhcp_opts "+
			"(option \"client-id\" or \"61\"), so it has no GUID to put in the partition; for VM ports, list "+
			"mlnx_infiniband before mlnx_sdn_assist in [ml2] mechanism_drivers",
			p.ID, p.Host, n.ID, s.rules.partitionText(n))
	case p.GUID == nil:
		return fmt.Sprintf("it has no client-id (device owner %q)", c.DeviceOwner), nil
	case p.Host == "":
		p.GUID = nil
		return "it is not bound to a host", nil
	}
	// Refused whoever holds it: a port recorded with it before it was
	// reserved keeps it, but no change names it again.
	if checks.reserved != nil {
		if refusal := checks.reserved(*p.GUID); refusal != "" {
			return "", rejectf("port %s: %s", p.ID, refusal)
		}
	}
	// Checked before the GUID's holder, whose refusal would name another
	// network: a port bound to the wrong host learns nothing of who holds it.
	if checks.host != nil {
		if refusal := checks.host(p.Host, *p.GUID); refusal != "" {
			return "", rejectf("port %s: %s", p.ID, refusal)
		}
	}
	// A GUID can be in only one network's partition.
	if holder != nil && holder.ID != p.ID && holder.NetworkID != p.NetworkID {
		return "", rejectf("port %s: GUID %s is already in the partition of network %s (port %s); "+
			"a GUID can be in only one network's partition", p.ID, *p.GUID, holder.NetworkID, holder.ID)
	}
	// Without a Kubernetes range no Kubernetes pkey is recorded (the start
	// refuses a configuration that left one behind), and a port pays no query
	// for them; the partitions check still holds the file to the rule.
	if s.rules.anyKubernetesRange() {
		if kube, err := tx.q.KubernetesMembershipsOfGUID(ctx, tx.fabric, *p.GUID); err != nil {
			return "", err
		} else if len(kube) > 0 {
			return "", heldByAnother("Kubernetes pkey "+kube[0].Pkey.String(), "port %s: GUID %s is held by another owner; "+
				"a GUID is in one owner's partitions at a time", p.ID, *p.GUID)
		}
	}
	if s.rules.StaticMember != nil {
		if name, listed := s.rules.StaticMember(*p.GUID); listed {
			return "", rejectf("port %s: GUID %s is a member of partition %q of the partitions template; "+
				"a port in a network's partition may be in no other partition", p.ID, *p.GUID, name)
		}
	}
	if checks.limit != nil {
		if refusal := checks.limit(*p.GUID, s.rules.partitionOf(n)); refusal != "" {
			return "", rejectf("port %s on network %s: %s", p.ID, n.ID, refusal)
		}
	}
	return "", nil
}

// takeGUID gives p's GUID to p: another port of the same network that holds it
// (holder: a migration's re-add racing the old port's removal) keeps its
// record without it.
func takeGUID(ctx context.Context, tx tx, p Port, holder *Port, rev int64, now time.Time) error {
	if holder == nil || holder.ID == p.ID {
		return nil
	}
	other := *holder
	other.GUID, other.Revision = nil, rev
	return tx.UpsertPort(ctx, other, now)
}

func (r Rules) memberOf(n Network) string {
	if n.PKey == nil {
		return fmt.Sprintf("the flat partition %s", r.flatPKey())
	}
	return "pkey " + n.PKey.String()
}

// PortRemoval is a DELETE of a port.
type PortRemoval struct {
	PortID string
	// GUID is the one the request's body names (the port as the driver last
	// knew it), nil when the body carries no client-id.
	GUID      *fabric.GUID
	CreatedBy string
	Request   string
	// RequestID is the API request's ID (X-Request-ID): every job the change
	// records keeps it, so that a DBA reading a job finds the request's log lines.
	RequestID string
}

// RemovePort deletes a port and with it its GUID's membership.
//
// The driver's DELETE carries the port as it was: a DELETE that names a GUID
// the port no longer holds (a later change already moved the port to another
// GUID) speaks of a membership that is gone: the port and its current GUID
// stay, and it is answered with the port's newest job of its client, the one
// that moved it (unchanged.go), or, without one, with a job that completes
// at once. Otherwise the port is deleted, whatever
// host the body names: the driver sends a port's requests in order, so a
// re-add from a new host always follows its DELETE.
//
// The port must be recorded on the view's fabric (OtherFabricError
// otherwise, nothing written): DB.RemovePort routes the removal there.
func (s *Store) RemovePort(ctx context.Context, r PortRemoval) (Job, error) {
	return s.removePort(ctx, r)
}

// removePort is RemovePort on s's fabric; it refuses, writing nothing, a
// port recorded on another (OtherFabricError, which DB.RemovePort follows).
func (s *Store) removePort(ctx context.Context, r PortRemoval) (Job, error) {
	return s.record(ctx, s.groups, "remove port", r.PortID, func(ctx context.Context, tx *changeTx) (Job, error) {
		p, fab, err := tx.getPort(ctx, r.PortID)
		if err != nil {
			return Job{}, err
		}
		if fab != tx.fabric {
			// Another fabric's, or moved there since its change was routed
			// (DB.routed): nothing is written here.
			return Job{}, otherFabric(tx, ObjectPort, r.PortID, fab)
		}
		if r.GUID != nil && p.GUID != nil && *r.GUID != *p.GUID {
			// The port's newest job of the client, the one that moved it
			// off that GUID, answers it (unchanged.go).
			if same, err := tx.unchanged(ctx, ObjectPort, r.PortID, r.CreatedBy, p.Revision); err != nil || same {
				return Job{}, err
			}
			if _, err := tx.touches(ctx, false); err != nil {
				return Job{}, err
			}
			return Job{
				ObjectType: ObjectPort, ObjectID: r.PortID, NetworkID: p.NetworkID, Operation: OpRemovePort,
				Description: fmt.Sprintf("Remove port %s (GUID %s) from network %s", r.PortID, *r.GUID, p.NetworkID),
				Result: fmt.Sprintf("nothing to remove: port %s no longer holds GUID %s (it holds %s, which stays)",
					r.PortID, *r.GUID, *p.GUID),
				CreatedBy: r.CreatedBy, Request: r.Request, RequestID: r.RequestID,
			}, nil
		}
		if _, err := tx.touches(ctx, p.GUID != nil); err != nil {
			return Job{}, err
		}
		if p.GUID != nil {
			pkey, err := s.pkeyOfPort(ctx, tx, p, Network{})
			if err != nil {
				return Job{}, err
			}
			tx.promise(Place{GUID: *p.GUID, PKey: pkey, Want: WantAbsent}) // see promisePort
		}
		if _, err := tx.DeletePort(ctx, r.PortID); err != nil {
			return Job{}, err
		}
		guid, result := "no GUID", fmt.Sprintf("port %s is removed", r.PortID)
		if p.GUID != nil {
			guid = "GUID " + p.GUID.String()
			result = fmt.Sprintf("GUID %s is no member of network %s's partition", *p.GUID, p.NetworkID)
		}
		return Job{
			ObjectType: ObjectPort, ObjectID: r.PortID, NetworkID: p.NetworkID, Operation: OpRemovePort,
			Description: fmt.Sprintf("Remove port %s (%s) from network %s", r.PortID, guid, p.NetworkID),
			Result:      result,
			CreatedBy:   r.CreatedBy, Request: r.Request, RequestID: r.RequestID,
		}, nil
	})
}

func verb(op string) string {
	switch op {
	case OpCreateNetwork:
		return "Create network"
	case OpUpdateNetwork:
		return "Update network"
	case OpAddPort:
		return "Add port"
	case OpUpdatePort:
		return "Update port"
	}
	return op
}

// checkSameFabric refuses a network or port recorded on fabric fab ("": not
// recorded) when the change is another fabric's: Neutron never moves one, and
// a move would take its partition or membership from one subnet to another
// behind the other's back. to says what put the change on its fabric.
func checkSameFabric(tx *changeTx, what, id, fab, to string) error {
	if fab == "" || fab == tx.fabric {
		return nil
	}
	return rejectf("%s %s is recorded on fabric %s, and %s is fabric %s's: a %s cannot move between fabrics; delete it and create it again",
		what, id, fab, to, tx.fabric, what)
}

// movedPort refuses port id, recorded on fabric from, on a network of
// fabric to.
func movedPort(id, from, networkID, to string) error {
	return rejectf("port %s is recorded on fabric %s, and network %s is fabric %s's: a port cannot move between fabrics; "+
		"delete it and create it again", id, from, networkID, to)
}
