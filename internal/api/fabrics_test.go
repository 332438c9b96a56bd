package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// Two fabrics on one server: the default one (physnet ibnet, its pkeys API
// under /ufmRest, pkeys 0x1000-0x1fff) and "storage" (physnet storage, under
// /storage/ufmRest, pkeys 0x1000-0x2fff). Both ib-kubernetes send the same
// user name, each with its own password: the user name must not be what
// picks the fabric.
const (
	storageFabric   = "storage"
	storagePrefix   = "/storage/ufmRest"
	storagePassword = "s3cret-storage-password"
	storageSection  = "[fabric:storage:ufm_pkeys]"
)

var storageRange = fabric.PKeyRange{First: 0x1000, Last: 0x2fff}

// fabricsFixture serves networking-mlnx's API and both fabrics' pkeys APIs.
// fixture.st is the default fabric's view.
type fabricsFixture struct {
	*fixture
	srvAPI *Server
	// storage is the storage fabric's view.
	storage *store.Store
	// compute and storageK8s send requests as each fabric's ib-kubernetes.
	compute, storageK8s *pkeysFixture
}

// newFabricsFixture serves both fabrics on engine; tune adjusts the storage
// fabric's pkeys options (limits, timeouts) before the server starts.
func newFabricsFixture(t *testing.T, engine string, tune func(o *PKeysOptions)) *fabricsFixture {
	st := openFabrics(t, engine, []store.FabricRules{
		{Name: store.DefaultFabric, Rules: store.Rules{PhysicalNetworks: []string{"ibnet"}, KubernetesRange: kubeRange}},
		{Name: storageFabric, Rules: store.Rules{PhysicalNetworks: []string{"storage"}, KubernetesRange: storageRange}},
	})
	storage := st.DB().Fabric(storageFabric)
	compute := PKeysOptions{Store: st, Prefix: "/ufmRest", Username: ufmUser, Password: ufmPassword,
		ApplyTimeout: 10 * time.Millisecond, PollInterval: 5 * time.Millisecond, Version: "test 1.0"}
	other := compute
	other.Fabric, other.Section, other.Store, other.Prefix, other.Password = storageFabric, storageSection, storage, storagePrefix, storagePassword
	if tune != nil {
		tune(&other)
	}
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, PKeys: []PKeysOptions{compute, other}}
	s := New(opts, st, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	base := &fixture{t: t, srv: srv, st: st, opts: opts}
	return &fabricsFixture{fixture: base, srvAPI: s, storage: storage,
		compute:    &pkeysFixture{fixture: base, user: ufmUser, password: ufmPassword},
		storageK8s: &pkeysFixture{fixture: base, user: ufmUser, password: storagePassword}}
}

// openFabrics is a migrated store on a fresh database of engine serving
// fabrics; it returns the first fabric's view.
func openFabrics(t *testing.T, engine string, fabrics []store.FabricRules) *store.Store {
	t.Helper()
	return openFabricsOn(t, storetest.NewMigratedDatabase(t, engine), fabrics)
}

// openFabricsOn is openFabrics on database db.
func openFabricsOn(t *testing.T, db storetest.Database, fabrics []store.FabricRules) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := storeopen.OpenFabrics(ctx, db.Engine, db.DSN, true, fabrics, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("open %s: %v", db.Engine, err)
	}
	t.Cleanup(func() { st.Close() })
	return st.Fabric(fabrics[0].Name)
}

// kubernetesPKeys lists the Kubernetes pkeys a fabric's view holds.
func kubernetesPKeys(t *testing.T, st *store.Store) []fabric.PKey {
	t.Helper()
	list, err := st.KubernetesPKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []fabric.PKey
	for _, p := range list {
		out = append(out, p.PKey)
	}
	return out
}

