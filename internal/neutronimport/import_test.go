package neutronimport

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/neutrontest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

var rules = store.Rules{PhysicalNetworks: []string{"ibnet"}}

// newStore is an empty, migrated SQLite store.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := storeopen.Open(t.Context(), config.EngineSQLite, filepath.Join(t.TempDir(), "afm.db"), true, rules,
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.DB().Close() })
	return st
}

// connect is an API on n's Neutron, pageSize at a time, that counts the
// list requests it sends.
func connect(t *testing.T, n *neutrontest.Server, pageSize int, lists *atomic.Int64) API {
	t.Helper()
	client, err := Connect(t.Context(), n.CloudsFile(t), "neutrontest")
	if err != nil {
		t.Fatal(err)
	}
	client.HTTPClient.Transport = countLists{lists}
	return API{Client: client, PageSize: pageSize}
}

type countLists struct{ n *atomic.Int64 }

func (c countLists) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/networks") || strings.HasSuffix(r.URL.Path, "/ports") {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func guid(i int) fabric.GUID { return fabric.GUID(0x0002c90300000000 + uint64(i)) }

// TestImportReadsEveryPage: with pages of 2, Neutron's 5 networks and 5
// ports arrive in several pages each, and every one is recorded.
func TestImportReadsEveryPage(t *testing.T) {
	t.Parallel() // a neutron-server, a store and a directory of its own
	n := neutrontest.Start(t, "ibnet")
	st := newStore(t)
	for i := 1; i <= 5; i++ {
		id := n.CreateNetwork(t, neutrontest.Network{Name: "n", Type: "vlan", Physnet: "ibnet", VLAN: 100 + i})
		n.CreatePort(t, neutrontest.Port{NetworkID: id, Host: "node", ClientID: neutrontest.ClientID(guid(i))})
	}
	var lists atomic.Int64
	r, err := Import(t.Context(), st, connect(t, n, 2, &lists), rules, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Recorded) != 10 || !r.Agrees() {
		t.Errorf("recorded %d, agrees %v, want 10 and true: %+v", len(r.Recorded), r.Agrees(), r)
	}
	if lists.Load() < 6 {
		t.Errorf("%d list requests for 5 networks and 5 ports in pages of 2, want at least 6", lists.Load())
	}
	snap, err := st.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Networks) != 5 || len(snap.Members) != 5 {
		t.Errorf("recorded %d networks and %d members, want 5 and 5", len(snap.Networks), len(snap.Members))
	}
}

// deletingSource is the API of a real Neutron that deletes ports and
// networks in Neutron right after its listing: what an operator does while
// the import runs.
type deletingSource struct {
	API
	after func()
}

func (d deletingSource) List(ctx context.Context) (Listing, error) {
	l, err := d.API.List(ctx)
	d.after()
	return l, err
}

// TestImportDoesNotBringBackWhatNeutronDeletesMeanwhile: a port and a network
// deleted in Neutron between the listing and their record are skipped, not
// recorded: a GUID given to a deleted port would stay in the partition.
func TestImportDoesNotBringBackWhatNeutronDeletesMeanwhile(t *testing.T) {
	t.Parallel() // a neutron-server, a store and a directory of its own
	n := neutrontest.Start(t, "ibnet")
	st := newStore(t)
	kept := n.CreateNetwork(t, neutrontest.Network{Name: "kept", Type: "vlan", Physnet: "ibnet", VLAN: 150})
	gone := n.CreateNetwork(t, neutrontest.Network{Name: "gone", Type: "vlan", Physnet: "ibnet", VLAN: 151})
	stays := n.CreatePort(t, neutrontest.Port{NetworkID: kept, Host: "node-1", ClientID: neutrontest.ClientID(guid(1))})
	deleted := n.CreatePort(t, neutrontest.Port{NetworkID: kept, Host: "node-2", ClientID: neutrontest.ClientID(guid(2))})
	src := deletingSource{API: connect(t, n, 0, new(atomic.Int64)), after: func() {
		n.Delete(t, "ports", deleted)
		n.Delete(t, "networks", gone)
	}}
	r, err := Import(t.Context(), st, src, rules, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkFindings(t, "skipped", r.Skipped, []string{"network " + gone + ": deleted in Neutron while the import ran",
		"port " + deleted + ": deleted in Neutron while the import ran"})
	if _, err := st.GetPort(t.Context(), deleted); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the port deleted meanwhile is recorded (%v)", err)
	}
	if p, err := st.GetPort(t.Context(), stays); err != nil || p.GUID == nil || *p.GUID != guid(1) {
		t.Errorf("the port that stays: %+v, %v; want it with GUID %s", p, err, guid(1))
	}
}

