package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Kubernetes partitions are the pkeys ib-kubernetes gives pods' GUIDs through
// UFM's pkeys API. They live beside Neutron's networks, in the same
// transactions and revisions, and render into the same partitions file: a
// Kubernetes change bumps the revision and records a job like any other, and
// the same sweep proof completes it. Three rules keep the two apart: their
// pkeys come from Rules.KubernetesRange, which no VLAN may use; a GUID in a
// Neutron network's partition joins no Kubernetes pkey, and the reverse; and
// no GUID the partitions template lists joins either.

// Job operations and object type of a Kubernetes change.
const (
	OpCreateKubernetesPKey  = "Create pkey"
	OpAddKubernetesGUIDs    = "Add GUIDs to pkey"
	OpRemoveKubernetesGUIDs = "Remove GUIDs from pkey"
	OpDeleteKubernetesPKey  = "Delete pkey"
	OpSetKubernetesQoS      = "Set QoS of pkey"
	ObjectPKey              = "pkey"
)

// KubernetesMember is one GUID's membership in a Kubernetes pkey.
type KubernetesMember struct {
	GUID       fabric.GUID
	Membership fabric.Membership
	// Index0: ib-kubernetes asked for the pkey at index 0 of the GUID's pkey
	// table.
	Index0 bool
	// Revision is the change that last gave the GUID this membership (read
	// only; ignored in an addition): when a GUID holds more pkeys than its
	// switch port can, the applier leaves out the latest.
	Revision int64
}

// KubernetesPKey is one Kubernetes partition, its members in GUID order.
type KubernetesPKey struct {
	PKey     fabric.PKey
	IPoIB    bool
	Members  []KubernetesMember
	Revision int64
	// QoS is the partition's, as UFM's API set it (qos.go); the zero QoS
	// when no client set it.
	QoS fabric.QoS
	// Owner is the pkeys client that created it: its [ufm_pkeys:NAME] NAME,
	// "" for [ufm_pkeys] (principals.go).
	Owner string
	// PartitionName is the name its client gave it (UFM's partition_name);
	// "": none. Only the pkeys API's reads (KubernetesPKeys,
	// GetKubernetesPKey) read it; a snapshot leaves it "".
	PartitionName string
}

// KubernetesAddition is a POST of UFM's /resources/pkeys: GUIDs join the
// pkey, which is created if needed; a GUID already in it takes the
// membership and index0 asked now.
type KubernetesAddition struct {
	PKey    fabric.PKey
	Members []KubernetesMember
	// IPoIB is ip_over_ib; nil keeps a recorded pkey's and gives a new one
	// IPoIB, as UFM does.
	IPoIB *bool
	// QoS is what the request sets of the pkey's QoS: the rest stays as
	// recorded, or at UFM's defaults for a pkey whose QoS was never set.
	// Empty: the pkey's QoS stays as it is, unset for a new pkey.
	QoS QoSChange
	// PartitionName, when set, is recorded as the pkey's name (UFM's
	// partition_name); "" keeps a recorded one.
	PartitionName string
	// Replace makes Members the pkey's only members (UFM's PUT of
	// /resources/pkeys): a member not listed leaves it, in the same change.
	Replace   bool
	CreatedBy string
	Request   string
	RequestID string
}

// KubernetesRemoval is UFM's remove_guids_from_pkey: the GUIDs leave the
// pkey, which stays (possibly empty). A GUID that is not a member is nothing
// to remove.
type KubernetesRemoval struct {
	PKey      fabric.PKey
	GUIDs     []fabric.GUID
	CreatedBy string
	Request   string
	RequestID string
}

// KubernetesCreation is UFM's POST of /resources/pkeys/add: an empty pkey
// (such as the limited partition ib-kubernetes adds every pod to, which it
// expects to exist), or a recorded one's IPoIB changed.
type KubernetesCreation struct {
	PKey  fabric.PKey
	IPoIB bool
	// QoS is what the request sets of the pkey's QoS, as an addition's.
	QoS       QoSChange
	CreatedBy string
	Request   string
	RequestID string
}

// KubernetesDeletion is a DELETE of a pkey, with its members.
type KubernetesDeletion struct {
	PKey      fabric.PKey
	CreatedBy string
	Request   string
	RequestID string
}

