package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// newUFMClientsFixture serves the pkeys API with the ports of the subnet
// dump at dump, on a SQLite store whose jobs an applier completes.
func newUFMClientsFixture(t *testing.T, dump string) *pkeysFixture {
	st := storetest.Open(t, "sqlite").WithRules(store.Rules{KubernetesRange: kubeRange})
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, PKeys: []PKeysOptions{{
		Store: st, Prefix: "/ufmRest", Username: ufmUser, Password: ufmPassword, Ports: topology.NewDump(dump),
		ApplyTimeout: 20 * time.Second, PollInterval: 5 * time.Millisecond, Version: "test 1.0",
	}}}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	f := &pkeysFixture{fixture: &fixture{t: t, srv: srv, st: st, opts: opts}, user: ufmUser, password: ufmPassword}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.applier(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return f
}

// indented is a JSON answer indented, as the golden files keep it.
func indented(t *testing.T, body string) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(body), "", "  "); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return append(out.Bytes(), '\n')
}

// TestUFMPorts reads the simulated fabric's ports as NICo does: the hosts'
// alone with sys_type=Computer, one by GUID or by name, 404 for a GUID the
// fabric has not, 503 while there is no dump.
func TestUFMPorts(t *testing.T) {
	f := newUFMClientsFixture(t, filepath.Join("testdata", "ufm", "opensm-subnet.lst"))
	none := newUFMClientsFixture(t, filepath.Join(t.TempDir(), topology.FileName))
	// H1's node description mimics H2's port in JSON: it stays H1's text.
	hostile := newUFMClientsFixture(t, filepath.Join("testdata", "ufm", "hostile-subnet.lst"))
	tests := []struct {
		name   string
		f      *pkeysFixture
		path   string
		status int
		golden string // the answer's file in testdata/ufm, or a part of the answer
	}{
		{"hosts", f, "/ufmRest/resources/ports?sys_type=Computer", 200, "ports_computer.json"},
		{"every port", f, "/ufmRest/resources/ports", 200, "ports_all.json"},
		{"switches", f, "/ufmRest/resources/ports?sys_type=switch", 200, "ports_switch.json"},
		{"by GUID", f, "/ufmRest/resources/ports/0002c90300000101", 200, "port_h1.json"},
		{"by name", f, "/ufmRest/resources/ports/0002c90300000101_1", 200, "port_h1.json"},
		{"by GUID in capitals and 0x", f, "/ufmRest/resources/ports/0x0002C90300000101", 200, "port_h1.json"},
		{"unknown GUID", f, "/ufmRest/resources/ports/0002c90300009999", 404, `no port "0002c90300009999"`},
		{"a switch's GUID", f, "/ufmRest/resources/ports/0002c90300f00001", 400, "name one as <guid>_<port number>"},
		{"unknown sys_type", f, "/ufmRest/resources/ports?sys_type=Mainframe", 400, "want Computer, Switch or Router"},
		{"a hostile description", hostile, "/ufmRest/resources/ports/0002c90300000101", 200, "port_h1_hostile.json"},
		{"the host it mimics", hostile, "/ufmRest/resources/ports/0002c90300000201", 200, "port_h2.json"},
		{"no dump yet", none, "/ufmRest/resources/ports?sys_type=Computer", 503, "the fabric's ports are not known yet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tc.f.ufm("GET", tc.path, "")
			if resp.StatusCode != tc.status {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, resp.StatusCode, body, tc.status)
			}
			if strings.HasSuffix(tc.golden, ".json") {
				golden.Compare(t, filepath.Join("testdata", "ufm", tc.golden), indented(t, body))
			} else if !strings.Contains(errorOf(body), tc.golden) {
				t.Errorf("GET %s: %s, want it to say %q", tc.path, body, tc.golden)
			}
		})
	}
	f.user = "someone-else"
	if resp, _ := f.ufm("GET", "/ufmRest/resources/ports", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("ports with wrong credentials: %d, want 401", resp.StatusCode)
	}
}

// step is one call of a client's sequence and what it answers: the whole
// answer (a read), or a part of it.
type step struct {
	method, path, body string
	status             int
	answer             string // the whole answer, when exact
	says               string // a part of the answer
}

