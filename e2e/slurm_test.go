package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/tlsreload/tlstest"
)

// Slurm's UFM integration on a real OpenSM: its prolog puts a job's nodes in
// the job's pkey with UFM's hosts API, its epilog takes them out, over HTTPS
// with its token; host names resolve through the hosts an operator
// confirmed, never through a description a tenant sets.

// e2eSlurmToken is the token of the [ufm_pkeys:slurm] client of these tests.
const e2eSlurmToken = "e2e-slurm-token-0123456789"

// slurmSection is a [ufm_pkeys:slurm] client with token auth, as Slurm's
// integration's auth_type=token_auth uses it.
const slurmSection = `
[ufm_pkeys:slurm]
token = ` + e2eSlurmToken + `
prefix = /ufmRestV3
pkey_range = 0x3000-0x3fff
apply_timeout = 60
`

// slurmHosts are the simulated hosts' node descriptions as their operators
// set them: "<host name> <device>".
var slurmHosts = map[string]string{"H1": "node01 mlx5_0", "H2": "node02 mlx5_0", "H3": "node03 mlx5_0", "H4": "node04 mlx5_0"}

// launchSlurmManager is a manager of four hosts described by descs, serving
// HTTPS with a [ufm_pkeys:slurm] client, its switches confirmed, and the
// client as Slurm's integration sends its requests.
func launchSlurmManager(t *testing.T, engine string, descs map[string]string) (*manager, *principalClient) {
	m := launchManager(t, storetest.NewDatabase(t, engine), fabricsim.Options{Hosts: 4, Descriptions: descs},
		settings{CA: tlstest.NewCA(t), BeforeStart: func(m *manager) {
			f, err := os.OpenFile(m.conf, os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString(slurmSection)
				f.Close()
			}
			if err != nil {
				m.t.Fatal(err)
			}
		}})
	m.confirmSwitches()
	return m, &principalClient{m: m, auth: "Basic " + e2eSlurmToken}
}

// confirmHosts runs --confirm-hosts with the configuration conf (the
// manager's when ""), retrying while OpenSM rewrites its dump, and returns
// what it printed.
func (m *manager) confirmHosts(conf string) string {
	m.t.Helper()
	if conf == "" {
		conf = m.conf
	}
	var out string
	waitFor(m.t, "--confirm-hosts to succeed", func() bool {
		var err error
		out, err = m.tryOperatorWith(conf, "--confirm-hosts")
		return err == nil
	})
	return out
}

// tryOperatorWith is tryOperator with another configuration file.
func (m *manager) tryOperatorWith(conf string, args ...string) (string, error) {
	saved := m.conf
	m.conf = conf
	defer func() { m.conf = saved }()
	return m.tryOperator(args...)
}

// TestSlurmPrologAndEpilog: the prolog of a job on node[01-02] of four hosts
// (pkey_allocation_mode=dynamic: job 12345 is pkey 0x3039) puts H1 and H2,
// and only them, in the pkey, as their real tables show; the pkey reads them
// back; the epilog takes them out. H3's table is never touched. On every
// engine.
func TestSlurmPrologAndEpilog(t *testing.T) {
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) { testSlurmPrologAndEpilog(t, engine) })
	}
}

func testSlurmPrologAndEpilog(t *testing.T, engine string) {
	m, slurm := launchSlurmManager(t, engine, slurmHosts)
	if out := m.confirmHosts(""); !strings.Contains(out, "confirmed 5 ports of 5 hosts") ||
		!strings.Contains(out, `node03  0x0002c90300000301  "node03 mlx5_0"`) {
		t.Fatalf("--confirm-hosts printed %q", out)
	}
	h := [4]fabric.GUID{}
	for i := range h {
		h[i] = m.fabric.Host(fmt.Sprintf("H%d", i+1)).PortGUID
	}
	h3Before := m.pkeys(h[2])

	slurm.must("GET", "/ufmRestV3/app/ufm_version", "", http.StatusOK)
	slurm.mustApply("POST", "/ufmRestV3/resources/pkeys/hosts",
		`{"hosts_names": "node[01-02]", "pkey": "0x3039", "ip_over_ib": "true", "index0": "false"}`)
	m.holds("H1", h[0], 0x3039, "full")
	m.holds("H2", h[1], 0x3039, "full")
	m.holds("H3", h[2], 0x3039, "")
	m.holds("H4", h[3], 0x3039, "")
	want := fmt.Sprintf(`{"pkey":"0x3039","partition":"k8s-3039","ip_over_ib":true,"guids":[`+
		`{"guid":%q,"membership":"full","index0":false},{"guid":%q,"membership":"full","index0":false}]}`, ufm(h[0]), ufm(h[1]))
	if got := strings.TrimSpace(slurm.must("GET", "/ufmRestV3/resources/pkeys/0x3039?guids_data=true", "", http.StatusOK)); got != want {
		t.Errorf("0x3039 after the prolog reads %s, want %s", got, want)
	}

	slurm.mustApply("DELETE", "/ufmRestV3/resources/pkeys/0x3039/hosts/node[01-02]", "")
	for i := range 2 {
		m.holds(fmt.Sprintf("H%d", i+1), h[i], 0x3039, "")
	}
	if got := m.pkeys(h[2]); !slices.Equal(got, h3Before) {
		t.Errorf("H3's table went from %s to %s; no request named it", hex(h3Before), hex(got))
	}
	// Another principal's credentials reach none of it.
	neutron := &principalClient{m: m, auth: "Basic " + token}
	neutron.must("POST", "/ufmRestV3/resources/pkeys/hosts", `{"hosts_names": "node03", "pkey": "0x3039"}`, http.StatusUnauthorized)
}

