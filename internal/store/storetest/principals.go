package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// Several pkeys clients, each its own principal (store's principals.go), on
// every engine.

var principalTests = []storeTest{
	{"PKeysClientsSeeAndChangeOnlyTheirOwn", testPrincipalsApart},
	{"PKeysClientDeleteEmpty", testPrincipalDeleteEmpty},
	{"ConcurrentClaimsOfOneGUIDByTwoClients", testPrincipalsConcurrentClaims},
}

// principalRules are kubeStore's rules with two further clients: nico
// (0x2000-0x2fff, delete_empty) and slurm (0x3000-0x3fff). wideNico gives
// nico a range that also holds ib-kubernetes' pkeys, as a configuration
// that moved a range would: its reads and changes must still stop at the
// owner.
func principalRules(wideNico bool) store.Rules {
	nico := fabric.PKeyRange{First: 0x2000, Last: 0x2fff}
	if wideNico {
		nico.First = 0x1000
	}
	return store.Rules{PhysicalNetworks: []string{"ibnet"}, FlatPKey: store.DefaultFlatPKey, KubernetesRange: kubeRange,
		PKeysClients: map[string]store.PKeysClientRules{
			"nico":  {Range: nico, DeleteEmpty: true},
			"slurm": {Range: fabric.PKeyRange{First: 0x3000, Last: 0x3fff}},
		}}
}

// testPrincipalsApart: ib-kubernetes, nico and slurm each record a pkey;
// each lists and reads its own alone; another's pkey reads as unknown, a
// DELETE or a removal of it changes nothing, an addition to it is
// forbidden, a GUID of another's pkey joins none of a client's, and no VLAN
// takes a client's range.
func testPrincipalsApart(t *testing.T, s *store.Store) {
	ctx := t.Context()
	kube := s.WithRules(principalRules(false))
	nico, slurm := kube.PKeysClient("nico"), kube.PKeysClient("slurm")
	if nico == nil || slurm == nil || kube.PKeysClient("nobody") != nil {
		t.Fatal("PKeysClient: want a view of nico and slurm, none of an unknown client")
	}
	mustKube(t)(kube.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, full(0x1111))))
	mustKube(t)(nico.AddKubernetesGUIDs(ctx, kubeAdd(0x2001, full(0x2222))))
	mustKube(t)(slurm.AddKubernetesGUIDs(ctx, kubeAdd(0x3001, limited(0x3333))))
	for _, c := range []struct {
		name string
		st   *store.Store
		want fabric.PKey
	}{{"ib-kubernetes", kube, 0x1001}, {"nico", nico, 0x2001}, {"slurm", slurm, 0x3001}} {
		list, err := c.st.KubernetesPKeys(ctx)
		if err != nil || len(list) != 1 || list[0].PKey != c.want {
			t.Errorf("%s lists %+v, %v; want its own pkey %s alone", c.name, list, err, c.want)
		}
	}
	before := readKube(t, kube) + readKube(t, nico) + readKube(t, slurm)

	// nico's range now holds ib-kubernetes' pkey 0x1001: still not nico's.
	wide := s.WithRules(principalRules(true)).PKeysClient("nico")
	if _, err := wide.GetKubernetesPKey(ctx, 0x1001); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("nico reads ib-kubernetes' pkey: %v, want ErrNotFound as for an unknown one", err)
	}
	if _, err := wide.GetKubernetesPKey(ctx, 0x1002); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("nico reads an unknown pkey: %v, want ErrNotFound", err)
	}
	if _, err := wide.DeleteKubernetesPKey(ctx, store.KubernetesDeletion{PKey: 0x1001}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("nico deletes ib-kubernetes' pkey: %v, want ErrNotFound", err)
	}
	j, err := wide.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x1001, GUIDs: []fabric.GUID{0x1111}})
	if err != nil || !strings.HasPrefix(j.Result, "nothing to remove") {
		t.Errorf("nico removes ib-kubernetes' member: %q, %v; want nothing removed", j.Result, err)
	}
	var forbidden *store.ForbiddenError
	if _, err := wide.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, full(0x4444))); !errors.As(err, &forbidden) {
		t.Errorf("nico adds to ib-kubernetes' pkey: %v, want ForbiddenError", err)
	}
	if _, err := wide.CreateKubernetesPKey(ctx, store.KubernetesCreation{PKey: 0x1001, IPoIB: false}); !errors.As(err, &forbidden) {
		t.Errorf("nico creates ib-kubernetes' pkey: %v, want ForbiddenError", err)
	}
	// A GUID of another's pkey joins none of nico's, and the refusal names
	// not the other pkey.
	_, err = nico.AddKubernetesGUIDs(ctx, kubeAdd(0x2002, full(0x3333)))
	if !errors.As(err, &forbidden) || strings.Contains(err.Error(), "0x3001") {
		t.Errorf("nico adds slurm's GUID: %v, want ForbiddenError naming no pkey of slurm's", err)
	}
	// Out of its range, another's pkey is refused as any other pkey.
	if _, err := slurm.AddKubernetesGUIDs(ctx, kubeAdd(0x2001, full(0x5555))); err == nil ||
		!strings.Contains(err.Error(), "outside [ufm_pkeys:slurm] pkey_range 0x3000-0x3fff") {
		t.Errorf("slurm adds to nico's pkey: %v, want out of its range", err)
	}
	if after := readKube(t, kube) + readKube(t, nico) + readKube(t, slurm); after != before {
		t.Errorf("refused requests changed the pkeys:\nbefore %s\nafter  %s", before, after)
	}
	// No VLAN takes a client's range.
	if _, err := kube.RecordNetwork(ctx, store.NetworkChange{Network: vlanNetwork(netB, 0x3005),
		Operation: store.OpCreateNetwork}); err == nil || !strings.Contains(err.Error(), "[ufm_pkeys:slurm] pkey_range 0x3000-0x3fff") {
		t.Errorf("a VLAN in slurm's range: %v", err)
	}
	// The applier renders every client's pkeys.
	snap, err := kube.Snapshot(ctx)
	if err != nil || len(snap.Kubernetes) != 3 {
		t.Fatalf("snapshot: %+v, %v; want the three pkeys", snap.Kubernetes, err)
	}
	if owners := []string{snap.Kubernetes[0].Owner, snap.Kubernetes[1].Owner, snap.Kubernetes[2].Owner}; owners[0] != "" ||
		owners[1] != "nico" || owners[2] != "slurm" {
		t.Errorf("owners %q, want \"\", nico, slurm", owners)
	}
}

