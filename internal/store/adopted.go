package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Adopted partitions: the partitions of a running fabric that
// --adopt-partitions recorded, so that switching a cloud over from UFM or
// another manager cuts no tenant off (docs/switch-over.md). Each is a change
// like any other: it takes a revision and a job, and the applier renders it
// (partitions.State.Adopted).
//
// Who decides a GUID's memberships. An adopted member stays where the running
// file had it until an owner decides for it:
//   - a network (or Kubernetes pkey, or the flat partition) on an adopted pkey
//     takes the partition over; the adopted members stay in it, beside the
//     owner's, until they are released (ReleaseAdoptedMembers);
//   - a port (or Kubernetes member) that takes an adopted member's GUID ends
//     every adopted membership of that GUID in the same change: from then on
//     the owner says where the GUID belongs, and a port of a network may be in
//     no other partition;
//   - the deletion of the owner of an adopted pkey (or a network that leaves
//     it) releases the pkey's adopted members with it: otherwise the next
//     network on that VLAN, perhaps another tenant's, would find them in its
//     partition.

// Job operations and object type of the adopted partitions' changes.
const (
	OpAdoptPartitions      = "Adopt partitions"
	OpReleaseAdopted       = "Release adopted members"
	ObjectAdoptedPartition = "adopted"
)

// AdoptedPartition is one adopted partition as recorded: its statement as the
// running file wrote it, less the members released since.
type AdoptedPartition struct {
	PKey      fabric.PKey
	Statement partitions.Statement
	Revision  int64
}

// Adoption is one run of --adopt-partitions: the statements
// partitions.PlanAdoption chose from the running file.
type Adoption struct {
	Partitions []partitions.Statement
	CreatedBy  string
}

// AdoptionOutcome is what an adoption recorded.
type AdoptionOutcome struct {
	Job     Job      // none (ID 0) when nothing changed
	Changed bool     // false when everything was recorded already (a re-run): then nothing is recorded
	Notes   []string // a line for each partition (adopted, changed, left alone, not adopted, and why), and each member not adopted
}

// errAdoptedAlready ends the transaction of an adoption that changes
// nothing: it records nothing, neither a revision nor a job.
var errAdoptedAlready = errors.New("every partition is adopted already as given")

// AdoptPartitions records the partitions of a, in one change: all or
// nothing. A partition already adopted takes the statement given (the
// members released since come back: adopting is the operator's word); one
// not named stays as it is. A member whose GUID a port or a Kubernetes pkey
// holds is left out, with a note. An adoption that would change nothing
// records nothing.
func (s *Store) AdoptPartitions(ctx context.Context, a Adoption) (AdoptionOutcome, error) {
	var out AdoptionOutcome
	seen := map[fabric.PKey]bool{}
	for _, st := range a.Partitions {
		if st.PKey == 0 || st.PKey > fabric.MaxNetworkPKey {
			return out, rejectf("partition %s: pkey %s cannot be adopted: want 0x0001-%s", st.Name, st.PKey, fabric.MaxNetworkPKey)
		}
		if seen[st.PKey] {
			return out, rejectf("partition %s: pkey %s is given twice", st.Name, st.PKey)
		}
		seen[st.PKey] = true
	}
	job, err := s.record(ctx, s.groups, "adopt partitions", fmt.Sprintf("(%d)", len(a.Partitions)), func(ctx context.Context, tx *changeTx) (Job, error) {
		out.Changed, out.Notes = false, nil // a run again starts afresh
		recorded, err := adoptedPartitions(ctx, tx.fabric, tx.q)
		if err != nil {
			return Job{}, err
		}
		var writes []partitions.Statement
		var pkeys []string
		for _, st := range a.Partitions {
			kept, notes, err := s.adoptable(ctx, tx, st, recorded)
			if err != nil {
				return Job{}, err
			}
			out.Notes = append(out.Notes, notes...)
			if len(kept.Members) == 0 {
				continue
			}
			pkeys = append(pkeys, st.PKey.String())
			promiseStatement(tx, kept, false)
			if r, ok := recorded[st.PKey]; !ok || r.Statement.Text() != kept.Text() {
				writes = append(writes, kept)
			}
		}
		if out.Changed = len(writes) > 0; !out.Changed {
			return Job{}, errAdoptedAlready
		}
		rev, err := tx.touches(ctx, true)
		if err != nil {
			return Job{}, err
		}
		for _, st := range writes {
			if err := upsertAdopted(ctx, tx, st, rev); err != nil {
				return Job{}, err
			}
		}
		return Job{
			ObjectType: ObjectAdoptedPartition, ObjectID: fmt.Sprintf("%d partitions", len(pkeys)), Operation: OpAdoptPartitions,
			Description: fmt.Sprintf("Adopt the running fabric's partitions %s", strings.Join(pkeys, ", ")),
			Result:      fmt.Sprintf("%d partitions adopted, %d of them changed", len(pkeys), len(writes)),
			CreatedBy:   a.CreatedBy,
		}, nil
	})
	if errors.Is(err, errAdoptedAlready) {
		return out, nil
	}
	out.Job = job
	return out, err
}