// TestSlurmHostileRename: H4's tenant renamed its host node02, the name of
// another job's node, after the operator confirmed the hosts. ibsim cannot
// change a node's description while it runs, so H4 describes itself as
// node02 from the start, and the confirmation reads OpenSM's real dump as it
// was before the rename: the same file with H4's earlier description,
// node04. A request naming node02 or node04 is refused, naming H4's port,
// and no table changes; --status names the mismatch; a request naming
// neither is served.
func TestSlurmHostileRename(t *testing.T) {
	hostile := map[string]string{"H1": "node01 mlx5_0", "H2": "node02 mlx5_0", "H3": "node03 mlx5_0", "H4": "node02 mlx5_0"}
	m, slurm := launchSlurmManager(t, config.EngineSQLite, hostile)
	m.confirmHostsBefore("node02 mlx5_0", "node04 mlx5_0", m.fabric.Host("H4").PortGUID)
	h := [4]fabric.GUID{}
	for i := range h {
		h[i] = m.fabric.Host(fmt.Sprintf("H%d", i+1)).PortGUID
	}
	before := [4][]uint16{m.pkeys(h[0]), m.pkeys(h[1]), m.pkeys(h[2]), m.pkeys(h[3])}

	refusal := slurm.must("POST", "/ufmRestV3/resources/pkeys/hosts", `{"hosts_names": "node02", "pkey": "0x3040"}`, http.StatusBadRequest)
	if want := fmt.Sprintf("host node02: port %s, not confirmed as node02's", h[3]); !strings.Contains(refusal, want) {
		t.Errorf("POST of node02: %s, want it to say %q", refusal, want)
	}
	refusal = slurm.must("POST", "/ufmRestV3/resources/pkeys/hosts", `{"hosts_names": "node04", "pkey": "0x3040"}`, http.StatusBadRequest)
	if want := fmt.Sprintf(`host node04: its port %s now describes itself as \"node02 mlx5_0\"`, h[3]); !strings.Contains(refusal, want) {
		t.Errorf("POST of node04: %s, want it to say %q", refusal, want)
	}
	for i := range h {
		if got := m.pkeys(h[i]); !slices.Equal(got, before[i]) {
			t.Errorf("H%d's table went from %s to %s after refused requests", i+1, hex(before[i]), hex(got))
		}
	}
	if got := strings.TrimSpace(slurm.must("GET", "/ufmRestV3/resources/pkeys/0x3040?guids_data=true", "", http.StatusOK)); got != "{}" {
		t.Errorf("0x3040 after refused requests reads %s, want {}", got)
	}
	status, _ := m.tryOperator("--status")
	if want := fmt.Sprintf("host mismatch:     host node02: port %s", h[3]); !strings.Contains(status, want) {
		t.Errorf("--status says\n%s\nwant a line %q", status, want)
	}

	slurm.mustApply("POST", "/ufmRestV3/resources/pkeys/hosts", `{"hosts_names": "node[01,03]", "pkey": "0x3040"}`)
	m.holds("H1", h[0], 0x3040, "full")
	m.holds("H3", h[2], 0x3040, "full")
	m.holds("H2", h[1], 0x3040, "")
	m.holds("H4", h[3], 0x3040, "")
}

// confirmHostsBefore runs --confirm-hosts on a copy of OpenSM's real dump in
// which port's description is was instead of is, what it said before it
// changed: the configuration is the manager's but for its config_dir.
func (m *manager) confirmHostsBefore(is, was string, port fabric.GUID) {
	m.t.Helper()
	dump := filepath.Join(m.dir, "opensm", "opensm-subnet.lst")
	waitFor(m.t, "OpenSM's first subnet dump", func() bool {
		_, err := os.Stat(dump)
		return !errors.Is(err, os.ErrNotExist)
	})
	dir := m.t.TempDir()
	var edited string
	waitFor(m.t, "a whole dump naming "+port.String(), func() bool {
		data, err := os.ReadFile(dump)
		text := string(data)
		mark := fmt.Sprintf("PortGUID:%016x", uint64(port))
		if err != nil || !strings.HasSuffix(text, "\n") || !strings.Contains(text, mark) {
			return false
		}
		var lines []string
		for _, line := range strings.SplitAfter(text, "\n") {
			if i := strings.Index(line, mark); i >= 0 {
				line = line[:i] + strings.Replace(line[i:], "{"+is+"}", "{"+was+"}", 1)
			}
			lines = append(lines, line)
		}
		edited = strings.Join(lines, "")
		return true
	})
	if err := os.WriteFile(filepath.Join(dir, "opensm-subnet.lst"), []byte(edited), 0o600); err != nil {
		m.t.Fatal(err)
	}
	conf, err := os.ReadFile(m.conf)
	if err != nil {
		m.t.Fatal(err)
	}
	other := filepath.Join(dir, "afm.conf")
	text := strings.Replace(string(conf), "config_dir = "+filepath.Join(m.dir, "opensm"), "config_dir = "+dir, 1)
	if text == string(conf) {
		m.t.Fatalf("afm.conf has no config_dir line to change:\n%s", conf)
	}
	if err := os.WriteFile(other, []byte(text), 0o600); err != nil {
		m.t.Fatal(err)
	}
	if out := m.confirmHosts(other); !strings.Contains(out, fmt.Sprintf(`node04  %s  "node04 mlx5_0"`, port)) {
		m.t.Fatalf("--confirm-hosts of the dump before the rename printed %q", out)
	}
}
