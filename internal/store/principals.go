package store

import (
	"context"
	"fmt"
	"sort"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// Principals. Several pkeys clients share a fabric's Kubernetes pkeys: the
// [ufm_pkeys] client (ib-kubernetes) and each [ufm_pkeys:NAME] client (NICo,
// Slurm, the UFM SDK's tools). A pkey belongs to the client that created it
// (its row's owner: NAME, "" for [ufm_pkeys]); a client's view of the store
// (PKeysClient) lists and reads only its own pkeys, and changes only them:
//
//   - another's pkey reads as an unknown one (GET answers {}, DELETE not
//     found, a removal of GUIDs removes nothing), so that a client learns
//     nothing of another's pkeys by reading;
//   - adding GUIDs to, or creating, another's pkey is refused
//     (ForbiddenError): it cannot be made the client's own;
//   - a GUID in another client's pkey joins none of this client's: a port is
//     one principal's at a time, as it is in a Neutron network's partition or
//     a Kubernetes pkey, not both.
//
// Ranges do not overlap (the configuration refuses it), so another's pkey in
// a client's range is left from a configuration that moved a range.

// PKeysClientRules are one [ufm_pkeys:NAME] client's rules.
type PKeysClientRules struct {
	// Range is its pkey_range: the pkeys it may use, which no Neutron VLAN
	// and no other client of the fabric may.
	Range fabric.PKeyRange
	// MaxMembersPerPKey and MaxMembers bound the members of one of its pkeys
	// and of all of them; 0: no limit.
	MaxMembersPerPKey, MaxMembers int
	// DeleteEmpty removes a pkey of its once its last GUID leaves, so that it
	// reads as unknown ({}).
	DeleteEmpty bool
}

// ForbiddenError is a request of one principal for what is another's: it is
// answered 403 and nothing is recorded. Its reason names no other principal's
// pkey.
type ForbiddenError struct{ Reason string }

func (e *ForbiddenError) Error() string { return e.Reason }

func forbiddenf(format string, args ...any) error {
	return &ForbiddenError{Reason: fmt.Sprintf(format, args...)}
}

// PKeysClient is the view of pkeys client name of s's fabric
// ([ufm_pkeys:NAME], one of Rules.PKeysClients): its Kubernetes pkeys alone,
// by its own rules; nil when the fabric has no such client. "" is the
// [ufm_pkeys] client's, s itself.
func (s *Store) PKeysClient(name string) *Store {
	if name == "" {
		return s
	}
	r, ok := s.rules.forClient(name)
	if !ok {
		return nil
	}
	c := *s
	c.rules = r
	return &c
}

// forClient is r as client name's requests are judged: its range and
// limits, refusals naming its section.
func (r Rules) forClient(name string) (Rules, bool) {
	if name == "" {
		return r, true
	}
	c, ok := r.PKeysClients[name]
	if !ok {
		return r, false
	}
	r.KubernetesRange, r.KubernetesMaxMembersPerPKey, r.KubernetesMaxMembers = c.Range, c.MaxMembersPerPKey, c.MaxMembers
	r.client, r.deleteEmpty = name, c.DeleteEmpty
	return r, true
}

// owner is the principal this view acts for: its pkeys' owner.
func (s *Store) owner() string { return s.rules.client }

// anyKubernetesRange says whether any client of the fabric may record a
// pkey: without one, none is recorded, and a Neutron change pays no query
// for them.
func (r Rules) anyKubernetesRange() bool {
	if !r.KubernetesRange.Empty() {
		return true
	}
	for _, c := range r.PKeysClients {
		if !c.Range.Empty() {
			return true
		}
	}
	return false
}

// kubernetesRangeOf names the client whose range holds pkey, as a refusal
// of a VLAN names it: its section and range; ok is false when none does.
func (r Rules) kubernetesRangeOf(pkey fabric.PKey) (section string, rng fabric.PKeyRange, ok bool) {
	if r.KubernetesRange.Contains(pkey) {
		return r.section("ufm_pkeys"), r.KubernetesRange, true
	}
	names := make([]string, 0, len(r.PKeysClients))
	for name := range r.PKeysClients {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if c := r.PKeysClients[name]; c.Range.Contains(pkey) {
			return "[ufm_pkeys:" + name + "]", c.Range, true
		}
	}
	return "", fabric.PKeyRange{}, false
}

// ownPKey reads pkey as this view's principal sees it: the row when it is
// recorded and its own; found is false when it is not recorded, and mine is
// false when it is another's.
func (s *Store) ownPKey(ctx context.Context, q driver.Queries, pkey fabric.PKey) (row driver.KubernetesPKey, found, mine bool, err error) {
	row, err = q.GetKubernetesPKey(ctx, s.FabricName(), pkey)
	switch {
	case driver.IsNoRows(err):
		return row, false, false, nil
	case err != nil:
		return row, false, false, err
	}
	return row, true, row.Owner == s.owner(), nil
}

// checkGUIDOwners refuses a GUID that is a member of another principal's
// pkey (others: its Kubernetes memberships), naming none of them.
func (s *Store) checkGUIDOwners(ctx context.Context, tx *changeTx, pkey fabric.PKey, guid fabric.GUID,
	others []driver.KubernetesMember) error {
	for _, o := range others {
		if o.Pkey == pkey {
			continue
		}
		_, found, mine, err := s.ownPKey(ctx, tx.q, o.Pkey)
		if err != nil {
			return err
		}
		if found && !mine {
			return forbiddenf("pkey %s: GUID %s is in a pkey of another pkeys client; a port is one client's at a time",
				pkey, ufmGUID(guid))
		}
	}
	return nil
}

// deleteIfEmpty removes pkey once its last member left, for a client with
// delete_empty (it then reads {}); removed says whether it did.
func (s *Store) deleteIfEmpty(ctx context.Context, tx *changeTx, pkey fabric.PKey) (removed bool, err error) {
	if !s.rules.deleteEmpty {
		return false, nil
	}
	n, err := tx.q.CountKubernetesMembersOfPKey(ctx, s.FabricName(), pkey)
	if err != nil || n > 0 {
		return false, err
	}
	if _, err := tx.q.DeleteKubernetesPKey(ctx, s.FabricName(), pkey); err != nil {
		return false, err
	}
	// Its adopted members leave with it, as with a DELETE (adopted.go).
	if _, err := endAdoption(ctx, tx, pkey); err != nil {
		return false, err
	}
	return true, nil
}

// clientOf is the rules pkey p's owner's requests are judged by; false,
// with why, when its owner is no longer configured.
func (r Rules) clientOf(p KubernetesPKey) (Rules, string, bool) {
	cr, ok := r.forClient(p.Owner)
	if !ok {
		return r, fmt.Sprintf("Kubernetes pkey %s is pkeys client %s's, which is no longer configured ([ufm_pkeys:%s])",
			p.PKey, p.Owner, p.Owner), false
	}
	return cr, "", true
}

// cmpOr is err if there is one, else otherwise.
func cmpOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