// testPrincipalDeleteEmpty: a client with delete_empty loses a pkey with
// its last GUID, which then reads as unknown; ib-kubernetes keeps its empty
// pkeys.
func testPrincipalDeleteEmpty(t *testing.T, s *store.Store) {
	ctx := t.Context()
	kube := s.WithRules(principalRules(false))
	nico := kube.PKeysClient("nico")
	mustKube(t)(kube.AddKubernetesGUIDs(ctx, kubeAdd(0x1001, full(0x1111))))
	mustKube(t)(nico.AddKubernetesGUIDs(ctx, kubeAdd(0x2001, full(0x2222), limited(0x2223))))
	j := mustKube(t)(nico.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x2001, GUIDs: []fabric.GUID{0x2222}}))
	if strings.Contains(j.Result, "is removed") {
		t.Errorf("a pkey with a member left was removed: %q", j.Result)
	}
	j = mustKube(t)(nico.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x2001, GUIDs: []fabric.GUID{0x2223}}))
	if !strings.Contains(j.Result, "pkey 0x2001 had no member left and is removed ([ufm_pkeys:nico] delete_empty)") {
		t.Errorf("result %q", j.Result)
	}
	if _, err := nico.GetKubernetesPKey(ctx, 0x2001); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("nico's emptied pkey: %v, want ErrNotFound", err)
	}
	mustKube(t)(kube.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x1001, GUIDs: []fabric.GUID{0x1111}}))
	if p, err := kube.GetKubernetesPKey(ctx, 0x1001); err != nil || len(p.Members) != 0 {
		t.Errorf("ib-kubernetes' emptied pkey: %+v, %v; want it kept, empty", p, err)
	}
}

// testPrincipalsConcurrentClaims: nico and slurm add one GUID to their own
// pkeys at the same moment; each change judges the GUID's other pkeys under
// the revision's lock, so exactly one is accepted and the other forbidden,
// and the GUID is one client's.
func testPrincipalsConcurrentClaims(t *testing.T, s *store.Store) {
	ctx := t.Context()
	kube := s.WithRules(principalRules(false))
	nico, slurm := kube.PKeysClient("nico"), kube.PKeysClient("slurm")
	for i := range 8 {
		g := uint64(0x0002c90300020000) + uint64(i)
		other := make(chan error, 1)
		go func() {
			_, err := slurm.AddKubernetesGUIDs(ctx, kubeAdd(fabric.PKey(0x3100+i), limited(g)))
			other <- err
		}()
		_, nerr := nico.AddKubernetesGUIDs(ctx, kubeAdd(fabric.PKey(0x2100+i), limited(g)))
		serr := <-other
		var forbidden *store.ForbiddenError
		for _, err := range []error{nerr, serr} {
			if err != nil && !errors.As(err, &forbidden) {
				t.Fatalf("GUID %x: %v", g, err)
			}
		}
		if (nerr == nil) == (serr == nil) {
			t.Fatalf("GUID %x: nico %v, slurm %v; want exactly one accepted", g, nerr, serr)
		}
	}
	snap, err := kube.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[fabric.GUID]string{}
	for _, p := range snap.Kubernetes {
		for _, m := range p.Members {
			if o, seen := owners[m.GUID]; seen && o != p.Owner {
				t.Errorf("GUID %x is in pkeys of %q and %q", uint64(m.GUID), o, p.Owner)
			}
			owners[m.GUID] = p.Owner
		}
	}
	if len(owners) != 8 {
		t.Errorf("%d GUIDs recorded, want 8: %s", len(owners), fmt.Sprint(owners))
	}
}
