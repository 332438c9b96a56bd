package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// newLimitsFixture is newPKeysFixture with the rules and options given.
func newLimitsFixture(t *testing.T, rules store.Rules, o PKeysOptions) *pkeysFixture {
	rules.KubernetesRange = kubeRange
	st := storetest.Open(t, "sqlite").WithRules(rules)
	o.Store, o.Prefix, o.Username, o.Password, o.Version = st, "/ufmRest", ufmUser, ufmPassword, "test 1.0"
	if o.PollInterval == 0 {
		o.PollInterval = 5 * time.Millisecond
	}
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, PKeys: []PKeysOptions{o}}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return &pkeysFixture{fixture: &fixture{t: t, srv: srv, st: st, opts: opts}, user: ufmUser, password: ufmPassword}
}

// guidsBody is an addition to pkey of n GUIDs from first on, as ib-kubernetes
// sends it.
func guidsBody(pkey string, first uint64, n int) string {
	guids := make([]string, n)
	for i := range guids {
		guids[i] = fmt.Sprintf("%016x", first+uint64(i))
	}
	b, _ := json.Marshal(map[string]any{"pkey": pkey, "guids": guids, "membership": "full"})
	return string(b)
}

// removalBody is a removal from pkey of n GUIDs from first on.
func removalBody(pkey string, first uint64, n int) string {
	guids := make([]string, n)
	for i := range guids {
		guids[i] = fmt.Sprintf("%016x", first+uint64(i))
	}
	b, _ := json.Marshal(map[string]any{"pkey": pkey, "guids": guids})
	return string(b)
}

// Each limit refuses the request that would pass it, saying which, and
// records nothing.
func TestPKeysLimits(t *testing.T) {
	f := newLimitsFixture(t, store.Rules{KubernetesMaxMembersPerPKey: 5, KubernetesMaxMembers: 10},
		PKeysOptions{ApplyTimeout: time.Millisecond, MaxGUIDsPerRequest: 4})
	f.must("POST", "/ufmRest/resources/pkeys", guidsBody("0x1005", 0x0200000000000001, 4), http.StatusOK)
	tests := []struct {
		name, path, body string
		status           int
		says             string
	}{
		{"five GUIDs in one addition", "/ufmRest/resources/pkeys", guidsBody("0x1006", 0x0200000000000101, 5),
			http.StatusRequestEntityTooLarge, "at most 4 ([ufm_pkeys] max_guids_per_request)"},
		{"five GUIDs in one removal", "/ufmRest/actions/remove_guids_from_pkey", removalBody("0x1005", 0x0200000000000001, 5),
			http.StatusRequestEntityTooLarge, "max_guids_per_request"},
		{"a pkey of 6 members", "/ufmRest/resources/pkeys", guidsBody("0x1005", 0x0200000000000003, 4), // 2 already in
			http.StatusBadRequest, "pkey 0x1005 has 4 members; 2 more would pass [ufm_pkeys] max_members_per_pkey 5"},
	}
	for _, tt := range tests {
		before := f.revision()
		resp, answer := f.ufm("POST", tt.path, tt.body)
		if resp.StatusCode != tt.status || !strings.Contains(answer, tt.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tt.name, resp.StatusCode, answer, tt.status, tt.says)
		}
		if got := f.revision(); got != before {
			t.Errorf("%s: the revision moved from %d to %d", tt.name, before, got)
		}
	}
	// 4 + 4 fit the total of 10; 3 more do not, whatever the pkey.
	f.must("POST", "/ufmRest/resources/pkeys", guidsBody("0x1006", 0x0200000000000101, 4), http.StatusOK)
	resp, answer := f.ufm("POST", "/ufmRest/resources/pkeys", guidsBody("0x1007", 0x0200000000000201, 3))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer, "8 members in all; 3 more would pass [ufm_pkeys] max_members 10") {
		t.Errorf("past the total: %d %s", resp.StatusCode, answer)
	}
	// Re-adding members is no new member; removing makes room.
	f.must("POST", "/ufmRest/resources/pkeys", guidsBody("0x1006", 0x0200000000000101, 4), http.StatusOK)
	f.must("POST", "/ufmRest/actions/remove_guids_from_pkey", removalBody("0x1006", 0x0200000000000101, 2), http.StatusOK)
	f.must("POST", "/ufmRest/resources/pkeys", guidsBody("0x1007", 0x0200000000000201, 3), http.StatusOK)
}