// checkKubernetesPKey refuses a pkey Kubernetes may not use, by the rules
// that need no database.
func (r Rules) checkKubernetesPKey(pkey fabric.PKey) error {
	switch {
	case r.KubernetesRange.Empty():
		return rejectf("pkey %s: no %s pkey_range is configured, so Kubernetes may use no pkey", pkey, r.section("ufm_pkeys"))
	case pkey == fabric.DefaultPKey:
		return rejectf("pkey %s is the default partition's, which only the configuration writes", pkey)
	case !r.KubernetesRange.Contains(pkey):
		return rejectf("pkey %s is outside %s pkey_range %s, the only pkeys Kubernetes may use",
			pkey, r.section("ufm_pkeys"), r.KubernetesRange)
	case pkey == r.flatPKey():
		return rejectf("pkey %s is the flat networks' partition key (%s flat_pkey)", pkey, r.section("opensm"))
	}
	if r.StaticPKey != nil {
		if name, static := r.StaticPKey(pkey); static {
			return rejectf("pkey %s is the partition key of static partition %q of the partitions template, "+
				"which only the template writes", pkey, name)
		}
	}
	return nil
}

// AddKubernetesGUIDs records GUIDs as members of a Kubernetes pkey. A request
// the rules refuse records nothing.
//
// Unlike a Neutron change that touches no partition, a Kubernetes change
// takes a new revision: its answer, and last_updated, wait for the sweep
// that proves it, and ib-kubernetes holds its next change back until
// last_updated moves. One that asks for what is recorded (sameAddition) is
// answered with the pkey's newest job of its client, as a removal of
// nothing is (unchanged.go), which moves last_updated for it.
func (s *Store) AddKubernetesGUIDs(ctx context.Context, a KubernetesAddition) (Job, error) {
	if err := s.checkKubernetesAddition(a); err != nil {
		return Job{}, err
	}
	// The fabric and the reserved GUIDs are read now, not while the change
	// holds the revision's lock.
	reserved, err := s.reservedCheck(ctx)
	if err != nil {
		return Job{}, fmt.Errorf("add GUIDs to pkey %s: check they are no reserved ones: %w", a.PKey, err)
	}
	var limit PortCheck
	if s.rules.PortLimit != nil {
		var err error
		if limit, err = s.rules.PortLimit(); err != nil {
			return Job{}, fmt.Errorf("add GUIDs to pkey %s: check their switch ports' pkey tables: %w", a.PKey, err)
		}
	}
	return s.record(ctx, s.kubeGroups, "add GUIDs to pkey", a.PKey.String(), func(ctx context.Context, tx *changeTx) (Job, error) {
		if err := checkPKeyNotNeutron(ctx, tx, a.PKey); err != nil {
			return Job{}, err
		}
		before, known, mine, err := s.ownPKey(ctx, tx.q, a.PKey)
		if err != nil {
			return Job{}, err
		}
		if known && !mine {
			return Job{}, forbiddenf("pkey %s is another pkeys client's: a client changes only the pkeys it created", a.PKey)
		}
		// A replaced member leaves before the limits are checked: they
		// count the members the pkey keeps.
		var dropped []fabric.GUID
		if a.Replace && known {
			if dropped, err = dropUnlistedMembers(ctx, tx, a); err != nil {
				return Job{}, err
			}
		}
		added, state, same, err := s.checkAddedMembers(ctx, tx, a, portChecks{limit: limit, reserved: reserved})
		if err != nil {
			return Job{}, err
		}
		if same && known && len(dropped) == 0 && sameAddition(a, before) {
			if same, err := tx.unchangedKubernetes(ctx, a.PKey.String(), a.CreatedBy, max(state, before.Revision)); err != nil || same {
				return Job{}, err
			}
		}
		if err := s.checkKubernetesMembers(ctx, tx, a.PKey, added); err != nil {
			return Job{}, err
		}
		rev, err := tx.touches(ctx, true)
		if err != nil {
			return Job{}, err
		}
		ipoib := true
		switch {
		case a.IPoIB != nil:
			ipoib = *a.IPoIB
		case known:
			ipoib = before.IpOverIb
		}
		if err := s.upsertAddedPKey(ctx, tx, a, ipoib, rev); err != nil {
			return Job{}, err
		}
		guids := make([]fabric.GUID, 0, len(a.Members))
		for _, m := range a.Members {
			if err := tx.q.UpsertKubernetesMember(ctx, driver.UpsertKubernetesMemberParams{Fabric: tx.fabric, PKey: a.PKey, GUID: m.GUID,
				Membership: string(m.Membership), Index0: m.Index0, Revision: rev, Now: tx.now}); err != nil {
				return Job{}, err
			}
			guids = append(guids, m.GUID)
			tx.promise(Place{GUID: m.GUID, PKey: a.PKey, Want: wantOf(m.Membership)})
		}
		// The pkey decides the GUIDs' partitions from now on (adopted.go).
		released, err := releaseGUIDs(ctx, tx, guids, rev)
		if err != nil {
			return Job{}, err
		}
		return s.kubernetesArrived(ctx, tx, rev, !known, a.PKey, a.job(releasedText("they", released), dropped))
	})
}