// adoptable is st less the members an owner holds, with a note for each
// member left out, then the partition's line: adopted, changed from what
// recorded has, left alone, or not adopted, and why; and who owns the pkey.
func (s *Store) adoptable(ctx context.Context, tx *changeTx, st partitions.Statement,
	recorded map[fabric.PKey]AdoptedPartition) (partitions.Statement, []string, error) {
	var notes []string
	what := fmt.Sprintf("partition %s (%s)", st.Name, st.PKey)
	owner, err := pkeyOwner(ctx, tx, st.PKey, s.rules.flatPKey())
	if err != nil {
		return st, nil, err
	}
	kept := st
	kept.Members = nil
	for _, m := range st.Members {
		holder, err := guidOwner(ctx, tx.fabric, tx.q, m.GUID)
		if err != nil {
			return st, nil, err
		}
		if holder != "" {
			notes = append(notes, fmt.Sprintf("%s: member %s not adopted: %s holds it and decides its partitions", what, m.GUID, holder))
			continue
		}
		kept.Members = append(kept.Members, m)
	}
	line := what + ": " + adoptionLine(kept, recorded)
	if owner != "" && len(kept.Members) > 0 {
		line += fmt.Sprintf("; %s has the pkey: the adopted members stay beside its own until released", owner)
	}
	return kept, append(notes, line), nil
}

// adoptionLine says what adopting kept does beside what recorded has.
func adoptionLine(kept partitions.Statement, recorded map[fabric.PKey]AdoptedPartition) string {
	r, ok := recorded[kept.PKey]
	switch {
	case len(kept.Members) == 0:
		return "not adopted, no member is left to adopt"
	case !ok:
		return fmt.Sprintf("adopted, %d members", len(kept.Members))
	case r.Statement.Text() == kept.Text():
		return "left alone: adopted already as the file has it"
	}
	line := fmt.Sprintf("changed: adopted again as the file has it, %d members (%d recorded)", len(kept.Members), len(r.Statement.Members))
	if fc := partitions.FlagsChange(r.Statement.Flags, kept.Flags); fc != "" {
		line += ", flags: " + fc
	}
	return line
}

// pkeyOwner names what owns pkey besides an adoption, or "".
func pkeyOwner(ctx context.Context, tx *changeTx, pkey, flatPKey fabric.PKey) (string, error) {
	if pkey == flatPKey {
		return "the flat partition", nil
	}
	switch n, err := tx.GetNetworkByPKey(ctx, pkey); {
	case err == nil:
		return "network " + n.ID, nil
	case !isNotFound(err):
		return "", err
	}
	switch _, err := tx.q.GetKubernetesPKey(ctx, tx.fabric, pkey); {
	case err == nil:
		return "Kubernetes pkey " + pkey.String(), nil
	case !driver.IsNoRows(err):
		return "", err
	}
	return "", nil
}