// Two additions, each under the total alone and over it together, sent at
// once: one is refused.
func TestPKeysLimitsConcurrent(t *testing.T) {
	f := newLimitsFixture(t, store.Rules{KubernetesMaxMembers: 6}, PKeysOptions{ApplyTimeout: time.Millisecond})
	statuses := make(chan int, 2)
	for i := range 2 {
		go func() {
			resp, _ := f.ufm("POST", "/ufmRest/resources/pkeys", guidsBody(fmt.Sprintf("0x100%d", i+1), 0x0200000000000001+uint64(i)*0x100, 4))
			statuses <- resp.StatusCode
		}()
	}
	got := map[int]int{}
	for range 2 {
		got[<-statuses]++
	}
	if got[http.StatusOK] != 1 || got[http.StatusBadRequest] != 1 {
		t.Errorf("statuses %v, want one 200 and one 400", got)
	}
}

// While max_concurrent_requests pkeys requests are served (here one, waiting
// for its apply), the next pkeys request is answered 503 with Retry-After at
// once, and networking-mlnx's requests are served as ever: they take no slot.
func TestPKeysSlots(t *testing.T) {
	f := newLimitsFixture(t, store.Rules{PhysicalNetworks: []string{"ibnet"}},
		PKeysOptions{ApplyTimeout: time.Minute, MaxConcurrentRequests: 1})
	waiting := make(chan int, 1)
	go func() {
		resp, _ := f.ufm("POST", "/ufmRest/resources/pkeys", guidsBody("0x1005", 0x0200000000000001, 1))
		waiting <- resp.StatusCode
	}()
	// The change is recorded (its job is open) and waits for its apply, in
	// its slot.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if jobs, err := f.st.OpenJobs(t.Context(), math.MaxInt64); err == nil && len(jobs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first pkeys change was never recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, path := range []string{"/ufmRest/resources/pkeys", "/ufmRest/resources/pkeys/last_updated"} {
		method, body := "POST", guidsBody("0x1006", 0x0200000000000101, 1)
		if !strings.HasSuffix(path, "pkeys") {
			method, body = "GET", ""
		}
		resp, answer := f.ufm(method, path, body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(answer, "max_concurrent_requests") {
			t.Errorf("%s %s while the slot is taken: %d %s (Retry-After %q), want 503 with Retry-After",
				method, path, resp.StatusCode, answer, resp.Header.Get("Retry-After"))
		}
	}
	if resp, _ := f.ufm("GET", "/ufmRest/app/ufm_version", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("ufm_version (no database) while the slot is taken: %d", resp.StatusCode)
	}
	neutronFlow(t, f.fixture, 0, 5)
	// The apply frees the slot.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go f.applier(ctx)
	if got := <-waiting; got != http.StatusOK {
		t.Fatalf("the waiting change: %d", got)
	}
	f.must("POST", "/ufmRest/resources/pkeys", guidsBody("0x1006", 0x0200000000000101, 1), http.StatusOK)
}