// checkAddedMembers checks each member of addition a (checkKubernetesMember)
// and counts those not yet members (added). same says whether every one is
// a member already with the membership and index0 a asks, and state is the
// newest revision of those members' rows.
func (s *Store) checkAddedMembers(ctx context.Context, tx *changeTx, a KubernetesAddition, checks portChecks) (added int, state int64, same bool, err error) {
	same = true
	for _, m := range a.Members {
		recorded, err := s.checkKubernetesMember(ctx, tx, a.PKey, m, checks)
		if err != nil {
			return 0, 0, false, err
		}
		if recorded == nil {
			added++
			same = false
			continue
		}
		same = same && fabric.Membership(recorded.Membership) == m.Membership && recorded.Index0 == m.Index0
		state = max(state, recorded.Revision)
	}
	return added, state, same, nil
}

// sameAddition says whether addition a asks nothing of its pkey (as
// recorded: before) beyond its members: the same IPoIB, if any, and QoS,
// if any, and no name (which would need a read to compare).
func sameAddition(a KubernetesAddition, before driver.KubernetesPKey) bool {
	return (a.IPoIB == nil || *a.IPoIB == before.IpOverIb) && sameQoS(a.QoS, before) && a.PartitionName == ""
}

// sameQoS says whether QoS change c leaves pkey row p's QoS as it is: it
// sets nothing, or what a client set already.
func sameQoS(c QoSChange, p driver.KubernetesPKey) bool {
	return c.Empty() || (p.QosSet && c.on(recordedQoS(p)) == recordedQoS(p))
}

// upsertAddedPKey records the pkey of addition a at revision rev: created
// or updated with ipoib, then its QoS and its name when a sets them.
func (s *Store) upsertAddedPKey(ctx context.Context, tx *changeTx, a KubernetesAddition, ipoib bool, rev int64) error {
	if err := tx.q.UpsertKubernetesPKey(ctx, s.FabricName(), a.PKey, ipoib, rev, tx.now, s.owner()); err != nil {
		return err
	}
	if err := setQoS(ctx, tx, a.PKey, a.QoS, rev); err != nil {
		return err
	}
	if a.PartitionName != "" {
		if err := tx.q.SetKubernetesPartitionName(ctx, &a.PartitionName, tx.fabric, a.PKey); err != nil {
			return err
		}
	}
	return nil
}

// job is an addition's job: released is what it says of the GUIDs' adopted
// partitions, dropped the members a replacement took out.
func (a KubernetesAddition) job(released string, dropped []fabric.GUID) Job {
	j := Job{
		Operation:   OpAddKubernetesGUIDs,
		Description: fmt.Sprintf("Add %s to Kubernetes pkey %s", memberList(a.Members), a.PKey),
		Result:      fmt.Sprintf("%s in Kubernetes pkey %s", memberList(a.Members), a.PKey) + released,
		CreatedBy:   a.CreatedBy, Request: a.Request, RequestID: a.RequestID,
	}
	if a.Replace {
		// The operation stays an addition's: the capacity check fails a job
		// that adds GUIDs their switch ports cannot hold.
		j.Description = fmt.Sprintf("Set the members of Kubernetes pkey %s to %s", a.PKey, memberList(a.Members))
		if len(dropped) > 0 {
			j.Result += fmt.Sprintf("; %s are no members any more", guidList(dropped))
		}
	}
	return j
}

// dropUnlistedMembers takes out of a.PKey the members a (a replacement) does
// not list, and promises them absent; it returns them.
func dropUnlistedMembers(ctx context.Context, tx *changeTx, a KubernetesAddition) ([]fabric.GUID, error) {
	members, err := tx.q.ListKubernetesMembersOfPKey(ctx, tx.fabric, a.PKey)
	if err != nil {
		return nil, fmt.Errorf("the members of pkey %s: %w", a.PKey, err)
	}
	listed := make(map[fabric.GUID]bool, len(a.Members))
	for _, m := range a.Members {
		listed[m.GUID] = true
	}
	var dropped []fabric.GUID
	for _, m := range members {
		if listed[m.Guid] {
			continue
		}
		if _, err := tx.q.DeleteKubernetesMember(ctx, tx.fabric, a.PKey, m.Guid); err != nil {
			return nil, err
		}
		dropped = append(dropped, m.Guid)
		tx.promise(Place{GUID: m.Guid, PKey: a.PKey, Want: WantAbsent})
	}
	return dropped, nil
}

