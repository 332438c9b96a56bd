package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The GUIDs no client may name (a subnet manager's port, [api]
// reserved_guids), and refusals that name no other owner's objects.

func init() {
	kubernetesTests = append(kubernetesTests,
		storeTest{"ReservedGUIDsAreRefusedOnBothAPIs", testReservedGUIDsRefused},
		storeTest{"AGUIDReservedAfterItWasRecordedStaysAndIsNamed", testReservedAfterRecorded},
		storeTest{"RefusalsNameNoOtherOwnersObjects", testRefusalsNameNoOtherOwner},
		storeTest{"ACancelledChangeReadsNoReservedGUIDAndWritesNothing", testReservedCancelled},
		storeTest{"ASMPortRecordedWhileAPortNamesIt", testSMPortRecordedConcurrently})
	databaseTests = append(databaseTests, struct {
		name        string
		fn          func(t *testing.T, db Database, s *store.Store)
		notOnSQLite bool
	}{"AStandbyManagersSMPortIsRefused", testStandbySMPortRefused, false},
		struct {
			name        string
			fn          func(t *testing.T, db Database, s *store.Store)
			notOnSQLite bool
		}{"AnSMPortRecordedWhileAPortWaitsForTheLockIsRefused", testSMPortRecordedWhileQueued, true})
	twoFabricTests = append(twoFabricTests, storeTest{"AnotherFabricsSMPortIsRefused", testOtherFabricSMPortRefused})
}

const (
	smPort       = 0x0002c90300a00001 // the leader's OpenSM's port
	standbyPort  = 0x0002c90300a00002 // an HA standby's
	reservedPort = 0x0002c903000fff01 // listed in [api] reserved_guids
)

// reservedStore is kubeStore with reservedPort in [api] reserved_guids.
func reservedStore(s *store.Store) *store.Store {
	r := kubeRules()
	r.ReservedGUIDs = []fabric.GUID{reservedPort}
	return s.WithRules(r)
}

// kubeRules are kubeStore's rules.
func kubeRules() store.Rules {
	return store.Rules{PhysicalNetworks: []string{"ibnet"}, FlatPKey: store.DefaultFlatPKey, KubernetesRange: kubeRange}
}

// guidRefusals are a port naming g through networking-mlnx's API and a pod's
// GUID g through the pkeys API (a POST and UFM's PUT), each refused saying
// why.
func guidRefusals(t *testing.T, s *store.Store, g uint64, why string) []refusal {
	ctx := t.Context()
	replace := kubeAdd(0x1006, full(g))
	replace.Replace = true
	return []refusal{
		{"a port", func() error { _, err := addPort(t, s, "port-squat", netA, g); return err }, []string{why}},
		{"a pod", func() error { _, err := s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(g))); return err }, []string{why}},
		{"a PUT", func() error { _, err := s.AddKubernetesGUIDs(ctx, replace); return err }, []string{why}},
	}
}

// testReservedGUIDsRefused: the manager's own subnet manager port, once
// recorded, and a GUID of [api] reserved_guids are refused on both APIs,
// saying why, and change nothing; another GUID is still taken.
func testReservedGUIDsRefused(t *testing.T, s *store.Store) {
	s = reservedStore(s)
	addNetwork(t, s, netA, 101)
	if err := s.RecordSMPort(t.Context(), smPort, "manager-1 pid 1"); err != nil {
		t.Fatal(err)
	}
	read := func(t *testing.T) string { return fmt.Sprintf("%s\nrevision %d", readKube(t, s), revision(t, s)) }
	assertRefused(t, guidRefusals(t, s, smPort, "is the port of a subnet manager (fabric default's OpenSM)"), read)
	assertRefused(t, guidRefusals(t, s, reservedPort, "is in [api] reserved_guids"), read)
	if _, err := addPort(t, s, "port-a", netA, guidA); err != nil {
		t.Errorf("a host's GUID: %v", err)
	}
}

