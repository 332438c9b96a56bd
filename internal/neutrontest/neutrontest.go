// Package neutrontest runs a real neutron-server (Debian's) for the tests
// that read Neutron's API: standalone, without Keystone (auth_strategy =
// noauth, every request an admin's) or a message queue, on SQLite, in a
// temporary directory, with the ML2 plugin's VLAN and flat type drivers.
package neutrontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// The packaged programs (Debian's neutron-server, python3-neutron).
const (
	serverBin = "/usr/bin/neutron-server"
	dbManage  = "/usr/bin/neutron-db-manage"
	python    = "/usr/bin/python3" // Neutron's, whatever else comes first on PATH
	apiPaste  = "/usr/share/neutron-common/api-paste.ini"
)

// startTimeout bounds neutron-server's start (about 3 s on an idle machine).
const startTimeout = 3 * time.Minute

// Server is a running neutron-server.
type Server struct {
	// URL is its API's endpoint, such as http://127.0.0.1:40123/.
	URL string
	dir string
}

// Start starts a neutron-server whose VLAN networks may use physnets (VLAN
// IDs 1 to 4094 on each) and whose flat networks any physnet, and stops its
// process group when the test ends. Without Debian's neutron-server the
// test skips, or fails under AFM_TEST_REQUIRE_ALL=1.
func Start(t testing.TB, physnets ...string) *Server {
	t.Helper()
	for _, bin := range []string{serverBin, dbManage, python, apiPaste} {
		if _, err := os.Stat(bin); err != nil {
			testenv.Missing(t, "neutron-server is not installed (%v): apt-get install neutron-server python3-openstackclient sqlite3", err)
		}
	}
	dir := t.TempDir()
	template, err := schema()
	if err != nil {
		t.Fatalf("neutron's database: %v", err)
	}
	db := filepath.Join(dir, "neutron.db")
	if err := copyFile(template, db); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), dir: dir}
	if err := s.writeConfig(port, db, physnets); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	return s
}