// checkKubernetesAddition refuses an addition the rules refuse on its own,
// before any read: a pkey out of range, no GUIDs, a GUID that is no port's or
// listed twice, an unknown membership, or a GUID of the partitions template.
func (s *Store) checkKubernetesAddition(a KubernetesAddition) error {
	if err := s.rules.checkKubernetesPKey(a.PKey); err != nil {
		return err
	}
	if err := a.QoS.check(a.PKey); err != nil {
		return err
	}
	if len(a.Members) == 0 {
		return rejectf("pkey %s: no GUIDs to add", a.PKey)
	}
	seen := map[fabric.GUID]bool{}
	for _, m := range a.Members {
		switch {
		case m.GUID == 0 || m.GUID == ^fabric.GUID(0):
			return rejectf("pkey %s: %s is not a port GUID", a.PKey, ufmGUID(m.GUID))
		case seen[m.GUID]:
			return rejectf("pkey %s: GUID %s is listed twice", a.PKey, ufmGUID(m.GUID))
		case m.Membership != fabric.Full && m.Membership != fabric.Limited:
			return rejectf("pkey %s: GUID %s: membership %q: want full or limited", a.PKey, ufmGUID(m.GUID), m.Membership)
		}
		seen[m.GUID] = true
		if s.rules.StaticMember != nil {
			if name, listed := s.rules.StaticMember(m.GUID); listed {
				return rejectf("pkey %s: GUID %s is a member of partition %q of the partitions template, "+
					"which only the template writes", a.PKey, ufmGUID(m.GUID), name)
			}
		}
	}
	return nil
}

// CreateKubernetesPKey records a Kubernetes pkey without members, or sets a
// recorded one's IPoIB (its members stay).
func (s *Store) CreateKubernetesPKey(ctx context.Context, c KubernetesCreation) (Job, error) {
	if err := s.rules.checkKubernetesPKey(c.PKey); err != nil {
		return Job{}, err
	}
	if err := c.QoS.check(c.PKey); err != nil {
		return Job{}, err
	}
	return s.record(ctx, s.kubeGroups, "create pkey", c.PKey.String(), func(ctx context.Context, tx *changeTx) (Job, error) {
		if err := checkPKeyNotNeutron(ctx, tx, c.PKey); err != nil {
			return Job{}, err
		}
		before, known, mine, err := s.ownPKey(ctx, tx.q, c.PKey)
		if err != nil {
			return Job{}, err
		} else if known && !mine {
			return Job{}, forbiddenf("pkey %s is another pkeys client's: a client changes only the pkeys it created", c.PKey)
		}
		if known && before.IpOverIb == c.IPoIB && sameQoS(c.QoS, before) {
			// Asks for what is recorded (unchanged.go).
			if same, err := tx.unchangedKubernetes(ctx, c.PKey.String(), c.CreatedBy, before.Revision); err != nil || same {
				return Job{}, err
			}
		}
		rev, err := tx.touches(ctx, true)
		if err != nil {
			return Job{}, err
		}
		if err := tx.q.UpsertKubernetesPKey(ctx, s.FabricName(), c.PKey, c.IPoIB, rev, tx.now, s.owner()); err != nil {
			return Job{}, err
		}
		if err := setQoS(ctx, tx, c.PKey, c.QoS, rev); err != nil {
			return Job{}, err
		}
		// A pkey recorded already keeps its members, whose statement the
		// change rewrites (its ip_over_ib): they stay as they are.
		if err := promiseKubernetesMembers(ctx, tx, c.PKey, false); err != nil {
			return Job{}, err
		}
		return s.kubernetesArrived(ctx, tx, rev, !known, c.PKey, Job{
			Operation:   OpCreateKubernetesPKey,
			Description: fmt.Sprintf("Create Kubernetes pkey %s (ip_over_ib %t)", c.PKey, c.IPoIB),
			Result:      fmt.Sprintf("Kubernetes pkey %s is in place (ip_over_ib %t)", c.PKey, c.IPoIB),
			CreatedBy:   c.CreatedBy, Request: c.Request, RequestID: c.RequestID,
		})
	})
}

// kubernetesChanged ends a change of Kubernetes pkey pkey at revision rev:
// the Kubernetes partitions are marked changed (the applier rewrites them),
// and j, the change's job, is about pkey.
func kubernetesChanged(ctx context.Context, tx *changeTx, rev int64, pkey fabric.PKey, j Job) (Job, error) {
	if err := tx.q.MarkKubernetesChanged(ctx, tx.fabric, rev); err != nil {
		return Job{}, err
	}
	j.ObjectType, j.ObjectID = ObjectPKey, pkey.String()
	return j, nil
}

