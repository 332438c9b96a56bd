package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Accepted means applicable: random sequences of the requests networking-mlnx
// sends (VLAN, flat and other physical networks, moves between networks and
// hosts, PUTs, DELETEs, every client-id form, IDs that share long prefixes,
// GUIDs taken by two ports, VLAN IDs that are the flat or a static partition's
// pkey) against a real store. After every accepted request the recorded state
// renders, with the configured template and options, to a file that passes the
// check; after every refused one nothing changed.
//
// The budget is fixed (AFM_PROPERTY_STEPS overrides it); the seed is random
// unless AFM_PROPERTY_SEED gives it, and is printed on failure, so that a
// failing sequence can be run again.
func TestAcceptedStatesApply(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("AFM_PROPERTY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("AFM_PROPERTY_SEED=%q: %v", s, err)
		}
		seed = v
	}
	// SQLite in a fast loop; the server engines with fewer steps, for the
	// paths that differ (their GUID claims and error mapping).
	budget := map[string]int{config.EngineSQLite: 3000, config.EnginePostgres: 1500, config.EngineMySQL: 1500}
	if s := os.Getenv("AFM_PROPERTY_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("AFM_PROPERTY_STEPS=%q: %v", s, err)
		}
		for k := range budget {
			budget[k] = n
		}
	}
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			p := newProperty(t, engine, seed)
			defer func() {
				if t.Failed() {
					t.Logf("seed %d (run again with AFM_PROPERTY_SEED=%d go test ./internal/api -run 'TestAcceptedStatesApply/%s')",
						seed, seed, engine)
				}
			}()
			for step := 0; step < budget[engine] && !t.Failed(); step++ {
				p.step(step)
			}
			if p.accepted == 0 || p.refused == 0 {
				t.Errorf("%d accepted, %d refused: the generator does not reach both sides", p.accepted, p.refused)
			}
			t.Logf("%d requests accepted, %d refused", p.accepted, p.refused)
		})
	}
}

// The configuration of the property: flat networks on 0x0064 (VLAN 100 is
// then refused), a static partition on 0x0200 (VLAN 512), two of three
// physical networks managed.
const (
	propFlatPKey   = fabric.PKey(0x0064)
	propStaticPKey = fabric.PKey(0x0200)
)

var propTemplate = "{{ default_partition }}\n" +
	"storage=0x0200, ipoib : ALL=limited ;\n" +
	"backup=0x0201 : 0x0002c90300000301=limited ;\n" +
	"{% for n in networks %}\n{{ n.name }}={{ n.pkey }}, ipoib :{{ n.members_text }} ;\n{% endfor %}\n" +
	"{{ flat.name }}={{ flat.pkey }}, ipoib :{{ flat.members_text }} ;\n"

type property struct {
	t                  *testing.T
	rng                *rand.Rand
	st                 *store.Store
	srv                *httptest.Server
	tpl                *partitions.Template
	accepted, refused  int
	networkIDs, vlans  []string
	portIDs, hosts     []string
	physnets, netTypes []string
}

func newProperty(t *testing.T, engine string, seed uint64) *property {
	st := storetest.Open(t, engine)
	tpl, err := partitions.ParseTemplate("property.j2", []byte(propTemplate))
	if err != nil {
		t.Fatal(err)
	}
	static, err := tpl.Static(context.Background(), propDefault, propFlatPKey)
	if err != nil {
		t.Fatal(err)
	}
	st = st.WithRules(store.Rules{PhysicalNetworks: []string{"ibnet", "ib2"}, FlatPKey: propFlatPKey, StaticPKey: static.Name,
		StaticMember: static.Listing})
	srv := httptest.NewServer(New(Options{Prefix: "/ufmRestV3", Domain: "cloudx", Token: token}, st, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return &property{t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed)), st: st, srv: srv, tpl: tpl,
		// IDs that share their first 27 characters and more, a short one, one
		// with characters a partition name cannot hold.
		networkIDs: []string{
			"11111111-aaaa-4aaa-8aaa-000000000001", "11111111-aaaa-4aaa-8aaa-000000000002",
			"11111111-aaaa-4aaa-8aaa-000000000003", "11111111-aaaa-4aaa-8aaa-0000000000010",
			"3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", "n", "net:with;odd=chars", "",
		},
		// Ordinary VLANs, the flat pkey's, the static partition's, the ends of
		// the range and past them, none, null, a string.
		vlans:    []string{"101", "102", "103", "101", "100", "512", "1", "4094", "32766", "32767", "0", "-1", "40000", "null", "", `"101"`},
		portIDs:  []string{"p1", "p2", "p3", "p4", "p5", "8a4f2c6e-1d3b-4e5f-9a7c-6b2d0e1f3a94"},
		hosts:    []string{"compute-1", "compute-2", ""},
		physnets: []string{"ibnet", "ib2", "ethnet"},
		netTypes: []string{"vlan", "vlan", "flat", "vxlan", "geneve"},
	}
}

const propDefault = "Default=0x7fff, ipoib : ALL=limited, SELF=full ;"

// before is what a refused request must leave as it was.
type before struct {
	snap store.Snapshot
	jobs map[string]int64
}

