package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// Two pkeys clients beside networking-mlnx, each its own principal: nico
// (UFM's token auth under /ufmRestV3, networking-mlnx's prefix, with
// delete_empty and smconf) and slurm (Basic auth under /ufmRest).
const (
	e2eNICoToken     = "e2e-nico-token-0123456789"
	e2eSlurmPassword = "e2e-slurm-password-0123456789"
)

// pkeysClientSections are the two clients' sections.
const pkeysClientSections = `
[ufm_pkeys:nico]
token = ` + e2eNICoToken + `
prefix = /ufmRestV3
pkey_range = 0x2000-0x2fff
delete_empty = true
smconf = true
apply_timeout = 60

[ufm_pkeys:slurm]
username = slurm
password = ` + e2eSlurmPassword + `
pkey_range = 0x3000-0x3fff
apply_timeout = 60
`

// principalClient sends requests with one Authorization header.
type principalClient struct {
	m    *manager
	auth string
}

func (c *principalClient) must(method, path, body string, want int) string {
	c.m.t.Helper()
	req, err := http.NewRequest(method, c.m.url+path, strings.NewReader(body))
	if err != nil {
		c.m.t.Fatal(err)
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 90 * time.Second, Transport: c.m.client.Transport}
	resp, err := client.Do(req)
	if err != nil {
		c.m.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.m.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	return string(b)
}

// mustApply sends a change and fails unless OpenSM applied it.
func (c *principalClient) mustApply(method, path, body string) {
	c.m.t.Helper()
	var a struct {
		Applied bool `json:"applied"`
	}
	answer := c.must(method, path, body, http.StatusOK)
	if err := json.Unmarshal([]byte(answer), &a); err != nil || !a.Applied {
		c.m.t.Fatalf("%s %s: %s, want applied", method, path, answer)
	}
}

// TestPKeysClientsApart, on every engine: the two clients bind their hosts on a real OpenSM,
// each to its own pkey, with the real pkey tables read back; neither sees
// nor changes the other's, networking-mlnx's token opens no pkeys route, only
// nico reads the keys, and nico's pkey, once its last GUID leaves, is gone
// from the tables and reads {}.
func TestPKeysClientsApart(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) { testPKeysClientsApart(t, engine) })
	}
}

func testPKeysClientsApart(t *testing.T, engine string) {
	m := launchManager(t, storetest.NewDatabase(t, engine), fabricsim.Options{Hosts: 4}, settings{
		BeforeStart: func(m *manager) {
			f, err := os.OpenFile(m.conf, os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString(pkeysClientSections)
				f.Close()
			}
			if err != nil {
				m.t.Fatal(err)
			}
		}})
	m.confirmSwitches()
	nico := &principalClient{m: m, auth: "Basic " + e2eNICoToken}
	slurm := &principalClient{m: m, auth: "Basic " + base64.StdEncoding.EncodeToString([]byte("slurm:"+e2eSlurmPassword))}
	neutron := &principalClient{m: m, auth: "Basic " + token}
	h1, h2, h3 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID, m.fabric.Host("H3").PortGUID

	nico.must("GET", "/ufmRestV3/app/ufm_version", "", http.StatusOK)
	nico.mustApply("POST", "/ufmRestV3/resources/pkeys", fmt.Sprintf(`{"pkey":"0x2001","guids":[%q],"membership":"full","index0":false,"ip_over_ib":true}`, ufm(h1)))
	slurm.mustApply("POST", "/ufmRest/resources/pkeys", fmt.Sprintf(`{"pkey":"0x3001","guids":[%q],"membership":"full","ip_over_ib":true,"index0":false}`, ufm(h2)))
	tables := func() [3][]uint16 { return [3][]uint16{m.pkeys(h1), m.pkeys(h2), m.pkeys(h3)} }
	got := tables()
	if !slices.Contains(got[0], 0xa001) || slices.Contains(got[0], 0xb001) || !slices.Contains(got[1], 0xb001) ||
		slices.Contains(got[1], 0xa001) || slices.Contains(got[2], 0xa001) || slices.Contains(got[2], 0xb001) {
		t.Fatalf("tables H1 %s, H2 %s, H3 %s: want 0xa001 in H1's alone, 0xb001 in H2's alone", hex(got[0]), hex(got[1]), hex(got[2]))
	}

	// Principals apart: each lists its own; another's pkey and GUID are not
	// for it; networking-mlnx's token opens no pkeys route.
	if list := nico.must("GET", "/ufmRestV3/resources/pkeys?guids_data=true", "", http.StatusOK); !strings.Contains(list, ufm(h1)) || strings.Contains(list, "0x3001") {
		t.Errorf("nico's list: %s", list)
	}
	if list := slurm.must("GET", "/ufmRest/resources/pkeys", "", http.StatusOK); !strings.Contains(list, "0x3001") || strings.Contains(list, "0x2001") {
		t.Errorf("slurm's list: %s", list)
	}
	nico.must("POST", "/ufmRestV3/resources/pkeys", fmt.Sprintf(`{"pkey":"0x2002","guids":[%q]}`, ufm(h2)), http.StatusForbidden)
	slurm.must("POST", "/ufmRest/actions/remove_guids_from_pkey", fmt.Sprintf(`{"pkey":"0x2001","guids":[%q]}`, ufm(h1)), http.StatusBadRequest)
	slurm.must("DELETE", "/ufmRest/resources/pkeys/0x2001", "", http.StatusBadRequest)
	neutron.must("GET", "/ufmRestV3/resources/pkeys", "", http.StatusUnauthorized)
	neutron.must("GET", "/ufmRest/resources/pkeys", "", http.StatusUnauthorized)
	nico.must("DELETE", "/ufmRestV3/cloudx/Network/3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73", "", http.StatusUnauthorized)
	if after := tables(); !slices.Equal(after[0], got[0]) || !slices.Equal(after[1], got[1]) {
		t.Errorf("refused requests changed the tables: H1 %s, H2 %s", hex(after[0]), hex(after[1]))
	}

	// Only nico reads the keys, and they are the hardened ones.
	var keys map[string]any
	json.Unmarshal([]byte(nico.must("GET", "/ufmRestV3/app/smconf", "", http.StatusOK)), &keys)
	if keys["m_key"] == "0x0000000000000000" || keys["sm_key"] == "0x0000000000000001" ||
		keys["sa_key"] == "0x0000000000000001" || keys["subnet_prefix"] != "0xfe80000000000000" {
		t.Errorf("smconf: %v, want the hardened keys", keys)
	}
	slurm.must("GET", "/ufmRest/app/smconf", "", http.StatusForbidden)

	// delete_empty: nico's pkey goes with its last GUID, from H1's table too.
	nico.mustApply("POST", "/ufmRestV3/actions/remove_guids_from_pkey", fmt.Sprintf(`{"pkey":"0x2001","guids":[%q]}`, ufm(h1)))
	if got := m.pkeys(h1); slices.Contains(got, 0xa001) || slices.Contains(got, 0x2001) {
		t.Errorf("H1's table after the unbind: %s", hex(got))
	}
	if one := nico.must("GET", "/ufmRestV3/resources/pkeys/0x2001?guids_data=true&qos_conf=true", "", http.StatusOK); strings.TrimSpace(one) != "{}" {
		t.Errorf("nico's emptied pkey reads %s, want {}", one)
	}
	if got := m.pkeys(h2); !slices.Contains(got, 0xb001) {
		t.Errorf("H2 lost slurm's pkey: %s", hex(got))
	}
}