// kubernetesArrived is kubernetesChanged for a change that may create
// pkey (created: it was not recorded before): a pkey created where an
// adopted partition is takes that partition over, and its job says so and
// how the partition's flags change, as a network's does (takeOverText).
func (s *Store) kubernetesArrived(ctx context.Context, tx *changeTx, rev int64, created bool, pkey fabric.PKey, j Job) (Job, error) {
	if created {
		row, err := tx.q.GetKubernetesPKey(ctx, tx.fabric, pkey)
		if err != nil {
			return Job{}, fmt.Errorf("read pkey %s: %w", pkey, err)
		}
		members, err := tx.q.ListKubernetesMembersOfPKey(ctx, tx.fabric, pkey)
		if err != nil {
			return Job{}, fmt.Errorf("the members of pkey %s: %w", pkey, err)
		}
		owner := partitions.KubernetesPartition{PKey: pkey, IPoIB: row.IpOverIb, QoS: qosOf(row)}
		for _, m := range members {
			owner.Members = append(owner.Members, partitions.KubernetesMember{GUID: m.Guid,
				Membership: partitions.Membership(m.Membership), Index0: m.Index0})
		}
		takeOver, err := s.takeOverText(ctx, tx, partitions.State{Kubernetes: []partitions.KubernetesPartition{owner}}, pkey)
		if err != nil {
			return Job{}, err
		}
		j.Result += takeOver
	}
	return kubernetesChanged(ctx, tx, rev, pkey, j)
}

// promiseKubernetesMembers states the places of pkey's members as recorded
// now: as they are, or absent when they leave it (read before they are
// deleted; absent as in RemoveKubernetesGUIDs).
func promiseKubernetesMembers(ctx context.Context, tx *changeTx, pkey fabric.PKey, leave bool) error {
	members, err := tx.q.ListKubernetesMembersOfPKey(ctx, tx.fabric, pkey)
	if err != nil {
		return fmt.Errorf("the members of pkey %s: %w", pkey, err)
	}
	for _, m := range members {
		want := wantOf(fabric.Membership(m.Membership))
		if leave {
			want = WantAbsent
		}
		tx.promise(Place{GUID: m.Guid, PKey: pkey, Want: want})
	}
	return nil
}

// checkPKeyNotNeutron refuses a Kubernetes pkey that a Neutron network
// recorded before the range was configured holds.
func checkPKeyNotNeutron(ctx context.Context, tx *changeTx, pkey fabric.PKey) error {
	n, err := tx.GetNetworkByPKey(ctx, pkey)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return heldByAnother("OpenStack network "+n.ID, "pkey %s is held by another owner", pkey)
}

// checkKubernetesMembers refuses added new members of pkey when they would
// pass [ufm_pkeys] max_members_per_pkey or max_members. It runs in the change
// transaction, under the revision's lock: two changes each under a limit but
// over it together are judged one after the other.
func (s *Store) checkKubernetesMembers(ctx context.Context, tx *changeTx, pkey fabric.PKey, added int) error {
	perPKey, total := s.rules.KubernetesMaxMembersPerPKey, s.rules.KubernetesMaxMembers
	if added == 0 || (perPKey <= 0 && total <= 0) {
		return nil
	}
	if perPKey > 0 {
		n, err := tx.q.CountKubernetesMembersOfPKey(ctx, s.FabricName(), pkey)
		if err != nil {
			return err
		}
		if n+int64(added) > int64(perPKey) {
			return rejectf("pkey %s has %d members; %d more would pass %s max_members_per_pkey %d",
				pkey, n, added, s.rules.section("ufm_pkeys"), perPKey)
		}
	}
	if total > 0 {
		n, err := tx.q.CountKubernetesMembers(ctx, s.FabricName(), s.owner())
		if err != nil {
			return err
		}
		if n+int64(added) > int64(total) {
			return rejectf("pkey %s: the Kubernetes pkeys have %d members in all; %d more would pass "+
				"%s max_members %d", pkey, n, added, s.rules.section("ufm_pkeys"), total)
		}
	}
	return nil
}

