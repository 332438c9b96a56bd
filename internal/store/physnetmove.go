package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Moving a physical network to another fabric. A network belongs to the
// fabric its physnet routes to when it is recorded (RecordNetwork); an
// operator who then gives the physnet to another fabric leaves its networks
// on the old one, whose changes are refused (PhysnetMovedError) until
// MovePhysnet moves them: their rows, their ports and memberships go to the
// fabric the configuration now gives the physnet, in one transaction that
// takes every fabric's revision, with a job on each fabric it changes, so
// that both appliers apply the move and prove it.

// Job object and operation of a move.
const (
	ObjectPhysnet = "physnet"
	OpMovePhysnet = "Move physical network"
)

// PhysnetMove asks for every network recorded on physical network Physnet,
// on another fabric than the one the configuration now gives it, to move
// there.
type PhysnetMove struct {
	Physnet string
	// DryRun checks the move and says what it would do, and writes nothing.
	DryRun    bool
	CreatedBy string
}

// MovedNetwork is one network a move took to its new fabric.
type MovedNetwork struct {
	Network Network // as recorded on its new fabric
	From    string  // the fabric it was recorded on
	Ports   int     // its ports, moved with it
	Members int     // its ports holding a GUID on its new fabric
	// Note says what the move could not carry over, "" when nothing.
	Note string
}

// PhysnetMoveOutcome is what a move did, or with DryRun would do.
type PhysnetMoveOutcome struct {
	To       string // the fabric the configuration gives the physnet
	Networks []MovedNetwork
	// Jobs are the move's jobs, one on each fabric it changed (the old ones
	// in name order, then the new one); none with DryRun.
	Jobs []Job
	// Places are, by job id, the places each job promises (recorded with
	// it, places.go): the members leaving the old fabric's partitions
	// (WantAbsent) and joining the new one's (WantFull).
	Places map[int64][]Place
}

// errDryRun ends a dry run's transaction: nothing it wrote is kept.
var errDryRun = errors.New("dry run: nothing is written")

// movePhysnet moves every network recorded on m.Physnet on another fabric to
// the fabric the configuration gives m.Physnet, with its ports and their
// memberships, in one transaction: all of it or nothing, so that a move cut
// short is finished by running it again. The transaction takes every
// configured fabric's revision (in name order, as no other change takes two)
// before it reads, so that no change of those networks commits between its
// checks and its writes. It is refused (RejectedError, nothing written) when
// the new fabric's rules refuse a network (a VLAN ID another network, a
// Kubernetes pkey, flat_pkey or a static partition uses there) or a member (a
// GUID another port or a Kubernetes pkey holds there, or the partitions
// template lists). An outcome without networks: nothing to move.
//
// s is the view of the fabric the configuration gives m.Physnet (DB.MovePhysnet).
func (s *Store) movePhysnet(ctx context.Context, m PhysnetMove) (PhysnetMoveOutcome, error) {
	to := s
	fabrics := s.db.FabricNames()
	slices.Sort(fabrics)
	var out PhysnetMoveOutcome
	err := s.d.InChangeTx(ctx, func(q driver.ChangeTx) error {
		out = PhysnetMoveOutcome{To: to.FabricName(), Places: map[int64][]Place{}}
		mv := &physnetMove{s: s, to: to, m: m, out: &out, txs: map[string]*changeTx{}}
		now := s.now()
		for _, name := range fabrics {
			next, err := q.BumpRevision(ctx, name)
			if err != nil {
				return fmt.Errorf("fabric %s: bump revision: %w", name, err)
			}
			mv.txs[name] = &changeTx{tx: tx{q, name}, later: tx{q.Later(), name}, rev: next, revKnown: true, now: now}
		}
		if err := mv.run(ctx); err != nil {
			return err
		}
		for _, name := range fabrics {
			if c := mv.txs[name]; !c.decided || c.noOp {
				rev := c.rev
				if !c.decided {
					rev-- // not changed by the move: its revision stays
				}
				if err := q.SetRevision(ctx, name, rev); err != nil {
					return fmt.Errorf("fabric %s: set revision: %w", name, err)
				}
			}
		}
		if m.DryRun {
			return errDryRun
		}
		// The last job's places are held back (changeTx.job): sent now.
		return q.Flush(ctx)
	})
	switch {
	case errors.Is(err, errDryRun), errors.Is(err, errNothingToMove):
		out.Jobs, out.Places = nil, nil
		return out, nil
	case err != nil:
		return PhysnetMoveOutcome{}, fmt.Errorf("move physical network %s to fabric %s: %w", m.Physnet, to.FabricName(), err)
	}
	return out, nil
}