func (p *property) capture() before {
	ctx := context.Background()
	snap, err := p.st.Snapshot(ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	jobs, err := p.st.CountJobsByStatus(ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	return before{snap: snap, jobs: jobs}
}

func (p *property) step(i int) {
	method, path, body := p.request()
	was := p.capture()
	status, answer := p.send(method, path, body)
	switch status {
	case http.StatusAccepted:
		p.accepted++
		p.checkApplicable(i, method, path, body)
	case http.StatusBadRequest, http.StatusNotFound:
		p.refused++
		if now := p.capture(); !reflect.DeepEqual(was, now) {
			p.t.Errorf("step %d: %s %s refused (%d %s) but changed the state:\nbefore %+v\nafter  %+v\nbody %s",
				i, method, path, status, answer, was, now, body)
		}
	default:
		p.t.Errorf("step %d: %s %s: %d %s\nbody %s", i, method, path, status, answer, body)
	}
}

// checkApplicable renders the recorded state as the applier does and checks it.
func (p *property) checkApplicable(i int, method, path, body string) {
	ctx := context.Background()
	snap, err := p.st.Snapshot(ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	st := applier.State(snap, propDefault, propFlatPKey)
	text, err := p.tpl.Render(ctx, st)
	if err == nil {
		err = partitions.Check(text, st)
	}
	if err != nil {
		p.t.Errorf("step %d: %s %s was accepted, and the state no longer applies: %v\nbody %s\nfile:\n%s",
			i, method, path, err, body, text)
	}
}

func (p *property) send(method, path, body string) (int, string) {
	req, err := http.NewRequest(method, p.srv.URL+path, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Basic "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, answerText(resp))
	return resp.StatusCode, b.String()
}

func answerText(resp *http.Response) string {
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return ""
	}
	return fmt.Sprint(v)
}

func pick[T any](r *rand.Rand, list []T) T { return list[r.IntN(len(list))] }

// request draws one request: networks a third of the time, ports otherwise.
func (p *property) request() (method, path, body string) {
	r := p.rng
	var collection, id string
	if r.IntN(3) == 0 {
		collection, id = "/ufmRestV3/cloudx/Network", pick(r, p.networkIDs)
		body = p.networkBody(id)
	} else {
		collection, id = "/ufmRestV3/cloudx/Port", pick(r, p.portIDs)
		body = p.portBody(id)
	}
	switch r.IntN(6) {
	case 0:
		return "DELETE", collection + "/" + id, body
	case 1, 2:
		return "PUT", collection + "/" + id, body
	}
	return "POST", collection, body
}

func (p *property) networkBody(id string) string {
	r := p.rng
	fields := []string{fmt.Sprintf(`"id": %q`, id), `"name": "net"`,
		fmt.Sprintf(`"provider:network_type": %q`, pick(r, p.netTypes)),
		fmt.Sprintf(`"provider:physical_network": %q`, pick(r, p.physnets))}
	if v := pick(r, p.vlans); v != "" {
		fields = append(fields, `"provider:segmentation_id": `+v)
	}
	return "{" + strings.Join(fields, ", ") + "}"
}

// guids are few, so that ports fight over them.
var propGUIDs = []uint64{0x0002c90300000101, 0x0002c90300000201, 0x0002c90300000301, 0x248a0703_00b1c2d4}

func (p *property) portBody(id string) string {
	r := p.rng
	fields := []string{fmt.Sprintf(`"id": %q`, id),
		fmt.Sprintf(`"network_id": %q`, pick(r, p.networkIDs)),
		fmt.Sprintf(`"binding:host_id": %q`, pick(r, p.hosts))}
	owner := pick(r, []string{"compute:nova", "baremetal:none", "network:dhcp", ""})
	fields = append(fields, fmt.Sprintf(`"device_owner": %q`, owner))
	fields = append(fields, fmt.Sprintf(`"binding:vnic_type": %q`, pick(r, []string{"direct", "baremetal", "normal"})))
	if r.IntN(8) != 0 {
		name := pick(r, []string{"client-id", "client-id", "61", "hostname"})
		value := p.clientID(pick(r, propGUIDs))
		fields = append(fields, fmt.Sprintf(`"extra_dhcp_opts": [{"opt_name": %q, "opt_value": %q, "ip_version": 4}]`, name, value))
	}
	return "{" + strings.Join(fields, ", ") + "}"
}

// clientID writes a GUID in one of the forms networking-mlnx sends, or a
// broken one.
func (p *property) clientID(g uint64) string {
	octets := make([]string, 8)
	for i := range octets {
		octets[i] = fmt.Sprintf("%02x", byte(g>>(56-8*i)))
	}
	switch p.rng.IntN(8) {
	case 0: // a bare-metal node's: 20 octets
		return "ff:00:00:00:00:00:02:00:00:02:c9:00:" + strings.Join(octets, ":")
	case 1: // a VM's: a prefix octet and the GUID
		return "20:" + strings.Join(octets, ":")
	case 2:
		return strings.ToUpper("20:" + strings.Join(octets, ":"))
	case 3:
		return "20-" + strings.Join(octets, "-")
	case 4:
		return "20" + strings.Join(octets, "")
	case 5:
		return strings.Join(octets, ":") // too short
	case 6:
		return "20:00:00:00:00:00:00:00:00" // GUID 0
	}
	return " 20:" + strings.Join(octets, ":") + " "
}