// testStandbySMPortRefused: a standby manager, whose OpenSM is stopped,
// records its port at its start; the leader's API refuses it from then on.
func testStandbySMPortRefused(t *testing.T, db Database, leader *store.Store) {
	standby := OpenDatabase(t, db)
	if err := standby.RecordSMPort(t.Context(), standbyPort, "manager-2 pid 2"); err != nil {
		t.Fatal(err)
	}
	s := leader.WithRules(kubeRules())
	addNetwork(t, s, netA, 101)
	read := func(t *testing.T) string { return fmt.Sprintf("%s\nrevision %d", readKube(t, s), revision(t, s)) }
	assertRefused(t, guidRefusals(t, s, standbyPort, "GUID 0x0002c90300a00002 is the port of a subnet manager"), read)
	sms, err := s.SMPorts(t.Context())
	if err != nil || len(sms) != 1 || sms[0].GUID != standbyPort || sms[0].Holder != "manager-2 pid 2" {
		t.Errorf("SMPorts = %+v, %v; want the standby's", sms, err)
	}
}

// testOtherFabricSMPortRefused: the storage fabric's subnet manager port is
// refused on the default fabric too, naming the fabric.
func testOtherFabricSMPortRefused(t *testing.T, s *store.Store) {
	if err := s.DB().Fabric(storageFabric).RecordSMPort(t.Context(), standbyPort, "manager-1 pid 1"); err != nil {
		t.Fatal(err)
	}
	addNetwork(t, s, netA, 101)
	_, err := addPort(t, s, "port-squat", netA, standbyPort)
	if err == nil || !strings.Contains(err.Error(), "is the port of a subnet manager (fabric storage's OpenSM)") {
		t.Errorf("the storage fabric's SM port on the default fabric: %v", err)
	}
}

// testReservedAfterRecorded: a port and a Kubernetes member recorded before
// their GUIDs were reserved keep their membership, are named by
// ReservedHeld, and a change that names the GUID again is refused; their
// removal is not.
func testReservedAfterRecorded(t *testing.T, s *store.Store) {
	ctx := t.Context()
	s = kubeStore(s)
	addNetwork(t, s, netA, 101)
	if _, err := addPort(t, s, "port-a", netA, smPort); err != nil {
		t.Fatal(err)
	}
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(reservedPort))))
	// Reserved afterwards: a manager starts on the port, the list grows.
	if err := s.RecordSMPort(ctx, smPort, "manager-1 pid 1"); err != nil {
		t.Fatal(err)
	}
	s = reservedStore(s)
	held, err := s.ReservedHeld(ctx)
	want := []string{
		"port port-a of network " + netA + " holds it: GUID 0x0002c90300a00001 is the port of a subnet manager",
		"Kubernetes pkey 0x1005 holds it: GUID 0x0002c903000fff01 is in [api] reserved_guids",
	}
	if err != nil || len(held) != len(want) {
		t.Fatalf("ReservedHeld = %q, %v; want %q", held, err, want)
	}
	for i := range want {
		if !strings.HasPrefix(held[i], want[i]) {
			t.Errorf("ReservedHeld[%d] = %q, want it to start %q", i, held[i], want[i])
		}
	}
	if snap, err := s.Snapshot(ctx); err != nil || len(snap.Members) != 1 || len(snap.Kubernetes) != 1 {
		t.Errorf("the memberships recorded before were not kept: %+v, %v", snap, err)
	}
	read := func(t *testing.T) string { return fmt.Sprintf("%s\nrevision %d", readKube(t, s), revision(t, s)) }
	assertRefused(t, []refusal{
		{"the port's update", func() error { _, err := addPort(t, s, "port-a", netA, smPort); return err },
			[]string{"is the port of a subnet manager"}},
		{"the member added again", func() error { _, err := s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(reservedPort))); return err },
			[]string{"is in [api] reserved_guids"}},
	}, read)
	if _, err := s.RemovePort(ctx, store.PortRemoval{PortID: "port-a", CreatedBy: "test", Request: "{}"}); err != nil {
		t.Errorf("the port's removal: %v", err)
	}
	if _, err := s.RemoveKubernetesGUIDs(ctx, store.KubernetesRemoval{PKey: 0x1005, GUIDs: []fabric.GUID{reservedPort},
		CreatedBy: "test", Request: "{}"}); err != nil {
		t.Errorf("the member's removal: %v", err)
	}
	if held, err := s.ReservedHeld(ctx); err != nil || len(held) != 0 {
		t.Errorf("after the removals ReservedHeld = %q, %v; want none", held, err)
	}
}