// guidOwner names the port or Kubernetes pkey that holds guid, or "".
func guidOwner(ctx context.Context, fab string, q driver.Queries, guid fabric.GUID) (string, error) {
	switch p, err := q.GetPortByGUID(ctx, fab, &guid); {
	case err == nil:
		return fmt.Sprintf("port %s of network %s", p.ID, p.NetworkID), nil
	case !driver.IsNoRows(err):
		return "", err
	}
	ks, err := q.KubernetesMembershipsOfGUID(ctx, fab, guid)
	if err != nil || len(ks) == 0 {
		return "", err
	}
	return "Kubernetes pkey " + ks[0].Pkey.String(), nil
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// upsertAdopted records st, at rev.
func upsertAdopted(ctx context.Context, tx *changeTx, st partitions.Statement, rev int64) error {
	return tx.q.UpsertAdoptedPartition(ctx, driver.UpsertAdoptedPartitionParams{Fabric: tx.fabric, PKey: st.PKey, Name: st.Name,
		Statement: st.Text(), Revision: rev, Now: tx.now})
}

// adoptedPartitions reads every adopted partition, by pkey.
func adoptedPartitions(ctx context.Context, fab string, q driver.Queries) (map[fabric.PKey]AdoptedPartition, error) {
	list, err := listAdopted(ctx, fab, q)
	if err != nil {
		return nil, err
	}
	out := make(map[fabric.PKey]AdoptedPartition, len(list))
	for _, a := range list {
		out[a.PKey] = a
	}
	return out, nil
}

// listAdopted reads every adopted partition, in pkey order; nil when none.
func listAdopted(ctx context.Context, fab string, q driver.Queries) ([]AdoptedPartition, error) {
	rows, err := q.ListAdoptedPartitions(ctx, fab)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make([]AdoptedPartition, 0, len(rows))
	for _, r := range rows {
		st, err := partitions.ParseStatement(r.Statement)
		if err != nil {
			return nil, fmt.Errorf("adopted partition %s: the recorded statement does not parse: %w", r.Pkey, err)
		}
		out = append(out, AdoptedPartition{PKey: r.Pkey, Statement: st, Revision: r.Revision})
	}
	return out, nil
}

// AdoptedPartitions lists the adopted partitions, in pkey order.
func (s *Store) AdoptedPartitions(ctx context.Context) ([]AdoptedPartition, error) {
	return readOnly(ctx, s, "adopted partitions", func(ctx context.Context, q driver.Queries) ([]AdoptedPartition, error) {
		return listAdopted(ctx, s.FabricName(), q)
	})
}

// AdoptedRelease asks for the adopted members of one pkey to be released.
type AdoptedRelease struct {
	PKey fabric.PKey
	// Keep are the GUIDs that stay adopted (those a Neutron import found a
	// port for, which networking-mlnx has not sent yet); nil releases every
	// adopted member of the pkey.
	Keep []fabric.GUID
	// OwnedOnly releases nothing unless a network, a Kubernetes pkey or the
	// flat partition owns the pkey (ErrAdoptedUnowned): a Neutron import
	// whose network was refused says nothing about who uses the partition.
	OwnedOnly bool
	CreatedBy string
}

// ErrAdoptedUnowned is ReleaseAdoptedMembers' refusal, with OwnedOnly, of a
// pkey that only its adoption holds.
var ErrAdoptedUnowned = errors.New("no network, Kubernetes pkey or flat partition owns the pkey")

// AdoptedReleaseOutcome is what a release did.
type AdoptedReleaseOutcome struct {
	Job      Job
	Released []fabric.GUID // in the order the running file listed them
	Left     int           // adopted members still in the pkey
}

// ReleaseAdoptedMembers releases, in one change, the adopted members of
// r.PKey that are not in r.Keep: they leave the pkey's partition (unless a
// port of its owner holds them, which then decides). Releasing the last one
// ends the adoption of the pkey: an unowned partition disappears from the
// file. ErrNotFound when the pkey has no adopted partition.
func (s *Store) ReleaseAdoptedMembers(ctx context.Context, r AdoptedRelease) (AdoptedReleaseOutcome, error) {
	var out AdoptedReleaseOutcome
	keep := make(map[fabric.GUID]bool, len(r.Keep))
	for _, g := range r.Keep {
		keep[g] = true
	}
	job, err := s.record(ctx, s.groups, "release adopted members of", r.PKey.String(), func(ctx context.Context, tx *changeTx) (Job, error) {
		out = AdoptedReleaseOutcome{}
		recorded, err := adoptedPartitions(ctx, tx.fabric, tx.q)
		if err != nil {
			return Job{}, err
		}
		a, ok := recorded[r.PKey]
		if !ok {
			return Job{}, ErrNotFound
		}
		if r.OwnedOnly {
			switch owner, err := pkeyOwner(ctx, tx, r.PKey, s.rules.flatPKey()); {
			case err != nil:
				return Job{}, err
			case owner == "":
				return Job{}, ErrAdoptedUnowned
			}
		}
		st := a.Statement
		st.Members = nil
		released := a.Statement
		released.Members = nil
		for _, m := range a.Statement.Members {
			if keep[m.GUID] {
				st.Members = append(st.Members, m)
			} else {
				out.Released = append(out.Released, m.GUID)
				released.Members = append(released.Members, m)
			}
		}
		// Absent: see endAdoption.
		promiseStatement(tx, released, true)
		out.Left = len(st.Members)
		rev, err := tx.touches(ctx, len(out.Released) > 0)
		if err != nil {
			return Job{}, err
		}
		if err := writeAdopted(ctx, tx, st, len(out.Released) > 0, rev); err != nil {
			return Job{}, err
		}
		return Job{
			ObjectType: ObjectAdoptedPartition, ObjectID: r.PKey.String(), Operation: OpReleaseAdopted,
			Description: fmt.Sprintf("Release the adopted members of pkey %s (%d kept)", r.PKey, len(r.Keep)),
			Result:      fmt.Sprintf("%d adopted members of pkey %s released, %d left", len(out.Released), r.PKey, out.Left),
			CreatedBy:   r.CreatedBy,
		}, nil
	})
	if err != nil {
		return AdoptedReleaseOutcome{}, err
	}
	out.Job = job
	return out, nil
}

// writeAdopted records st as it now is, if changed: deleted once it has no
// member left.
func writeAdopted(ctx context.Context, tx *changeTx, st partitions.Statement, changed bool, rev int64) error {
	switch {
	case !changed:
		return nil
	case len(st.Members) == 0:
		_, err := tx.q.DeleteAdoptedPartition(ctx, tx.fabric, st.PKey)
		return err
	}
	return upsertAdopted(ctx, tx, st, rev)
}

// releaseGUIDs ends every adopted membership of guids, in a change at rev
// that gives them an owner (a port, a Kubernetes pkey): the pkeys they are
// released from, for the change's job.
func releaseGUIDs(ctx context.Context, tx *changeTx, guids []fabric.GUID, rev int64) ([]fabric.PKey, error) {
	if tx.noAdopted {
		return nil, nil // a round trip less for a port change where nothing is adopted
	}
	list, err := listAdopted(ctx, tx.fabric, tx.q)
	if err != nil || list == nil {
		return nil, err
	}
	var released []fabric.PKey
	for _, a := range list {
		st := a.Statement
		st.Members = slices.DeleteFunc(slices.Clone(st.Members), func(m partitions.Member) bool {
			released := m.Keyword == "" && slices.Contains(guids, m.GUID)
			if released {
				// Absent, unless the change's owner keeps the GUID in the
				// pkey: its own place, full or limited, wins (places.go).
				tx.promise(Place{GUID: m.GUID, PKey: a.PKey, Want: WantAbsent})
			}
			return released
		})
		if len(st.Members) == len(a.Statement.Members) {
			continue
		}
		released = append(released, a.PKey)
		if err := writeAdopted(ctx, tx, st, true, rev); err != nil {
			return nil, err
		}
	}
	return released, nil
}

// releasedText is a job result's note of the adopted memberships a change
// ended, "" when none.
func releasedText(guids string, pkeys []fabric.PKey) string {
	if len(pkeys) == 0 {
		return ""
	}
	names := make([]string, len(pkeys))
	for i, p := range pkeys {
		names[i] = p.String()
	}
	return fmt.Sprintf("; %s left the adopted partitions %s", guids, strings.Join(names, ", "))
}

// takeOverText is what the job of an owner arriving on pkey says of the
// adopted partition it takes over: nothing when none is adopted there; else
// its name and how its flags change, the owner's partition (owner, with the
// adopted members, as the template writes it) replacing them.
func (s *Store) takeOverText(ctx context.Context, tx *changeTx, owner partitions.State, pkey fabric.PKey) (string, error) {
	recorded, err := adoptedPartitions(ctx, tx.fabric, tx.q)
	if err != nil {
		return "", err
	}
	a, ok := recorded[pkey]
	if !ok {
		return "", nil
	}
	text := fmt.Sprintf("; it takes over the adopted partition %s (%s)", a.Statement.Name, pkey)
	if s.rules.PartitionFlags == nil {
		return text + ", written with its owner's flags from now on", nil
	}
	// The owner's statement holds the adopted members until they are
	// released, and a template writes a partition with members as such (the
	// built-in one gives only those the ipoib flag).
	owner.Adopted = []partitions.Statement{a.Statement}
	flags, found, err := s.rules.PartitionFlags(ctx, owner, pkey)
	switch {
	case err != nil:
		return "", fmt.Errorf("the flags of partition %s: %w", pkey, err)
	case !found:
		return text, nil
	}
	if c := partitions.FlagsChange(a.Statement.Flags, flags); c != "" {
		return text + ", whose flags change: " + c, nil
	}
	return text + ", whose flags stay as adopted", nil
}

// endAdoption releases every adopted member of pkey, whose owner is deleted
// or leaves it: the next owner of the pkey, perhaps another tenant's network,
// must not find them in its partition. Each released GUID is absent from
// the pkey: an adopted member's GUID has no owner (AdoptPartitions adopts
// none an owner holds, and an owner that takes one releases it), so nothing
// else keeps it there.
func endAdoption(ctx context.Context, tx *changeTx, pkey fabric.PKey) (int64, error) {
	recorded, err := adoptedPartitions(ctx, tx.fabric, tx.q)
	if err != nil {
		return 0, err
	}
	a, ok := recorded[pkey]
	if !ok {
		return 0, nil
	}
	promiseStatement(tx, a.Statement, true)
	return tx.q.DeleteAdoptedPartition(ctx, tx.fabric, pkey)
}

// promiseStatement states the places of st's members that name a port GUID
// (a keyword, ALL or SELF, names none): as the statement has them, or absent
// when they leave it.
func promiseStatement(tx *changeTx, st partitions.Statement, leave bool) {
	for _, m := range st.Members {
		if m.Keyword != "" {
			continue
		}
		want := wantOf(fabric.Membership(m.Membership))
		if leave {
			want = WantAbsent
		}
		tx.promise(Place{GUID: m.GUID, PKey: st.PKey, Want: want})
	}
}
