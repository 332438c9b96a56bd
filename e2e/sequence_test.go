package e2e

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// fixtureStep is one step of testdata/index.json, the contract's sequence.
type fixtureStep struct {
	Step    int    `json:"step"`
	File    string `json:"file"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	Trigger string `json:"trigger"`
	Status  int    `json:"status"`
	Expect  string `json:"expect"`
}

// fullMember is a pkey as it sits in a port's pkey table with full membership.
func fullMember(p fabric.PKey) uint16 { return uint16(p) | 0x8000 }

// TestFixtureSequence plays the contract's whole fixture sequence, then the
// cases it does not cover, on every engine, against a real OpenSM: after each
// accepted step the job completes and the simulated hosts' pkey tables say
// what the step expects. The fixtures' GUIDs are rewritten to simulated hosts'
// GUIDs, each client-id keeping its form.
func TestFixtureSequence(t *testing.T) {
	var index struct{ Steps []fixtureStep }
	if err := json.Unmarshal([]byte(fixture(t, "index.json")), &index); err != nil {
		t.Fatal(err)
	}
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			db := storetest.NewDatabase(t, engine)
			m := startManager(t, db, 3, "physical_networks = ibnet")
			s := &sequence{manager: m, db: db,
				h1: m.fabric.Host("H1").PortGUID, h2: m.fabric.Host("H2").PortGUID, h3: m.fabric.Host("H3").PortGUID}
			s.fixtureSteps(index.Steps)
			s.ownSteps()
			s.refusals()
		})
	}
}

type sequence struct {
	*manager
	db         storetest.Database
	h1, h2, h3 fabric.GUID
}

const (
	vlanNet = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	flatNet = "a1d2c3b4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
	pkey101 = fabric.PKey(0x65)
)

// fixtureSteps plays index.json: the baremetal port is H1, the VM port H2.
func (s *sequence) fixtureSteps(steps []fixtureStep) {
	t := s.t
	guidOf := map[string]fabric.GUID{
		"port_create_baremetal.json": s.h1, "port_unbind_delete.json": s.h1, "port_delete.json": s.h1,
		"port_update_host_change.json": s.h2, "port_migrate_delete.json": s.h2,
	}
	for _, st := range steps {
		body := fixture(t, st.File)
		if g, ok := guidOf[st.File]; ok {
			body = rewriteClientIDs(t, body, g)
		}
		path := strings.NewReplacer("{url}", "", "{domain}", "cloudx").Replace(st.Path)
		status, answer := s.send(st.Method, path, body)
		if status != st.Status {
			t.Fatalf("step %d (%s): status %d, want %d: %s", st.Step, st.Trigger, status, st.Status, answer)
		}
		if status != http.StatusAccepted {
			continue
		}
		var job string
		if err := json.Unmarshal([]byte(answer), &job); err != nil {
			t.Fatalf("step %d: body %q", st.Step, answer)
		}
		want := map[fabric.GUID]bool{} // host -> holds 0x8065 once the step has completed
		switch st.Step {
		case 4:
			want[s.h1] = true
		case 5:
			want[s.h1], want[s.h2] = true, true
		case 6:
			want[s.h1] = true
		}
		s.waitCompleted(job, func() {
			for _, h := range []fabric.GUID{s.h1, s.h2, s.h3} {
				if got := s.pkeys(h); slices.Contains(got, fullMember(pkey101)) != want[h] {
					t.Fatalf("step %d (%s: %s) Completed while host %s's pkey table is %s",
						st.Step, st.Trigger, st.Expect, h, hex(got))
				}
			}
		})
	}
}

// clientIDValue is a client-id option's value in a fixture.
var clientIDValue = regexp.MustCompile(`"opt_value": "((?:[0-9a-f]{2}:){8,}[0-9a-f]{2})"`)

// rewriteClientIDs replaces the GUID (last 8 octets) of every client-id in body
// with g, keeping the rest of the value: its form stays the fixture's.
func rewriteClientIDs(t *testing.T, body string, g fabric.GUID) string {
	t.Helper()
	n := 0
	out := clientIDValue.ReplaceAllStringFunc(body, func(m string) string {
		n++
		value := clientIDValue.FindStringSubmatch(m)[1]
		octets := strings.Split(value, ":")
		prefix := strings.Join(octets[:len(octets)-8], ":")
		return fmt.Sprintf(`"opt_value": "%s:%s"`, prefix, guidOctets(g))
	})
	if n == 0 {
		t.Fatalf("no client-id to rewrite in %s", body)
	}
	return out
}

func guidOctets(g fabric.GUID) string {
	var o []string
	for i := 7; i >= 0; i-- {
		o = append(o, fmt.Sprintf("%02x", byte(uint64(g)>>(8*i))))
	}
	return strings.Join(o, ":")
}

func hardwareClientID(g fabric.GUID) string { return "20:" + guidOctets(g) }

// network is a Neutron network body.
func network(id, typ, physnet string, vlan any) string {
	b, _ := json.MarshalIndent(map[string]any{"id": id, "name": "net", "provider:network_type": typ,
		"provider:physical_network": physnet, "provider:segmentation_id": vlan, "network_qos_policy": nil}, "", "  ")
	return string(b)
}

// vmPort is a bound VM port body, as mlnx_infiniband leaves it.
func vmPort(id, networkID, host, clientID string) string {
	opts := []map[string]any{}
	if clientID != "" {
		opts = append(opts, map[string]any{"opt_name": "client-id", "opt_value": clientID, "ip_version": 4})
	}
	b, _ := json.MarshalIndent(map[string]any{"id": id, "network_id": networkID, "device_owner": "compute:nova",
		"binding:vnic_type": "direct", "binding:host_id": host, "extra_dhcp_opts": opts}, "", "  ")
	return string(b)
}

// expectPKeys waits for job and checks, at its completion, which hosts hold
// which full-member pkeys (true) and which must not (false).
func (s *sequence) expectPKeys(what, job string, want map[fabric.GUID]map[fabric.PKey]bool) store.Job {
	s.t.Helper()
	j := s.waitCompleted(job, func() {
		for h, pkeys := range want {
			got := s.pkeys(h)
			for p, held := range pkeys {
				if slices.Contains(got, fullMember(p)) != held {
					s.t.Fatalf("%s: Completed while host %s's pkey table is %s (want %s held: %v)",
						what, h, hex(got), p, held)
				}
			}
		}
	})
	return store.Job{Status: j.Status, Result: j.Summary}
}

// ownSteps: what the fixtures do not cover.
func (s *sequence) ownSteps() {
	t := s.t
	flat := fabric.PKey(0x7ffe)

	// A flat network's port: the host holds the flat pkey. The flat network is
	// recorded again by its PUT (the fixture sequence deleted nothing of it).
	s.accept("PUT", "/cloudx/Network/"+flatNet, fixture(t, "network_update_flat.json"))
	job := s.accept("POST", "/cloudx/Port", vmPort("f0000000-0000-4000-8000-000000000001", flatNet, "compute-3",
		hardwareClientID(s.h3)))
	s.expectPKeys("flat network port", job, map[fabric.GUID]map[fabric.PKey]bool{s.h3: {flat: true}})

	// A VLAN ID change: the partition moves, its member with it.
	const n2 = "b2000000-0000-4000-8000-000000000002"
	const p2 = "b2000000-0000-4000-8000-0000000000a1"
	s.waitCompleted(s.accept("POST", "/cloudx/Network", network(n2, "vlan", "ibnet", 201)), nil)
	job = s.accept("PUT", "/cloudx/Port/"+p2, vmPort(p2, n2, "compute-1", hardwareClientID(s.h1)))
	s.expectPKeys("port on VLAN 201", job, map[fabric.GUID]map[fabric.PKey]bool{s.h1: {201: true}})
	job = s.accept("PUT", "/cloudx/Network/"+n2, network(n2, "vlan", "ibnet", 202))
	s.expectPKeys("VLAN 201 -> 202", job, map[fabric.GUID]map[fabric.PKey]bool{s.h1: {201: false, 202: true}})

	// A client-id change: the GUID moves from H1 to H2.
	job = s.accept("PUT", "/cloudx/Port/"+p2, vmPort(p2, n2, "compute-2", hardwareClientID(s.h2)))
	s.expectPKeys("client-id H1 -> H2", job, map[fabric.GUID]map[fabric.PKey]bool{
		s.h1: {202: false}, s.h2: {202: true}})

	// A network on a physnet that is not ours, and its port: Completed at once,
	// no pkey anywhere.
	const eth = "e3000000-0000-4000-8000-000000000003"
	rev, jobs := s.counts()
	for _, req := range [][3]string{
		{"POST", "/cloudx/Network", network(eth, "vlan", "ethnet", 301)},
		{"PUT", "/cloudx/Port/e3000000-0000-4000-8000-0000000000a1",
			vmPort("e3000000-0000-4000-8000-0000000000a1", eth, "compute-3", hardwareClientID(s.h3))},
	} {
		job := s.accept(req[0], req[1], req[2])
		status, body := s.send("GET", "/"+job, "")
		if status != http.StatusOK || !strings.Contains(body, `"Status":"Completed"`) {
			t.Fatalf("%s %s on physnet ethnet: job %d %s, want Completed at once", req[0], req[1], status, body)
		}
	}
	if got := s.pkeys(s.h3); slices.Contains(got, fullMember(301)) || slices.Contains(got, 301) {
		t.Errorf("H3 holds pkey 301 of a network that is not ours: %s", hex(got))
	}
	if r, j := s.counts(); r != rev || j != jobs+2 {
		t.Errorf("revision %d -> %d, jobs %d -> %d: want the revision unchanged and two jobs", rev, r, jobs, j)
	}
}

// refusals: each 400 rule once; nothing recorded, no job.
func (s *sequence) refusals() {
	const n2 = "b2000000-0000-4000-8000-000000000002"
	const unknown = "00000000-0000-4000-8000-00000000dead"
	cases := []struct {
		name, method, path, body, mention string
	}{
		{"bound port without client-id", "PUT", "/cloudx/Port/c0000000-0000-4000-8000-000000000001",
			vmPort("c0000000-0000-4000-8000-000000000001", n2, "compute-3", ""), "mechanism_drivers"},
		{"unusable client-id", "PUT", "/cloudx/Port/c0000000-0000-4000-8000-000000000001",
			vmPort("c0000000-0000-4000-8000-000000000001", n2, "compute-3", "20:fa:16"), "octets"},
		{"port on a network without a partition", "PUT", "/cloudx/Port/c0000000-0000-4000-8000-000000000001",
			vmPort("c0000000-0000-4000-8000-000000000001", unknown, "compute-3", hardwareClientID(s.h3)), "unknown"},
		{"VLAN ID of another network", "POST", "/cloudx/Network",
			network("c0000000-0000-4000-8000-000000000002", "vlan", "ibnet", 202), "already the partition key"},
		{"VLAN ID out of range", "POST", "/cloudx/Network",
			network("c0000000-0000-4000-8000-000000000002", "vlan", "ibnet", 0x7fff), "VLAN ID 32767"},
		{"VLAN ID of the flat partition", "POST", "/cloudx/Network",
			network("c0000000-0000-4000-8000-000000000002", "vlan", "ibnet", 0x7ffe), "flat_pkey"},
		{"VLAN network without VLAN ID", "PUT", "/cloudx/Network/c0000000-0000-4000-8000-000000000002",
			network("c0000000-0000-4000-8000-000000000002", "vlan", "ibnet", nil), "segmentation_id"},
		{"GUID in another network's partition", "PUT", "/cloudx/Port/c0000000-0000-4000-8000-000000000001",
			vmPort("c0000000-0000-4000-8000-000000000001", flatNet, "compute-2", hardwareClientID(s.h2)), "only one network"},
	}
	for _, tc := range cases {
		rev, jobs := s.counts()
		status, body := s.send(tc.method, tc.path, tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, tc.mention) {
			s.t.Errorf("%s: %d %s, want 400 mentioning %q", tc.name, status, body, tc.mention)
		}
		if r, j := s.counts(); r != rev || j != jobs {
			s.t.Errorf("%s: revision %d -> %d, jobs %d -> %d", tc.name, rev, r, jobs, j)
		}
	}
	// The static-partition rule needs the partitions template's static pkeys,
	// which the manager does not take yet: the store compliance suite covers it.
}

// counts reads the revision and the number of jobs from the manager's database.
func (s *sequence) counts() (revision, jobs int64) {
	s.t.Helper()
	return dbCounts(s.t, s.db)
}

// dbCounts reads the revision and the number of jobs from db: a refused
// change moves neither.
func dbCounts(t *testing.T, db storetest.Database) (revision, jobs int64) {
	t.Helper()
	st, err := storeopen.Open(t.Context(), db.Engine, db.DSN, false, store.Rules{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.DB().Close()
	if revision, err = st.Revision(t.Context()); err != nil {
		t.Fatal(err)
	}
	byStatus, err := st.CountJobsByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range byStatus {
		jobs += n
	}
	return revision, jobs
}