// run sends the steps in order, each after the previous one's answer.
func (f *pkeysFixture) run(t *testing.T, steps []step) {
	t.Helper()
	for i, s := range steps {
		resp, body := f.ufm(s.method, s.path, s.body)
		switch {
		case resp.StatusCode != s.status:
			t.Fatalf("step %d, %s %s: %d %s, want %d", i, s.method, s.path, resp.StatusCode, body, s.status)
		case s.answer != "" && strings.TrimSpace(body) != s.answer:
			t.Fatalf("step %d, %s %s:\n%s\nwant\n%s", i, s.method, s.path, body, s.answer)
		case !strings.Contains(body, s.says) && !strings.Contains(errorOf(body), s.says):
			t.Fatalf("step %d, %s %s: %s, want it to say %q", i, s.method, s.path, body, s.says)
		}
	}
}

// errorOf is the error an answer gives, unescaped; "" if none.
func errorOf(body string) string {
	var v struct {
		Error string `json:"error"`
	}
	json.Unmarshal([]byte(body), &v)
	return v.Error
}

const (
	sdkGUID1 = "0002c90300000101"
	sdkGUID2 = "0002c90300000201"
	sdkGUID3 = "0002c90300000301"
)

// TestUFMClientSequences sends each client's calls in its own order: the UFM
// SDK's pkeys tool (PUT with per-GUID memberships, GET guids_data, DELETE
// GUIDs, DELETE the pkey) and NICo's reads (the list with guids_data and
// qos_conf, the default partition, an unknown pkey).
func TestUFMClientSequences(t *testing.T) {
	dump := filepath.Join("testdata", "ufm", "opensm-subnet.lst")
	def := `"0x7fff":{"pkey":"0x7fff","partition":"management","ip_over_ib":true,"membership":"limited","index0":false,"guids":[]}`
	// ib-kubernetes and NICo's POST send no QoS: qos_conf reads what OpenSM
	// applies to a partition without mtu=, rate= and sl=, not UFM's 2.5.
	qos := `{"mtu_limit":2,"rate_limit":10,"service_level":0}`
	defQoS := strings.TrimSuffix(def, "}") + `,"qos_conf":` + qos + `}`
	defBare := `"0x7fff":{"pkey":"0x7fff","partition":"management","ip_over_ib":true,"membership":"limited"}`
	sequences := []struct {
		name  string
		steps []step
	}{
		{"sdk pkeys tool", []step{
			{method: "PUT", path: "/ufmRest/resources/pkeys", status: 200, says: `"applied":true`,
				body: `{"guids":["` + sdkGUID1 + `","` + sdkGUID2 + `"],"pkey":"0x16a1","index0":false,"ip_over_ib":true,"memberships":["full","limited"]}`},
			{method: "GET", path: "/ufmRest/resources/pkeys/0x16a1?guids_data=true", status: 200,
				answer: `{"pkey":"0x16a1","partition":"k8s-16a1","ip_over_ib":true,"guids":[{"guid":"` + sdkGUID1 +
					`","membership":"full","index0":false},{"guid":"` + sdkGUID2 + `","membership":"limited","index0":false}]}`},
			// PUT again replaces: GUID 1 leaves, GUID 3 joins, GUID 2 is full.
			{method: "PUT", path: "/ufmRest/resources/pkeys", status: 200, says: sdkGUID1 + " are no members any more",
				body: `{"guids":["` + sdkGUID2 + `","` + sdkGUID3 + `"],"pkey":"0x16a1","index0":false,"ip_over_ib":true,"membership":"full"}`},
			{method: "GET", path: "/ufmRest/resources/pkeys?guids_data=true", status: 200,
				answer: `{"0x16a1":{"pkey":"0x16a1","partition":"k8s-16a1","ip_over_ib":true,"guids":[{"guid":"` + sdkGUID2 +
					`","membership":"full","index0":false},{"guid":"` + sdkGUID3 + `","membership":"full","index0":false}]},` + def + `}`},
			{method: "DELETE", path: "/ufmRest/resources/pkeys/0x16a1/guids/" + sdkGUID2 + "," + strings.ToUpper(sdkGUID3), status: 200,
				says: "are no members of Kubernetes pkey 0x16a1"},
			{method: "GET", path: "/ufmRest/resources/pkeys/0x16a1?guids_data=true", status: 200,
				answer: `{"pkey":"0x16a1","partition":"k8s-16a1","ip_over_ib":true,"guids":[]}`},
			{method: "DELETE", path: "/ufmRest/resources/pkeys/0x16a1", status: 200, says: `"applied":true`},
			{method: "DELETE", path: "/ufmRest/resources/pkeys/0x16a1", status: 404, says: "0x16a1"},
			{method: "GET", path: "/ufmRest/resources/pkeys/0x16a1?guids_data=true", status: 200, answer: `{}`},
		}},
		{"nico reads", []step{
			{method: "GET", path: "/ufmRest/resources/ports?sys_type=Computer", status: 200, says: `"guid":"` + sdkGUID1 + `"`},
			{method: "POST", path: "/ufmRest/resources/pkeys", status: 200, says: `"applied":true`,
				body: `{"pkey":"0x12fb","ip_over_ib":true,"membership":"full","index0":true,"guids":["` + sdkGUID1 + `"]}`},
			{method: "GET", path: "/ufmRest/resources/pkeys?guids_data=true&qos_conf=true", status: 200,
				answer: `{"0x12fb":{"pkey":"0x12fb","partition":"k8s-12fb","ip_over_ib":true,"guids":[{"guid":"` + sdkGUID1 +
					`","membership":"full","index0":true}],"qos_conf":` + qos + `},` + defQoS + `}`},
			{method: "GET", path: "/ufmRest/resources/pkeys/0x7fff?guids_data=true&qos_conf=true", status: 200,
				answer: `{"pkey":"0x7fff","partition":"management","ip_over_ib":true,"membership":"limited","index0":false,"guids":[],"qos_conf":` + qos + `}`},
			{method: "GET", path: "/ufmRest/resources/pkeys/0x1abc?guids_data=true&qos_conf=true", status: 200, answer: `{}`},
			{method: "GET", path: "/ufmRest/resources/pkeys?qos_conf=maybe", status: 400, says: `qos_conf="maybe"`},
		}},
		{"partition_name", []step{
			{method: "POST", path: "/ufmRest/resources/pkeys", status: 200, says: `"applied":true`,
				body: `{"pkey":"0x1007","partition_name":"tenant_a","guids":["` + sdkGUID1 + `"]}`},
			{method: "POST", path: "/ufmRest/resources/pkeys", status: 200, says: `"applied":true`,
				body: `{"pkey":"0x1007","guids":["` + sdkGUID2 + `"],"membership":"limited"}`},
			{method: "GET", path: "/ufmRest/resources/pkeys/0x1007", status: 200,
				answer: `{"pkey":"0x1007","partition":"tenant_a","ip_over_ib":true}`},
			{method: "POST", path: "/ufmRest/resources/pkeys", status: 400, says: `partition_name "tenant a"`,
				body: `{"pkey":"0x1007","partition_name":"tenant a","guids":["` + sdkGUID1 + `"]}`},
			{method: "POST", path: "/ufmRest/resources/pkeys", status: 400, says: `partition_name ""`,
				body: `{"pkey":"0x1007","partition_name":"","guids":["` + sdkGUID1 + `"]}`},
			{method: "GET", path: "/ufmRest/resources/pkeys", status: 200,
				answer: `{"0x1007":{"pkey":"0x1007","partition":"tenant_a","ip_over_ib":true},` + defBare + `}`},
		}},
	}
	for _, seq := range sequences {
		t.Run(seq.name, func(t *testing.T) {
			newUFMClientsFixture(t, dump).run(t, seq.steps)
		})
	}
}