// checkKubernetesMember refuses a GUID that cannot join Kubernetes pkey pkey:
// it is reserved, it is in a Neutron network's partition, it would have index
// 0 in two pkeys, or its switch port's pkey table would be full. member says
// its row in pkey, nil when it is no member yet.
func (s *Store) checkKubernetesMember(ctx context.Context, tx *changeTx, pkey fabric.PKey, m KubernetesMember, checks portChecks) (member *driver.KubernetesMember, err error) {
	guid := m.GUID
	// Refused even as a member already: a GUID reserved after it joined
	// stays, but no change names it again.
	if refusal := checks.reserved(guid); refusal != "" {
		return nil, rejectf("pkey %s: %s", pkey, refusal)
	}
	p, err := tx.q.GetPortByGUID(ctx, s.FabricName(), &guid)
	switch {
	case err == nil:
		return nil, heldByAnother(fmt.Sprintf("OpenStack network %s (port %s)", p.NetworkID, p.ID),
			"pkey %s: GUID %s is held by another owner; a GUID is in one owner's partitions at a time", pkey, ufmGUID(guid))
	case !driver.IsNoRows(err):
		return nil, err
	}
	others, err := tx.q.KubernetesMembershipsOfGUID(ctx, s.FabricName(), guid)
	if err != nil {
		return nil, err
	}
	if err := s.checkGUIDOwners(ctx, tx, pkey, guid, others); err != nil {
		return nil, err
	}
	pkeys := []fabric.PKey{pkey}
	for _, o := range others {
		if o.Pkey == pkey {
			member = &o
			continue
		}
		pkeys = append(pkeys, o.Pkey)
		if m.Index0 && o.Index0 {
			return nil, rejectf("pkey %s: GUID %s already has index 0 in Kubernetes pkey %s; a port has one index 0",
				pkey, ufmGUID(guid), o.Pkey)
		}
	}
	if checks.limit != nil {
		if refusal := checks.limit(guid, pkeys...); refusal != "" {
			return nil, rejectf("pkey %s: GUID %s: %s", pkey, ufmGUID(guid), refusal)
		}
	}
	return member, nil
}

// RemoveKubernetesGUIDs takes GUIDs out of a Kubernetes pkey. GUIDs that are
// not members, or a pkey that is not recorded, are nothing to remove: such a
// change is answered with the newest job of the pkey that its client
// created (unchanged.go), and recorded and proven like any other only when
// there is none or it failed (for last_updated's sake).
func (s *Store) RemoveKubernetesGUIDs(ctx context.Context, r KubernetesRemoval) (Job, error) {
	if err := s.rules.checkKubernetesPKey(r.PKey); err != nil {
		return Job{}, err
	}
	if len(r.GUIDs) == 0 {
		return Job{}, rejectf("pkey %s: no GUIDs to remove", r.PKey)
	}
	return s.record(ctx, s.kubeGroups, "remove GUIDs from pkey", r.PKey.String(), func(ctx context.Context, tx *changeTx) (Job, error) {
		// Another's pkey is no pkey of this client's: nothing to remove, as
		// from an unknown one.
		_, _, mine, err := s.ownPKey(ctx, tx.q, r.PKey)
		if err != nil {
			return Job{}, err
		}
		removed, absent, err := s.removeMembers(ctx, tx, r, mine)
		if err != nil {
			return Job{}, err
		}
		gone := false
		if mine {
			if gone, err = s.deleteIfEmpty(ctx, tx, r.PKey); err != nil {
				return Job{}, err
			}
		}
		if len(removed) == 0 && !gone {
			if same, err := tx.unchangedKubernetes(ctx, r.PKey.String(), r.CreatedBy, 0); err != nil || same {
				return Job{}, err
			}
		}
		rev, err := tx.touches(ctx, true)
		if err != nil {
			return Job{}, err
		}
		result := fmt.Sprintf("GUIDs %s are no members of Kubernetes pkey %s", summarise(removed, len(removed)), r.PKey)
		if len(absent) > 0 {
			result += fmt.Sprintf(" (nothing to remove for %s)", summarise(absent, len(absent)))
		}
		if len(removed) == 0 {
			result = fmt.Sprintf("nothing to remove: %s are no members of Kubernetes pkey %s",
				summarise(absent, len(absent)), r.PKey)
		}
		if gone {
			result += fmt.Sprintf("; pkey %s had no member left and is removed (%s delete_empty)",
				r.PKey, s.rules.section("ufm_pkeys"))
		}
		return kubernetesChanged(ctx, tx, rev, r.PKey, Job{
			Operation:   OpRemoveKubernetesGUIDs,
			Description: fmt.Sprintf("Remove GUIDs %s from Kubernetes pkey %s", guidList(r.GUIDs), r.PKey),
			Result:      result,
			CreatedBy:   r.CreatedBy, Request: r.Request, RequestID: r.RequestID,
		})
	})
}