// TestFabricPKeysCredentialsOpenOnlyTheirFabric: each fabric's ib-kubernetes
// credentials open its own prefix and never the other fabric's, for reads and
// changes alike; a refused change records nothing in either fabric; new
// credentials of one fabric leave the other's as they were.
func TestFabricPKeysCredentialsOpenOnlyTheirFabric(t *testing.T) {
	f := newFabricsFixture(t, "sqlite", nil)
	type request struct{ method, path, body string }
	requests := func(prefix, pkey string) []request {
		return []request{
			{"GET", prefix + "/app/ufm_version", ""},
			{"GET", prefix + "/resources/pkeys", ""},
			{"GET", prefix + "/resources/pkeys/last_updated", ""},
			{"POST", prefix + "/resources/pkeys", `{"pkey":"` + pkey + `","guids":["` + podGUID1 + `"]}`},
		}
	}
	for _, c := range []struct {
		name   string
		as     *pkeysFixture
		prefix string
		pkey   string
		want   int
	}{
		{"compute's on its own", f.compute, "/ufmRest", "0x1001", http.StatusOK},
		{"storage's on its own", f.storageK8s, storagePrefix, "0x1002", http.StatusOK},
		{"compute's on storage's", f.compute, storagePrefix, "0x1003", http.StatusUnauthorized},
		{"storage's on compute's", f.storageK8s, "/ufmRest", "0x1004", http.StatusUnauthorized},
	} {
		for _, r := range requests(c.prefix, c.pkey) {
			resp, body := c.as.ufm(r.method, r.path, r.body)
			if resp.StatusCode != c.want {
				t.Errorf("%s: %s %s: %d %s, want %d", c.name, r.method, r.path, resp.StatusCode, body, c.want)
			}
			if c.want == http.StatusUnauthorized && !strings.Contains(body, sectionOf(c.prefix)) {
				t.Errorf("%s: %s %s: the refusal %s does not name %s", c.name, r.method, r.path, body, sectionOf(c.prefix))
			}
		}
	}
	// networking-mlnx's token opens neither.
	for _, prefix := range []string{"/ufmRest", storagePrefix} {
		if resp, _ := f.do("GET", prefix+"/resources/pkeys", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s/resources/pkeys with the API token: %d, want 401", prefix, resp.StatusCode)
		}
	}
	for _, view := range []*store.Store{f.st, f.storage} {
		for _, p := range kubernetesPKeys(t, view) {
			if p == 0x1003 || p == 0x1004 {
				t.Errorf("fabric %s holds pkey %s, which a refused request named", view.FabricName(), p)
			}
		}
	}

	// The storage fabric's password changes; the compute fabric's stays.
	const newStorage = "n3w-storage-password-0123"
	f.srvAPI.SetCredentials(Credentials{Token: token, PKeys: map[string]PKeysCredentials{
		store.DefaultFabric: {Username: ufmUser, Password: ufmPassword},
		storageFabric:       {Username: ufmUser, Password: newStorage},
	}})
	for _, c := range []struct {
		prefix, password string
		want             int
	}{
		{"/ufmRest", ufmPassword, http.StatusOK},
		{storagePrefix, storagePassword, http.StatusUnauthorized},
		{storagePrefix, newStorage, http.StatusOK},
		{"/ufmRest", newStorage, http.StatusUnauthorized},
	} {
		as := &pkeysFixture{fixture: f.fixture, user: ufmUser, password: c.password}
		if resp, body := as.ufm("GET", c.prefix+"/app/ufm_version", ""); resp.StatusCode != c.want {
			t.Errorf("after the storage fabric's change: %s with %q: %d %s, want %d", c.prefix, c.password, resp.StatusCode, body, c.want)
		}
	}
}

// sectionOf is the configuration section of the pkeys API under prefix.
func sectionOf(prefix string) string {
	if prefix == storagePrefix {
		return storageSection
	}
	return "[ufm_pkeys]"
}