// TestImportRecordsWhileNetworkingMlnxSends: networking-mlnx records a
// network and port of its own while the import runs (after the import read
// the records): the import neither lists them as Neutron's lack nor, with
// --prune, removes them.
func TestImportRecordsWhileNetworkingMlnxSends(t *testing.T) {
	t.Parallel() // a neutron-server, a store and a directory of its own
	n := neutrontest.Start(t, "ibnet")
	st := newStore(t)
	n.CreateNetwork(t, neutrontest.Network{Name: "n", Type: "vlan", Physnet: "ibnet", VLAN: 150})
	vlan := int64(160)
	src := deletingSource{API: connect(t, n, 0, new(atomic.Int64)), after: func() {
		if _, err := st.RecordNetwork(t.Context(), store.NetworkChange{Operation: store.OpCreateNetwork,
			Network: store.NetworkSpec{ID: "sent-meanwhile", Type: "vlan", PhysicalNetwork: "ibnet", SegmentationID: &vlan}}); err != nil {
			t.Error(err)
		}
	}}
	r, err := Import(t.Context(), st, src, rules, Options{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.NotInNeutron) != 0 || len(r.Removed) != 0 {
		t.Errorf("what networking-mlnx sent during the import is listed: not in Neutron %v, removed %v", r.NotInNeutron, r.Removed)
	}
	snap, err := st.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Networks) != 2 {
		t.Errorf("recorded networks %+v, want Neutron's and the one sent meanwhile", snap.Networks)
	}
}

// TestPruneRefusesAnEmptyNeutron: a Neutron that lists no InfiniBand network
// while networks are recorded is more likely the wrong cloud or physnet
// than a cloud whose every network was deleted: --prune removes nothing.
func TestPruneRefusesAnEmptyNeutron(t *testing.T) {
	t.Parallel() // a neutron-server, a store and a directory of its own
	n := neutrontest.Start(t, "ibnet")
	st := newStore(t)
	vlan := int64(150)
	if _, err := st.RecordNetwork(t.Context(), store.NetworkChange{Operation: store.OpCreateNetwork,
		Network: store.NetworkSpec{ID: "recorded", Type: "vlan", PhysicalNetwork: "ibnet", SegmentationID: &vlan}}); err != nil {
		t.Fatal(err)
	}
	_, err := Import(t.Context(), st, connect(t, n, 0, new(atomic.Int64)), rules, Options{Prune: true})
	if err == nil || !strings.Contains(err.Error(), "not pruning") {
		t.Errorf("--prune against a Neutron without InfiniBand networks: %v, want it refused", err)
	}
	if snap, err := st.Snapshot(t.Context()); err != nil || len(snap.Networks) != 1 {
		t.Errorf("the recorded network after the refused prune: %+v, %v", snap.Networks, err)
	}
}

// TestConnectKeepsTheSecret: logging in with an application credential
// fails (here, the endpoint is a Neutron, not a Keystone); the error names
// the cloud and the file, never the secret.
func TestConnectKeepsTheSecret(t *testing.T) {
	t.Parallel() // a neutron-server, a store and a directory of its own
	n := neutrontest.Start(t, "ibnet")
	const secret = "app-cred-s3cret-never-shown"
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	text := "clouds:\n  ib:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: " + n.URL +
		"v3\n      application_credential_id: 0123abcd\n      application_credential_secret: " + secret + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Connect(t.Context(), path, "ib")
	if err == nil {
		t.Fatal("logging in to a Neutron as if it were Keystone succeeded")
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), `cloud "ib"`) {
		t.Errorf("error %q: want it to name the cloud and not hold the secret", err)
	}
}