// removeMembers deletes the GUIDs of r that are members of its pkey (none
// when the pkey is not the client's: mine) and promises them absent; it
// returns those removed and those that were no members, as UFM writes them.
func (s *Store) removeMembers(ctx context.Context, tx *changeTx, r KubernetesRemoval, mine bool) (removed, absent []string, err error) {
	for _, g := range r.GUIDs {
		var n int64
		if mine {
			if n, err = tx.q.DeleteKubernetesMember(ctx, s.FabricName(), r.PKey, g); err != nil {
				return nil, nil, err
			}
		}
		if n == 0 {
			// Not a member: the change promises nothing of it (an adopted
			// member of the pkey, which ib-kubernetes never added, stays in
			// it).
			absent = append(absent, ufmGUID(g))
		} else {
			// A member's GUID is in no adopted partition (releaseGUIDs): it
			// leaves the pkey.
			removed = append(removed, ufmGUID(g))
			tx.promise(Place{GUID: g, PKey: r.PKey, Want: WantAbsent})
		}
	}
	return removed, absent, nil
}

// DeleteKubernetesPKey deletes a Kubernetes pkey and its members;
// ErrNotFound when it is not recorded.
func (s *Store) DeleteKubernetesPKey(ctx context.Context, d KubernetesDeletion) (Job, error) {
	if err := s.rules.checkKubernetesPKey(d.PKey); err != nil {
		return Job{}, err
	}
	return s.record(ctx, s.kubeGroups, "delete pkey", d.PKey.String(), func(ctx context.Context, tx *changeTx) (Job, error) {
		// Another's pkey is not found, as an unknown one: a DELETE tells
		// nothing of the pkeys of other clients.
		if _, _, mine, err := s.ownPKey(ctx, tx.q, d.PKey); err != nil || !mine {
			return Job{}, cmpOr(err, ErrNotFound)
		}
		rev, err := tx.touches(ctx, true)
		if err != nil {
			return Job{}, err
		}
		if err := promiseKubernetesMembers(ctx, tx, d.PKey, true); err != nil {
			return Job{}, err
		}
		n, err := tx.q.DeleteKubernetesMembersOfPKey(ctx, s.FabricName(), d.PKey)
		if err != nil {
			return Job{}, err
		}
		if _, err := tx.q.DeleteKubernetesPKey(ctx, s.FabricName(), d.PKey); err != nil {
			return Job{}, err
		}
		// Its adopted members leave with it (adopted.go).
		if _, err := endAdoption(ctx, tx, d.PKey); err != nil {
			return Job{}, err
		}
		return kubernetesChanged(ctx, tx, rev, d.PKey, Job{
			Operation:   OpDeleteKubernetesPKey,
			Description: fmt.Sprintf("Delete Kubernetes pkey %s", d.PKey),
			Result:      fmt.Sprintf("Kubernetes pkey %s is removed, and its members (%d)", d.PKey, n),
			CreatedBy:   d.CreatedBy, Request: d.Request, RequestID: d.RequestID,
		})
	})
}

// KubernetesPKeys lists every Kubernetes pkey with its members and its
// partition name, in one read-only transaction.
func (s *Store) KubernetesPKeys(ctx context.Context) ([]KubernetesPKey, error) {
	return readOnly(ctx, s, "list Kubernetes pkeys", func(ctx context.Context, q driver.Queries) ([]KubernetesPKey, error) {
		all, err := kubernetesPKeys(ctx, s.FabricName(), q)
		if err != nil {
			return nil, err
		}
		own := all[:0]
		for _, p := range all {
			if p.Owner == s.owner() {
				own = append(own, p)
			}
		}
		return own, namePKeys(ctx, s.FabricName(), q, own)
	})
}

func kubernetesPKeys(ctx context.Context, fab string, q driver.Queries) ([]KubernetesPKey, error) {
	pkeys, err := q.ListKubernetesPKeys(ctx, fab)
	if err != nil {
		return nil, err
	}
	members, err := q.ListKubernetesMembers(ctx, fab)
	if err != nil {
		return nil, err
	}
	out := make([]KubernetesPKey, len(pkeys))
	at := make(map[fabric.PKey]int, len(pkeys))
	for i, p := range pkeys {
		out[i] = kubernetesPKey(p, []KubernetesMember{})
		at[p.Pkey] = i
	}
	for _, m := range members {
		i, ok := at[m.Pkey]
		if !ok {
			return nil, fmt.Errorf("GUID %s is a member of pkey %s, which is not recorded", m.Guid, m.Pkey)
		}
		out[i].Members = append(out[i].Members, kubernetesMember(m))
	}
	return out, nil
}