// errNothingToMove ends a move that found no network to move.
var errNothingToMove = errors.New("nothing to move")

// physnetMove is one run of a move's transaction.
type physnetMove struct {
	s   *Store
	to  *Store // the new fabric's view: its rules decide
	m   PhysnetMove
	out *PhysnetMoveOutcome
	txs map[string]*changeTx // every configured fabric's, at its taken revision
}

// movedRows is one network to move, as recorded and as it will be.
type movedRows struct {
	from         string
	before, then Network
	ports        []Port
}

// run reads the networks to move, checks them against the new fabric's
// rules, writes them there, and inserts each fabric's job.
func (mv *physnetMove) run(ctx context.Context) error {
	moves, err := mv.read(ctx)
	if err != nil {
		return err
	}
	if len(moves) == 0 {
		return errNothingToMove
	}
	target := mv.txs[mv.to.FabricName()]
	if err := mv.check(ctx, target, moves); err != nil {
		return err
	}
	managed := func(f func(movedRows) bool) bool { return slices.ContainsFunc(moves, f) }
	// A fabric whose partitions the move changes takes a new revision; one
	// it only moves rows of networks without a partition from or to keeps
	// its own (a job complete at once); one it does not touch, decides
	// nothing.
	for name, c := range mv.txs {
		var err error
		switch {
		case c == target:
			_, err = c.touches(ctx, managed(func(r movedRows) bool { return r.then.Managed }))
		case managed(func(r movedRows) bool { return r.from == name }):
			_, err = c.touches(ctx, managed(func(r movedRows) bool { return r.from == name && r.before.Managed }))
		}
		if err != nil {
			return err
		}
	}
	for _, r := range moves {
		if err := mv.write(ctx, mv.txs[r.from], target, r); err != nil {
			return fmt.Errorf("network %s: %w", r.before.ID, err)
		}
	}
	return mv.jobs(ctx, target, moves)
}

// read reads the networks recorded on the physnet on every other fabric,
// with their ports, and what each becomes on the new fabric.
func (mv *physnetMove) read(ctx context.Context) ([]movedRows, error) {
	var moves []movedRows
	for _, name := range slices.Sorted(maps.Keys(mv.txs)) {
		if name == mv.to.FabricName() {
			continue
		}
		c := mv.txs[name]
		rows, err := c.q.ListNetworksSince(ctx, name, 0)
		if err != nil {
			return nil, fmt.Errorf("fabric %s: list networks: %w", name, err)
		}
		for _, row := range rows {
			if row.PhysicalNetwork != mv.m.Physnet {
				continue
			}
			n := network(row)
			ports, err := c.q.ListPortsOfNetwork(ctx, name, n.ID)
			if err != nil {
				return nil, fmt.Errorf("network %s: list ports: %w", n.ID, err)
			}
			then, note, err := mv.becomes(n)
			if err != nil {
				return nil, err
			}
			r := movedRows{from: name, before: n, then: then, ports: driver.Convert(ports, port)}
			moves = append(moves, r)
			mv.out.Networks = append(mv.out.Networks, MovedNetwork{Network: then, From: name, Ports: len(r.ports),
				Members: len(r.members()), Note: note})
		}
	}
	return moves, nil
}