// testRefusalsNameNoOtherOwner: a pkeys client naming a GUID an OpenStack
// port holds, or a pkey an OpenStack network holds, and networking-mlnx
// naming a GUID a Kubernetes pkey holds, are refused as held by another
// owner: the answer names neither the other's network, port nor pkey (a
// membership oracle across clients), and Held, which only the log shows,
// does.
func testRefusalsNameNoOtherOwner(t *testing.T, s *store.Store) {
	ctx := t.Context()
	s = kubeStore(s)
	addNetwork(t, s, netA, 101)
	if _, err := addPort(t, s, "port-a", netA, guidA); err != nil {
		t.Fatal(err)
	}
	mustKube(t)(s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))))
	wide := s.WithRules(store.Rules{KubernetesRange: fabric.PKeyRange{First: 0x0001, Last: 0x0fff}})
	for _, c := range []struct {
		name       string
		do         func() error
		hidden     []string // in no answer
		held, want string
	}{
		{"a pod on an OpenStack port's GUID", func() error {
			_, err := s.AddKubernetesGUIDs(ctx, kubeAdd(0x1006, full(guidA)))
			return err
		}, []string{netA, "port-a"}, "OpenStack network " + netA + " (port port-a)", "is held by another owner"},
		{"a pkey that is an OpenStack network's", func() error {
			_, err := wide.AddKubernetesGUIDs(ctx, kubeAdd(101, full(0x1111)))
			return err
		}, []string{netA}, "OpenStack network " + netA, "pkey 0x0065 is held by another owner"},
		{"an OpenStack port on a pod's GUID", func() error {
			_, err := addPort(t, s, "port-b", netA, guidB)
			return err
		}, []string{"0x1005"}, "Kubernetes pkey 0x1005", "is held by another owner"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rej := asRejected(t, c.do())
			if rej == nil {
				return
			}
			if !strings.Contains(rej.Reason, c.want) || rej.Held != c.held {
				t.Errorf("refusal %q, held %q; want it to say %q, held %q", rej.Reason, rej.Held, c.want, c.held)
			}
			for _, h := range c.hidden {
				if strings.Contains(rej.Reason, h) {
					t.Errorf("refusal %q names the other owner's %q", rej.Reason, h)
				}
			}
		})
	}
}

// asRejected is err as a RejectedError; nil, failing t, when it is not one.
func asRejected(t *testing.T, err error) *store.RejectedError {
	t.Helper()
	var rej *store.RejectedError
	if !errors.As(err, &rej) {
		t.Errorf("error = %v, want a RejectedError", err)
	}
	return rej
}