// start runs neutron-server in a process group of its own: it forks an RPC
// and a periodic worker, which must stop with it.
func (s *Server) start(t testing.TB) {
	t.Helper()
	logFile, err := os.Create(filepath.Join(s.dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(serverBin, "--config-file", filepath.Join(s.dir, "neutron.conf"),
		"--config-file", filepath.Join(s.dir, "ml2_conf.ini"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start neutron-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		logFile.Close()
	})
	testenv.WaitFor(t, "neutron-server's API", startTimeout, func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("neutron-server exited:\n%s", tail(log, 3000))
		default:
		}
		resp, err := http.Get(s.URL + "v2.0/networks")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// writeConfig writes neutron.conf, ml2_conf.ini and the policy (in a
// directory of its own: oslo.policy reads every file of policy_dirs).
func (s *Server) writeConfig(port int, db string, physnets []string) error {
	policyDir := filepath.Join(s.dir, "policy")
	if err := os.Mkdir(policyDir, 0o700); err != nil {
		return err
	}
	ranges := ""
	for i, p := range physnets {
		if i > 0 {
			ranges += ","
		}
		ranges += p + ":1:4094"
	}
	files := map[string]string{
		filepath.Join(policyDir, "policy.yaml"): "\"context_is_admin\": \"\"\n",
		filepath.Join(s.dir, "neutron.conf"): fmt.Sprintf(`[DEFAULT]
auth_strategy = noauth
transport_url = fake:/
core_plugin = ml2
service_plugins =
api_workers = 0
rpc_workers = 0
rpc_state_report_workers = 0
bind_host = 127.0.0.1
bind_port = %d
state_path = %s
api_paste_config = %s
[database]
connection = sqlite:///%s
[oslo_messaging_notifications]
driver = noop
[oslo_policy]
policy_file = %s
policy_dirs = %s
[oslo_concurrency]
lock_path = %s
`, port, s.dir, apiPaste, db, filepath.Join(policyDir, "policy.yaml"), policyDir, filepath.Join(s.dir, "lock")),
		filepath.Join(s.dir, "ml2_conf.ini"): fmt.Sprintf(`[ml2]
type_drivers = vlan,flat
tenant_network_types =
mechanism_drivers =
[ml2_type_vlan]
network_vlan_ranges = %s
[ml2_type_flat]
flat_networks = *
`, ranges),
	}
	for path, text := range files {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// CloudsFile writes a clouds.yaml whose cloud "neutrontest" reaches s
// without Keystone, and returns its path.
func (s *Server) CloudsFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	text := fmt.Sprintf("clouds:\n  neutrontest:\n    auth_type: none\n    auth:\n      endpoint: %s\n", s.URL)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// schemaOnce makes Neutron's database once per test process: creating it
// takes longer than starting the server, and every server starts from a copy.
var schemaOnce struct {
	sync.Once
	path string
	err  error
}

// schema returns a SQLite database with Neutron's tables, stamped at every
// head. neutron-db-manage's upgrade fails on SQLite (a migration alters a
// constraint), so the tables come from Neutron's models.
func schema() (string, error) {
	schemaOnce.Do(func() {
		dir, err := os.MkdirTemp("", "neutrontest-schema-")
		if err != nil {
			schemaOnce.err = err
			return
		}
		db := filepath.Join(dir, "neutron.db")
		create := exec.Command(python, "-c", `import sys
import sqlalchemy as sa
from neutron.db.migration.models import head
head.get_metadata().create_all(sa.create_engine("sqlite:///" + sys.argv[1]))
`, db)
		if out, err := create.CombinedOutput(); err != nil {
			schemaOnce.err = fmt.Errorf("create tables: %v\n%s", err, tail(out, 3000))
			return
		}
		conf := filepath.Join(dir, "neutron.conf")
		text := fmt.Sprintf("[DEFAULT]\ncore_plugin = ml2\n[database]\nconnection = sqlite:///%s\n", db)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			schemaOnce.err = err
			return
		}
		if out, err := exec.Command(dbManage, "--config-file", conf, "stamp", "heads").CombinedOutput(); err != nil {
			schemaOnce.err = fmt.Errorf("neutron-db-manage stamp heads: %v\n%s", err, tail(out, 3000))
			return
		}
		schemaOnce.path = db
	})
	return schemaOnce.path, schemaOnce.err
}

// ClientID is the client-id networking-mlnx's peers give a port of GUID g
// (Ironic's, mlnx_infiniband's hardware form): its last 8 octets are g.
func ClientID(g fabric.GUID) string {
	s := "ff:00:00:00:00:00:02:00:00:02:c9:00"
	for i := 7; i >= 0; i-- {
		s += fmt.Sprintf(":%02x", byte(uint64(g)>>(8*i)))
	}
	return s
}

// Network is a network to create.
type Network struct {
	Name, Type, Physnet string
	VLAN                int // 0 for a flat network
}

// CreateNetwork creates n, with a subnet (a port binds only with a fixed
// IP), and returns its id.
func (s *Server) CreateNetwork(t testing.TB, n Network) string {
	t.Helper()
	body := map[string]any{"name": n.Name, "provider:network_type": n.Type, "provider:physical_network": n.Physnet}
	if n.VLAN != 0 {
		body["provider:segmentation_id"] = n.VLAN
	}
	var out struct{ Network struct{ ID string } }
	s.Do(t, "POST", "networks", map[string]any{"network": body}, &out)
	s.Do(t, "POST", "subnets", map[string]any{"subnet": map[string]any{"network_id": out.Network.ID,
		"cidr": "10.0.0.0/16", "ip_version": 4, "enable_dhcp": false}}, nil)
	return out.Network.ID
}

// Port is a port to create. ClientID "" creates one without a client-id.
type Port struct {
	NetworkID, Host, ClientID string
}

// CreatePort creates p and returns its id.
func (s *Server) CreatePort(t testing.TB, p Port) string {
	t.Helper()
	body := map[string]any{"network_id": p.NetworkID, "binding:vnic_type": "baremetal", "device_owner": "baremetal:none"}
	if p.Host != "" {
		body["binding:host_id"] = p.Host
	}
	if p.ClientID != "" {
		body["extra_dhcp_opts"] = []map[string]any{{"opt_name": "client-id", "opt_value": p.ClientID}}
	}
	var out struct{ Port struct{ ID string } }
	s.Do(t, "POST", "ports", map[string]any{"port": body}, &out)
	return out.Port.ID
}

// Delete deletes a network or port: kind "networks" or "ports".
func (s *Server) Delete(t testing.TB, kind, id string) {
	t.Helper()
	s.Do(t, "DELETE", kind+"/"+id, nil, nil)
}

// Do sends a request to Neutron's API (path under v2.0/) and decodes its
// answer into out, if not nil; an answer other than 2xx fails the test.
func (s *Server) Do(t testing.TB, method, path string, body, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+"v2.0/"+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	n, _ := strconv.Atoi(port)
	return n
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