// becomes is network n as the new fabric's rules record it: with the same
// partition, or with none when they do not manage the physnet. A network
// recorded with none keeps none, and note says why: its VLAN ID was never
// recorded, nor its ports' GUIDs.
func (mv *physnetMove) becomes(n Network) (Network, string, error) {
	rules := mv.to.rules
	if !n.Managed {
		if (n.Type == TypeVLAN || n.Type == TypeFlat) && rules.managesPhysnet(n.PhysicalNetwork) {
			return n, "it was recorded with no partition, so its VLAN ID and its ports' GUIDs were never recorded: " +
				"run --import-neutron to record them from Neutron", nil
		}
		return n, "", nil
	}
	spec := NetworkSpec{ID: n.ID, Name: n.Name, Type: n.Type, PhysicalNetwork: n.PhysicalNetwork}
	if n.PKey != nil {
		vlan := int64(*n.PKey)
		spec.SegmentationID = &vlan
	}
	then, err := rules.network(spec)
	if err != nil {
		return Network{}, "", rejectf("fabric %s: %v", mv.to.FabricName(), err)
	}
	if !then.Managed {
		return then, fmt.Sprintf("fabric %s does not manage physical network %q: the network has no partition there, "+
			"and its ports hold no GUID", mv.to.FabricName(), n.PhysicalNetwork), nil
	}
	return then, "", nil
}

// members are the ports of r that hold a GUID on the new fabric.
func (r movedRows) members() []Port {
	if !r.then.Managed {
		return nil
	}
	var out []Port
	for _, p := range r.ports {
		if p.GUID != nil {
			out = append(out, p)
		}
	}
	return out
}