// TestUFMDefaultPartitionUnchangeable: no change through the API reaches the
// default partition; each is refused with 400 saying why, and it still reads
// as before.
func TestUFMDefaultPartitionUnchangeable(t *testing.T) {
	f := newUFMClientsFixture(t, filepath.Join("testdata", "ufm", "opensm-subnet.lst"))
	const why = "default partition"
	f.run(t, []step{
		{method: "PUT", path: "/ufmRest/resources/pkeys", status: 400, says: why,
			body: `{"pkey":"0x7fff","guids":["` + sdkGUID1 + `"],"membership":"full"}`},
		{method: "POST", path: "/ufmRest/resources/pkeys", status: 400, says: why,
			body: `{"pkey":"0x7fff","guids":["` + sdkGUID1 + `"],"membership":"full"}`},
		{method: "POST", path: "/ufmRest/resources/pkeys/add", status: 400, says: why, body: `{"pkey":"0x7fff"}`},
		{method: "POST", path: "/ufmRest/actions/remove_guids_from_pkey", status: 400, says: why,
			body: `{"pkey":"0x7fff","guids":["` + sdkGUID1 + `"]}`},
		{method: "DELETE", path: "/ufmRest/resources/pkeys/0x7fff/guids/" + sdkGUID1, status: 400, says: why},
		{method: "DELETE", path: "/ufmRest/resources/pkeys/0x7fff", status: 400, says: why},
		{method: "GET", path: "/ufmRest/resources/pkeys/0x7fff", status: 200,
			answer: `{"pkey":"0x7fff","partition":"management","ip_over_ib":true,"membership":"limited"}`},
	})
}