// neutronFlow sends, as networking-mlnx does, a VLAN network and n ports on
// it, numbered from first, and fails the test unless every one is answered
// 202.
func neutronFlow(t *testing.T, f *fixture, first, n int) {
	t.Helper()
	netID := fmt.Sprintf("3b9d6a52-7c1e-4f0a-9e2d-%012x", first)
	network := fmt.Sprintf(`{"id": %q, "name": "n", "provider:network_type": "vlan", `+
		`"provider:physical_network": "ibnet", "provider:segmentation_id": %d}`, netID, 100+first)
	if resp, answer := f.do("POST", "/ufmRestV3/cloudx/Network", network); resp.StatusCode != http.StatusAccepted {
		t.Errorf("networking-mlnx's network: %d %s, want 202", resp.StatusCode, answer)
	}
	for i := first; i < first+n; i++ {
		port := fmt.Sprintf(`{"id": "port-%d", "network_id": %q, "binding:host_id": "h", "device_owner": "compute:nova", `+
			`"binding:vnic_type": "direct", "extra_dhcp_opts": [{"opt_name": "client-id", "opt_value": "20:fa:16:3e:00:00:00:%02x:%02x"}]}`,
			i, netID, i>>8, i&0xff)
		if resp, answer := f.do("POST", "/ufmRestV3/cloudx/Port", port); resp.StatusCode != http.StatusAccepted {
			t.Errorf("networking-mlnx's port %d: %d %s, want 202", i, resp.StatusCode, answer)
		}
	}
}

// The starvation of the issue: four pkeys requests of ~50,000 GUIDs each
// (inside the body limit) sent at once while networking-mlnx's port changes
// flow. Every networking-mlnx request is answered 202; the big ones are
// refused at once (413) for their size, nothing of them recorded.
func TestPKeysDoNotStarveNetworkingMlnx(t *testing.T) {
	f := newLimitsFixture(t, store.Rules{PhysicalNetworks: []string{"ibnet"}}, PKeysOptions{ApplyTimeout: time.Millisecond})
	big := guidsBody("0x1005", 0x0200000000000001, 50000)
	if len(big) > MaxBodyBytes {
		t.Fatalf("the big request is %d bytes, past the body limit", len(big))
	}
	for _, s := range pkeysBesideNeutron(t, f, []string{big, big, big, big}) {
		if s != http.StatusRequestEntityTooLarge && s != http.StatusServiceUnavailable {
			t.Errorf("a pkeys request of 50,000 GUIDs: %d, want 413 (or 503: no slot)", s)
		}
	}
	if pkeys, err := f.st.KubernetesPKeys(t.Context()); err != nil || len(pkeys) != 0 {
		t.Errorf("Kubernetes pkeys %d, %v; want none recorded", len(pkeys), err)
	}
}

// Four pkeys requests at the per-request limit (10,000 GUIDs each) sent at
// once while networking-mlnx's port changes flow: each Kubernetes change is
// committed alone in its lane, never in a group with networking-mlnx's, so
// every networking-mlnx request is answered 202, and every pkeys request
// (four: within max_concurrent_requests) is recorded, 200.
func TestLargePKeysChangesDoNotShareNetworkingMlnxGroups(t *testing.T) {
	f := newLimitsFixture(t, store.Rules{PhysicalNetworks: []string{"ibnet"}}, PKeysOptions{ApplyTimeout: time.Millisecond})
	var bodies []string
	for i := range 4 {
		bodies = append(bodies,
			guidsBody(fmt.Sprintf("0x100%d", i+1), 0x0200000000000001+uint64(i)*0x100000, DefaultMaxGUIDsPerRequest))
	}
	for _, s := range pkeysBesideNeutron(t, f, bodies) {
		if s != http.StatusOK {
			t.Errorf("a pkeys request of %d GUIDs: %d, want 200", DefaultMaxGUIDsPerRequest, s)
		}
	}
}

// pkeysBesideNeutron sends each body as a pkeys request, all at once, while
// networking-mlnx's port changes flow (neutronFlow, 80 ports: each must be
// answered 202), and returns the pkeys requests' statuses.
func pkeysBesideNeutron(t *testing.T, f *pkeysFixture, bodies []string) []int {
	t.Helper()
	var wg sync.WaitGroup
	statuses := make([]int, len(bodies))
	for i, body := range bodies {
		wg.Go(func() {
			resp, _ := f.ufm("POST", "/ufmRest/resources/pkeys", body)
			statuses[i] = resp.StatusCode
		})
	}
	for i := range 4 {
		neutronFlow(t, f.fixture, i*20, 20)
	}
	wg.Wait()
	return statuses
}