// check refuses what the new fabric's rules refuse: a VLAN ID another
// network or a Kubernetes pkey uses there, a GUID another port, a
// Kubernetes pkey or the partitions template holds there.
func (mv *physnetMove) check(ctx context.Context, target *changeTx, moves []movedRows) error {
	pkeys := map[fabric.PKey]string{}
	for _, r := range moves {
		if !r.then.Managed {
			continue
		}
		if r.then.PKey != nil {
			if other, ok := pkeys[*r.then.PKey]; ok {
				return rejectf("fabric %s: networks %s and %s would both have pkey %s", target.fabric, other, r.then.ID, *r.then.PKey)
			}
			pkeys[*r.then.PKey] = r.then.ID
		}
		if err := mv.to.checkPKeyFree(ctx, target, r.then); err != nil {
			return rejectf("fabric %s: %v", target.fabric, err)
		}
		for _, p := range r.members() {
			if err := mv.checkMember(ctx, target, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMember refuses port p's GUID when the new fabric has it elsewhere.
func (mv *physnetMove) checkMember(ctx context.Context, target *changeTx, p Port) error {
	holder, err := target.q.GetPortByGUID(ctx, target.fabric, p.GUID)
	switch {
	case err == nil:
		return rejectf("fabric %s: port %s: GUID %s is already held there by port %s of network %s",
			target.fabric, p.ID, *p.GUID, holder.ID, holder.NetworkID)
	case !driver.IsNoRows(err):
		return err
	}
	rules := mv.to.rules
	if rules.anyKubernetesRange() {
		kube, err := target.q.KubernetesMembershipsOfGUID(ctx, target.fabric, *p.GUID)
		if err != nil {
			return err
		}
		if len(kube) > 0 {
			return rejectf("fabric %s: port %s: GUID %s is a member of Kubernetes pkey %s there",
				target.fabric, p.ID, *p.GUID, kube[0].Pkey)
		}
	}
	if rules.StaticMember != nil {
		if name, listed := rules.StaticMember(*p.GUID); listed {
			return rejectf("fabric %s: port %s: GUID %s is a member of partition %q of its partitions template",
				target.fabric, p.ID, *p.GUID, name)
		}
	}
	return nil
}

// write moves r's rows from its old fabric (from) to the new one: deleted
// there (with its pkey's adopted members, as a deleted network's), written
// here at the new fabric's revision, which the new fabric's applier reads
// as rows written since its last read; the old one finds them gone by its
// counts (snapshot.go).
func (mv *physnetMove) write(ctx context.Context, from, target *changeTx, r movedRows) error {
	if _, err := from.DeletePortsOfNetwork(ctx, r.before.ID); err != nil {
		return err
	}
	if _, err := from.DeleteNetwork(ctx, r.before.ID); err != nil {
		return err
	}
	if r.before.Managed && r.before.PKey != nil {
		if _, err := endAdoption(ctx, from, *r.before.PKey); err != nil {
			return err
		}
	}
	n := r.then
	n.Revision = target.rev
	if err := target.UpsertNetwork(ctx, n, target.now); err != nil {
		return err
	}
	var guids []fabric.GUID
	for _, p := range r.ports {
		if !n.Managed {
			p.GUID = nil
		}
		if p.GUID != nil {
			guids = append(guids, *p.GUID)
		}
		p.Revision = target.rev
		if err := target.UpsertPort(ctx, p, target.now); err != nil {
			return fmt.Errorf("port %s: %w", p.ID, err)
		}
	}
	// The ports decide their GUIDs' partitions from now on (adopted.go).
	_, err := releaseGUIDs(ctx, target, guids, target.rev)
	return err
}

// jobs inserts the move's job on each fabric it changed: each old fabric's
// (its networks leave its partitions), then the new one's (they join its).
func (mv *physnetMove) jobs(ctx context.Context, target *changeTx, moves []movedRows) error {
	var joined []string
	var joinedPlaces []Place
	for _, name := range slices.Sorted(maps.Keys(mv.txs)) {
		c := mv.txs[name]
		if c == target || !c.decided {
			continue
		}
		var left []string
		var places []Place
		from := mv.s.view(name).rules
		for _, r := range moves {
			if r.from != name {
				continue
			}
			left = append(left, fmt.Sprintf("%s (%s)", r.before.ID, from.partitionText(r.before)))
			joined = append(joined, fmt.Sprintf("%s (%s, %d members)", r.then.ID, mv.to.rules.partitionText(r.then), len(r.members())))
			for _, p := range r.ports {
				if r.before.Managed && p.GUID != nil {
					places = append(places, Place{GUID: *p.GUID, PKey: from.partitionOf(r.before), Want: WantAbsent})
				}
			}
			for _, p := range r.members() {
				joinedPlaces = append(joinedPlaces, Place{GUID: *p.GUID, PKey: mv.to.rules.partitionOf(r.then), Want: WantFull})
			}
		}
		result := fmt.Sprintf("networks %s left fabric %s for fabric %s", strings.Join(left, ", "), name, target.fabric)
		if err := mv.job(ctx, c, result, places); err != nil {
			return err
		}
	}
	result := fmt.Sprintf("networks %s joined fabric %s", strings.Join(joined, ", "), target.fabric)
	return mv.job(ctx, target, result, joinedPlaces)
}

// job inserts one fabric's job of the move, with the places it promises.
func (mv *physnetMove) job(ctx context.Context, c *changeTx, result string, places []Place) error {
	c.promise(places...)
	j, err := c.job(ctx, Job{ObjectType: ObjectPhysnet, ObjectID: mv.m.Physnet, Operation: OpMovePhysnet,
		Description: fmt.Sprintf("Move physical network %s's networks to fabric %s", mv.m.Physnet, mv.to.FabricName()),
		Result:      result, CreatedBy: mv.m.CreatedBy})
	if err != nil {
		return fmt.Errorf("fabric %s: %w", c.fabric, err)
	}
	mv.out.Jobs = append(mv.out.Jobs, j)
	mv.out.Places[j.ID] = places
	return nil
}