// TestFabricPKeysLimitsAreTheFabrics: a fabric's pkey_range, GUIDs per
// request and slots are its own: a refusal names its section, and a full
// fabric never holds the other's requests off.
func TestFabricPKeysLimitsAreTheFabrics(t *testing.T) {
	f := newFabricsFixture(t, "sqlite", func(o *PKeysOptions) {
		o.MaxGUIDsPerRequest, o.MaxConcurrentRequests, o.ApplyTimeout = 1, 1, time.Minute
	})
	// The storage fabric takes at most one GUID a request; the compute
	// fabric its default.
	resp, body := f.storageK8s.ufm("POST", storagePrefix+"/resources/pkeys", guidsBody("0x1005", 0x0200000000000001, 2))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, storageSection+" max_guids_per_request") {
		t.Errorf("two GUIDs on the storage fabric: %d %s, want 413 naming %s max_guids_per_request", resp.StatusCode, body, storageSection)
	}
	f.compute.must("POST", "/ufmRest/resources/pkeys", guidsBody("0x1005", 0x0200000000000001, 2), http.StatusOK)
	// 0x2005 is in the storage fabric's pkey_range only.
	resp, body = f.compute.ufm("POST", "/ufmRest/resources/pkeys/add", `{"pkey":"0x2005"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "0x1000-0x1fff") {
		t.Errorf("0x2005 on the compute fabric: %d %s, want 400 naming its range", resp.StatusCode, body)
	}

	// A storage change waits for its apply in the storage fabric's one slot.
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", f.srv.URL+storagePrefix+"/resources/pkeys/add", strings.NewReader(`{"pkey":"0x2005"}`))
		req.SetBasicAuth(ufmUser, storagePassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			waiting <- 0
			return
		}
		resp.Body.Close()
		waiting <- resp.StatusCode
	}()
	defer func() { cancel(); <-waiting }()
	waitFor(t, "the storage change recorded", func() bool { return slices.Contains(kubernetesPKeys(t, f.storage), 0x2005) })
	resp, body = f.storageK8s.ufm("GET", storagePrefix+"/resources/pkeys", "")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, storageSection+" max_concurrent_requests") {
		t.Errorf("the storage fabric's second request: %d %s, want 503 naming %s max_concurrent_requests", resp.StatusCode, body, storageSection)
	}
	for range 5 { // more than the storage fabric's one slot and the default's four, one after another
		f.compute.must("GET", "/ufmRest/resources/pkeys", "", http.StatusOK)
	}
}

// waitFor waits until cond holds, failing the test after 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFabricPKeysOff: a fabric whose pkeys API is off serves no route; its
// prefix answers 404 naming its section, while the other fabric's is served.
func TestFabricPKeysOff(t *testing.T) {
	f := newFabricsFixture(t, "sqlite", func(o *PKeysOptions) { o.Store = nil })
	resp, body := f.storageK8s.ufm("GET", storagePrefix+"/app/ufm_version", "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "the pkeys API is off: set "+storageSection) {
		t.Errorf("the storage fabric's API off: %d %s, want 404 naming %s", resp.StatusCode, body, storageSection)
	}
	f.compute.must("GET", "/ufmRest/app/ufm_version", "", http.StatusOK)
}

// pkeysListed reads a fabric's pkeys API's list with guids_data: each pkey
// with its members' GUIDs.
func (f *pkeysFixture) pkeysListed(prefix string) map[string][]string {
	f.t.Helper()
	body := f.must("GET", prefix+"/resources/pkeys?guids_data=true", "", http.StatusOK)
	var list map[string]pkeyView
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		f.t.Fatalf("pkeys list %q: %v", body, err)
	}
	out := map[string][]string{}
	for key, p := range list {
		out[key] = []string{}
		if p.GUIDs != nil {
			for _, g := range *p.GUIDs {
				out[key] = append(out[key], g.GUID)
			}
		}
	}
	return out
}

// completeJobs completes every open job of view's fabric, as a proven sweep
// of its OpenSM would.
func completeJobs(t *testing.T, view *store.Store) {
	t.Helper()
	term, err := view.NewTerm(t.Context(), "test applier")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := view.Revision(t.Context())
	if err == nil {
		_, err = view.CompleteJobs(t.Context(), term, rev)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// jsonOf decodes an answer, failing the test if it is not JSON.
func jsonOf[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return v
}

// changeJob is the job ID a pkeys change's answer names.
func changeJob(t *testing.T, body string) string {
	t.Helper()
	var v appliedView
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Job.ID == "" {
		t.Fatalf("change answered %q: no job (%v)", body, err)
	}
	return v.Job.ID
}

// TestFabricPKeysSamePKeyIsTwoPartitions: one pkey through each fabric's API
// is two partitions, each with its own members, listed and deleted on its own
// fabric only; a fabric's job path reads its own jobs only. On every engine.
func TestFabricPKeysSamePKeyIsTwoPartitions(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			f := newFabricsFixture(t, engine, nil)
			computeJob := changeJob(t, f.compute.must("POST", "/ufmRest/resources/pkeys",
				`{"pkey":"0x1005","guids":["`+podGUID1+`"]}`, http.StatusOK))
			storageJob := changeJob(t, f.storageK8s.must("POST", storagePrefix+"/resources/pkeys",
				`{"pkey":"0x1005","guids":["`+podGUID2+`"]}`, http.StatusOK))
			wantLists := func(when string, compute, storage map[string][]string) {
				t.Helper()
				if got := f.compute.pkeysListed("/ufmRest"); !reflect.DeepEqual(got, compute) {
					t.Errorf("%s: the compute fabric lists %v, want %v", when, got, compute)
				}
				if got := f.storageK8s.pkeysListed(storagePrefix); !reflect.DeepEqual(got, storage) {
					t.Errorf("%s: the storage fabric lists %v, want %v", when, got, storage)
				}
			}
			// Each fabric lists the default partition too, without members.
			wantLists("after both additions", map[string][]string{"0x1005": {podGUID1}, "0x7fff": {}},
				map[string][]string{"0x1005": {podGUID2}, "0x7fff": {}})
			if got, want := kubernetesPKeys(t, f.storage), []fabric.PKey{0x1005}; !slices.Equal(got, want) {
				t.Errorf("the storage fabric's view holds %v, want %v", got, want)
			}

			// The compute fabric's apply completes its job and moves its
			// last_updated only.
			completeJobs(t, f.st)
			for _, c := range []struct {
				as                *pkeysFixture
				prefix, job, want string
				updated           bool
			}{
				{f.compute, "/ufmRest", computeJob, store.StatusCompleted, true},
				{f.storageK8s, storagePrefix, storageJob, store.StatusPending, false},
			} {
				job := jsonOf[jobView](t, c.as.must("GET", c.prefix+"/jobs/"+c.job, "", http.StatusOK))
				last := jsonOf[map[string]*string](t, c.as.must("GET", c.prefix+"/resources/pkeys/last_updated", "", http.StatusOK))
				if job.Status != c.want || (last["last_updated"] != nil) != c.updated {
					t.Errorf("after the compute fabric's apply: %s's job is %s and last_updated %v; want %s, set %t",
						c.prefix, job.Status, last["last_updated"], c.want, c.updated)
				}
			}

			f.storageK8s.must("DELETE", storagePrefix+"/resources/pkeys/0x1005", "", http.StatusOK)
			wantLists("after the storage fabric's deletion", map[string][]string{"0x1005": {podGUID1}, "0x7fff": {}},
				map[string][]string{"0x7fff": {}})
			if body := f.storageK8s.must("GET", storagePrefix+"/resources/pkeys/0x1005", "", http.StatusOK); strings.TrimSpace(body) != "{}" {
				t.Errorf("the storage fabric's deleted 0x1005: %s, want {}", body)
			}
			f.compute.must("GET", "/ufmRest/resources/pkeys/0x1005", "", http.StatusOK)

			// Each job is read under its own fabric's prefix, and is "not
			// known" under the other's.
			for _, c := range []struct {
				as     *pkeysFixture
				prefix string
				job    string
				want   int
			}{
				{f.compute, "/ufmRest", computeJob, http.StatusOK},
				{f.storageK8s, storagePrefix, storageJob, http.StatusOK},
				{f.compute, "/ufmRest", storageJob, http.StatusNotFound},
				{f.storageK8s, storagePrefix, computeJob, http.StatusNotFound},
			} {
				if resp, body := c.as.ufm("GET", c.prefix+"/jobs/"+c.job, ""); resp.StatusCode != c.want {
					t.Errorf("GET %s/jobs/%s: %d %s, want %d", c.prefix, c.job, resp.StatusCode, body, c.want)
				}
			}
		})
	}
}

// neutronNetwork is a VLAN network on physnet as networking-mlnx sends it.
func neutronNetwork(id, physnet string, vlan int) string {
	return fmt.Sprintf(`{"id": %q, "name": "n", "provider:network_type": "vlan", "provider:physical_network": %q, `+
		`"provider:segmentation_id": %d}`, id, physnet, vlan)
}

// neutronPort is a bound port on network whose client-id holds guid.
func neutronPort(id, network string, guid uint64) string {
	return fmt.Sprintf(`{"id": %q, "network_id": %q, "binding:host_id": "h", "device_owner": "compute:nova", `+
		`"binding:vnic_type": "direct", "extra_dhcp_opts": [{"opt_name": "client-id", "opt_value": %q}]}`,
		id, network, clientIDOf(guid))
}

// clientIDOf is the client-id networking-mlnx sends for a port's GUID.
func clientIDOf(guid uint64) string {
	octets := []string{"ff", "00", "00", "00", "00", "00", "02", "00", "00", "02", "c9", "00"}
	for i := 7; i >= 0; i-- {
		octets = append(octets, fmt.Sprintf("%02x", byte(guid>>(8*i))))
	}
	return strings.Join(octets, ":")
}

// TestFabricNeutronNetworksLandInTheirFabric: networking-mlnx's requests need
// no fabric: a network on each fabric's physical network lands in that fabric
// (the same VLAN on both is accepted on both, and one GUID in a port of each),
// a network on no fabric's physical network is accepted and left alone, and a
// port cannot move to another fabric's network. On every engine.
func TestFabricNeutronNetworksLandInTheirFabric(t *testing.T) {
	const (
		computeNet = "3b9d6a52-7c1e-4f0a-9e2d-00000000000a"
		storageNet = "3b9d6a52-7c1e-4f0a-9e2d-00000000000b"
		otherNet   = "3b9d6a52-7c1e-4f0a-9e2d-00000000000c"
		guid       = 0x0002c90300000101
	)
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			f := newFabricsFixture(t, engine, nil)
			jobs := map[string]string{}
			for _, r := range []struct{ name, path, body string }{
				{"compute network", "/ufmRestV3/cloudx/Network", neutronNetwork(computeNet, "ibnet", 100)},
				{"storage network", "/ufmRestV3/cloudx/Network", neutronNetwork(storageNet, "storage", 100)},
				{"network on no fabric", "/ufmRestV3/cloudx/Network", neutronNetwork(otherNet, "ethnet", 100)},
				{"compute port", "/ufmRestV3/cloudx/Port", neutronPort("port-a", computeNet, guid)},
				{"storage port", "/ufmRestV3/cloudx/Port", neutronPort("port-b", storageNet, guid)},
			} {
				resp, body := f.do("POST", r.path, r.body)
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("%s: %d %s, want 202", r.name, resp.StatusCode, body)
				}
				path, _ := jobPath(t, body)
				jobs[r.name] = path
			}
			for name, path := range jobs {
				resp, body := f.do("GET", "/ufmRestV3/"+path, "")
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET the %s's job: %d %s", name, resp.StatusCode, body)
				}
				var job jobView
				if err := json.Unmarshal([]byte(body), &job); err != nil {
					t.Fatal(err)
				}
				// Only the network on no fabric touches no partition: done at once.
				if done := job.Status == store.StatusCompleted; done != (name == "network on no fabric") {
					t.Errorf("the %s's job: %s", name, body)
				}
			}
			for _, c := range []struct {
				view    *store.Store
				network string
			}{{f.st, computeNet}, {f.storage, storageNet}} {
				snap, err := c.view.Snapshot(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				var nets []string
				for _, n := range snap.Networks {
					nets = append(nets, n.ID)
				}
				if !slices.Equal(nets, []string{c.network}) {
					t.Errorf("fabric %s holds networks %v, want %s alone", c.view.FabricName(), nets, c.network)
				}
				if len(snap.Members) != 1 || snap.Members[0].GUID != guid || snap.Members[0].NetworkID != c.network {
					t.Errorf("fabric %s holds members %+v, want %016x in %s", c.view.FabricName(), snap.Members, guid, c.network)
				}
			}
			// Neutron never moves a port between networks; one of another
			// fabric is refused, and the port stays where it is.
			resp, body := f.do("PUT", "/ufmRestV3/cloudx/Port/port-a", neutronPort("port-a", storageNet, guid))
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("port moved to the storage fabric's network: %d %s, want 400", resp.StatusCode, body)
			}
		})
	}
}

// TestFabricPKeysOwnListener: a fabric's pkeys API on a listener of its own
// keeps ib-kubernetes' /ufmRest, which the default fabric's holds on the
// API's handler: each handler serves its own fabric there, the own one
// serves nothing else, logs its requests with the fabric, and says when its
// API is off.
func TestFabricPKeysOwnListener(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("off=%t", off), func(t *testing.T) {
			f := newFabricsFixture(t, "sqlite", func(o *PKeysOptions) {
				o.Prefix, o.OwnListener = "/ufmRest", true
				if off {
					o.Store = nil
				}
			})
			if f.srvAPI.PKeysHandler(store.DefaultFabric) != nil {
				t.Error("the default fabric has a handler of its own")
			}
			var logged bytes.Buffer
			f.srvAPI.log = slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
			own := f.srvAPI.PKeysHandler(storageFabric)
			if own == nil {
				t.Fatal("no handler for the storage fabric's own listener")
			}
			serve := func(user, password, path string) (int, string) {
				req := httptest.NewRequest("GET", path, nil)
				req.SetBasicAuth(user, password)
				rec := httptest.NewRecorder()
				own.ServeHTTP(rec, req)
				return rec.Code, rec.Body.String()
			}
			code, body := serve(ufmUser, storagePassword, "/ufmRest/app/ufm_version")
			switch {
			case off && (code != http.StatusNotFound || !strings.Contains(body, "the pkeys API is off: set "+storageSection)):
				t.Errorf("the storage fabric's API off: %d %s, want 404 naming %s", code, body, storageSection)
			case !off && code != http.StatusOK:
				t.Errorf("ufm_version on the storage listener: %d %s", code, body)
			}
			if code, body := serve(ufmUser, ufmPassword, "/ufmRest/resources/pkeys"); code != map[bool]int{false: http.StatusUnauthorized, true: http.StatusNotFound}[off] {
				t.Errorf("the default fabric's password on the storage listener: %d %s", code, body)
			}
			if code, _ := serve(ufmUser, storagePassword, "/ufmRestV3/cloudx/Network"); code != http.StatusNotFound {
				t.Errorf("networking-mlnx's route on the storage listener: %d, want 404", code)
			}
			line := `"path":"/ufmRest/app/ufm_version","route":"ufm/app/ufm_version","status":200`
			if off {
				line = `"path":"/ufmRest/app/ufm_version","route":"unmatched","status":404`
			}
			if !strings.Contains(logged.String(), line) || !strings.Contains(logged.String(), `"request_id":`) ||
				(!off && !strings.Contains(logged.String(), `"fabric":"storage"`)) {
				t.Errorf("the access log lacks %s with its request id (and fabric):\n%s", line, logged.String())
			}
			// The API's handler: /ufmRest is the default fabric's alone.
			f.compute.must("GET", "/ufmRest/app/ufm_version", "", http.StatusOK)
			f.storageK8s.must("GET", "/ufmRest/app/ufm_version", "", http.StatusUnauthorized)
		})
	}
}