// GetKubernetesPKey returns one Kubernetes pkey with its members;
// ErrNotFound when it is not recorded.
func (s *Store) GetKubernetesPKey(ctx context.Context, pkey fabric.PKey) (KubernetesPKey, error) {
	return readOnly(ctx, s, "read pkey "+pkey.String(), func(ctx context.Context, q driver.Queries) (KubernetesPKey, error) {
		p, _, mine, err := s.ownPKey(ctx, q, pkey)
		if err != nil || !mine {
			// Another's reads as an unknown one.
			return KubernetesPKey{}, cmpOr(err, ErrNotFound)
		}
		members, err := q.ListKubernetesMembersOfPKey(ctx, s.FabricName(), pkey)
		if err != nil {
			return KubernetesPKey{}, err
		}
		one := []KubernetesPKey{kubernetesPKey(p, driver.Convert(members, kubernetesMember))}
		return one[0], namePKeys(ctx, s.FabricName(), q, one)
	})
}

// kubernetesPKey is a recorded pkey with its members.
func kubernetesPKey(p driver.KubernetesPKey, members []KubernetesMember) KubernetesPKey {
	return KubernetesPKey{PKey: p.Pkey, IPoIB: p.IpOverIb, Revision: p.Revision, Members: members, Owner: p.Owner,
		QoS: qosOf(p)}
}

// namePKeys sets the partition names their clients gave pkeys. Only the
// pkeys API's reads take them: a snapshot (the partitions file) never names a
// partition so.
func namePKeys(ctx context.Context, fab string, q driver.Queries, pkeys []KubernetesPKey) error {
	names, err := q.ListKubernetesPartitionNames(ctx, fab)
	if err != nil {
		return fmt.Errorf("the pkeys' partition names: %w", err)
	}
	byPKey := make(map[fabric.PKey]string, len(names))
	for _, n := range names {
		if n.PartitionName != nil {
			byPKey[n.Pkey] = *n.PartitionName
		}
	}
	for i := range pkeys {
		pkeys[i].PartitionName = byPKey[pkeys[i].PKey]
	}
	return nil
}

// KubernetesLastUpdated is when OpenSM was last seen applying a Kubernetes
// change (UFM's last_updated); nil before the first.
func (s *Store) KubernetesLastUpdated(ctx context.Context) (*time.Time, error) {
	st, err := s.d.Queries(ctx).KubernetesState(ctx, s.FabricName())
	if err != nil {
		return nil, fmt.Errorf("read Kubernetes state: %w", err)
	}
	if st.LastUpdated == nil {
		return nil, nil
	}
	t := st.LastUpdated.UTC()
	return &t, nil
}

func kubernetesMember(m driver.KubernetesMember) KubernetesMember {
	return KubernetesMember{GUID: m.Guid, Membership: fabric.Membership(m.Membership), Index0: m.Index0,
		Revision: m.Revision}
}

// ufmGUID is a GUID as UFM and ib-kubernetes write it: 16 hex digits.
func ufmGUID(g fabric.GUID) string { return fmt.Sprintf("%016x", uint64(g)) }

// A Kubernetes change may carry thousands of GUIDs; its job's texts (what
// GET app/jobs/N, --status and a DBA read) name the first few and count the
// rest. The job's request keeps every one, as the client sent it.
const maxListedGUIDs = 8

// memberList is "GUIDs <guid> (<membership>), ...", summarised.
func memberList(ms []KubernetesMember) string {
	n := min(len(ms), maxListedGUIDs)
	parts := make([]string, n)
	for i, m := range ms[:n] {
		parts[i] = fmt.Sprintf("%s (%s)", ufmGUID(m.GUID), m.Membership)
	}
	return "GUIDs " + summarise(parts, len(ms))
}

// guidList is "<guid>, ...", summarised.
func guidList(gs []fabric.GUID) string {
	n := min(len(gs), maxListedGUIDs)
	parts := make([]string, n)
	for i, g := range gs[:n] {
		parts[i] = ufmGUID(g)
	}
	return summarise(parts, len(gs))
}

// summarise lists the first maxListedGUIDs of a list of total items (listed:
// at least those) and counts the rest.
func summarise(listed []string, total int) string {
	if total <= maxListedGUIDs {
		return strings.Join(listed, ", ")
	}
	return fmt.Sprintf("%s and %d more (%d in all)", strings.Join(listed[:maxListedGUIDs], ", "),
		total-maxListedGUIDs, total)
}

// KubernetesConflicts returns, for each recorded Kubernetes pkey that this
// configuration would refuse if it were asked for now, why: the range moved
// away from it, or a static partition or flat_pkey took it.
func (r Rules) KubernetesConflicts(pkeys []KubernetesPKey) []string {
	var out []string
	for _, p := range pkeys {
		cr, why, ok := r.clientOf(p)
		if !ok {
			out = append(out, why)
			continue
		}
		if err := cr.checkKubernetesPKey(p.PKey); err != nil {
			out = append(out, "Kubernetes "+err.Error())
		}
	}
	return out
}