// testReservedCancelled: a change whose context is cancelled fails at the
// read of the reserved GUIDs, before its transaction: it is neither accepted
// unchecked nor recorded.
func testReservedCancelled(t *testing.T, s *store.Store) {
	s = reservedStore(s)
	addNetwork(t, s, netA, 101)
	before := fmt.Sprintf("%s\nrevision %d", readKube(t, s), revision(t, s))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.RecordPort(ctx, store.PortChange{Port: store.Port{ID: "port-a", NetworkID: netA, GUID: guid(guidA), Host: "h1"},
		Operation: store.OpAddPort, CreatedBy: "test", Request: "{}"}); !errors.Is(err, context.Canceled) {
		t.Errorf("a port on a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.AddKubernetesGUIDs(ctx, kubeAdd(0x1005, full(guidB))); !errors.Is(err, context.Canceled) {
		t.Errorf("a pod on a cancelled context: %v, want context.Canceled", err)
	}
	if after := fmt.Sprintf("%s\nrevision %d", readKube(t, s), revision(t, s)); after != before {
		t.Errorf("the cancelled changes wrote:\nbefore %s\nafter  %s", before, after)
	}
}

// testSMPortRecordedConcurrently: a manager records its SM port while a
// tenant's port naming it is sent, a few rounds on GUIDs of their own. The
// SM ports are not written under the revision's lock, so the port may win;
// either it is refused, saying why, or it is recorded and ReservedHeld names
// it; its next update is refused either way.
func testSMPortRecordedConcurrently(t *testing.T, s *store.Store) {
	ctx := t.Context()
	s = kubeStore(s)
	addNetwork(t, s, netA, 101)
	for round := range uint64(4) {
		g := uint64(0x0002c90300b00001) + round
		id := fmt.Sprintf("port-%d", round)
		var wg sync.WaitGroup
		var recordErr, portErr error
		wg.Go(func() { recordErr = s.RecordSMPort(ctx, fabric.GUID(g), "manager-2 pid 2") })
		wg.Go(func() { _, portErr = addPort(t, s, id, netA, g) })
		wg.Wait()
		if recordErr != nil {
			t.Fatal(recordErr)
		}
		held, err := s.ReservedHeld(ctx)
		if err != nil {
			t.Fatal(err)
		}
		named := slices.ContainsFunc(held, func(h string) bool { return strings.HasPrefix(h, "port "+id+" ") })
		switch rej := (*store.RejectedError)(nil); {
		case portErr == nil && !named:
			t.Errorf("round %d: the port was recorded and ReservedHeld %q does not name it", round, held)
		case portErr != nil && (!errors.As(portErr, &rej) || !strings.Contains(rej.Reason, "is the port of a subnet manager")):
			t.Errorf("round %d: the port: %v, want refused as a subnet manager's port", round, portErr)
		case portErr != nil && named:
			t.Errorf("round %d: the port was refused and ReservedHeld %q names it", round, held)
		}
		if _, err := addPort(t, s, id, netA, g); err == nil || !strings.Contains(err.Error(), "is the port of a subnet manager") {
			t.Errorf("round %d: the port sent again: %v, want refused", round, err)
		}
	}
}

// testSMPortRecordedWhileQueued: a tenant's port naming a GUID waits for the
// revision's lock (another change holds it) while a manager records that
// GUID as its subnet manager's port: the port is refused, as the port of a
// subnet manager, and nothing of it is recorded. Its change reads the SM
// ports under the lock, with its rows; read before its transaction, they
// missed the port recorded meanwhile. (SQLite has one writer: the SM port's
// write would wait for the change holding the lock.)
func testSMPortRecordedWhileQueued(t *testing.T, _ Database, s *store.Store) {
	ctx := t.Context()
	addNetwork(t, s, netA, 101)
	const g = 0x0002c90300b10001
	gt, first := blockFirst(t, s, netA, 0x0002c90300b10000)
	answers := queue(t, s, portChange(t, s, boundPort("port-squat", netA, g, "h1")))
	if err := s.RecordSMPort(ctx, g, "manager-2 pid 2"); err != nil {
		t.Fatal(err)
	}
	close(gt.open)
	if o := first(); o.err != nil {
		t.Fatalf("the change holding the lock: %v", o.err)
	}
	o := answers()[0]
	var rej *store.RejectedError
	if !errors.As(o.err, &rej) || !strings.Contains(rej.Reason, "is the port of a subnet manager") {
		t.Errorf("the port naming an SM port recorded while it waited: job %+v, %v; want refused as a subnet manager's port",
			o.job, o.err)
	}
	if p := readPorts(t, s, "port-squat"); p[0] != "port-squat:absent" {
		t.Errorf("the refused port is recorded: %v", p)
	}
}