// TestUFMRefusals: the PUT and DELETE of GUIDs refuse what they cannot record,
// recording nothing.
func TestUFMRefusals(t *testing.T) {
	f := newUFMClientsFixture(t, filepath.Join("testdata", "ufm", "opensm-subnet.lst"))
	f.run(t, []step{
		{method: "PUT", path: "/ufmRest/resources/pkeys", status: 400, says: "memberships has 1 entries for 2 GUIDs",
			body: `{"pkey":"0x1001","guids":["` + sdkGUID1 + `","` + sdkGUID2 + `"],"memberships":["full"]}`},
		{method: "PUT", path: "/ufmRest/resources/pkeys", status: 400, says: `membership "both"`,
			body: `{"pkey":"0x1001","guids":["` + sdkGUID1 + `"],"membership":"both"}`},
		{method: "PUT", path: "/ufmRest/resources/pkeys", status: 400, says: `"guids" is missing or empty`,
			body: `{"pkey":"0x1001","guids":[]}`},
		{method: "PUT", path: "/ufmRest/resources/pkeys", status: 400, says: "outside [ufm_pkeys] pkey_range",
			body: `{"pkey":"0x2001","guids":["` + sdkGUID1 + `"]}`},
		{method: "DELETE", path: "/ufmRest/resources/pkeys/0x1001/guids/" + sdkGUID1 + ",nothex", status: 400, says: `GUID "nothex"`},
		{method: "DELETE", path: "/ufmRest/resources/pkeys/0x1001/guids/" + sdkGUID1 + "," + sdkGUID1, status: 400, says: "listed twice"},
		{method: "GET", path: "/ufmRest/resources/pkeys", status: 200,
			answer: `{"0x7fff":{"pkey":"0x7fff","partition":"management","ip_over_ib":true,"membership":"limited"}}`},
	})
}

// TestDefaultPartitionReads: what the reads say of 0x7fff follows [opensm]
// default_partition: its ipoib flag and the membership its last ALL or
// ALL_CAS member gives the hosts, and its qos_conf what OpenSM applies to
// its IPoIB group (OpenSM's 2048 bytes, 10 Gb/s, SL 0 unless its flags say).
func TestDefaultPartitionReads(t *testing.T) {
	osm := fabric.QoS{MTULimit: 2, ServiceLevel: 0, RateMbps: 10000}
	tests := []struct {
		line string
		want defaultPartition
	}{
		{"", defaultPartition{true, fabric.Limited, osm}},
		{"Default=0x7fff, ipoib : ALL=limited, SELF=full ;", defaultPartition{true, fabric.Limited, osm}},
		{"Default=0x7fff : ALL=full ;", defaultPartition{false, fabric.Full, osm}},
		{"Default=0x7fff, ipoib : ALL=limited, ALL_CAS=full ;", defaultPartition{true, fabric.Full, osm}},
		{"Default=0x7fff, ipoib : ALL_CAS=full, ALL=limited ;", defaultPartition{true, fabric.Limited, osm}},
		// Its qos_conf is what OpenSM applies: the line's mtu= and rate=.
		{"Default=0x7fff, ipoib, mtu=5 : SELF=full ;", defaultPartition{true, fabric.Limited,
			fabric.QoS{MTULimit: 4, ServiceLevel: 0, RateMbps: 10000}}},
		{"Default=0x7fff, ipoib, rate=7, mtu=4 : SELF=full ;", defaultPartition{true, fabric.Limited,
			fabric.QoS{MTULimit: 2, ServiceLevel: 0, RateMbps: 40000}}},
		{"not a partition", defaultPartition{true, fabric.Limited, osm}},
	}
	for _, tc := range tests {
		if got := defaultPartitionOf(tc.line); got != tc.want {
			t.Errorf("defaultPartitionOf(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
	}
	st := storetest.Open(t, "sqlite").WithRules(store.Rules{KubernetesRange: kubeRange})
	opts := Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token, PKeys: []PKeysOptions{{
		Store: st, Prefix: "/ufmRest", Username: ufmUser, Password: ufmPassword,
		DefaultPartition: "Default=0x7fff : ALL=full ;",
	}}}
	srv := httptest.NewServer(New(opts, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	f := &pkeysFixture{fixture: &fixture{t: t, srv: srv, st: st, opts: opts}, user: ufmUser, password: ufmPassword}
	f.run(t, []step{{method: "GET", path: "/ufmRest/resources/pkeys/0x7fff", status: 200,
		answer: `{"pkey":"0x7fff","partition":"management","ip_over_ib":false,"membership":"full"}`}})
}
