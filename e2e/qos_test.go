package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestKubernetesQoS: UFM's QoS of a pkey, as NICo sets it (PUT
// /resources/pkeys/qos_conf), reaches a real OpenSM: the SA's path record
// between two hosts of the pkey carries its SL and is limited to its rate
// and MTU (the QoS policy file), and the pkey's IPoIB broadcast group has its
// MTU, rate and SL (the partition's flags). A pkey whose QoS no client set
// (ib-kubernetes sends none) is not limited: its paths run at the links'
// rate, its group at OpenSM's defaults (2048 bytes, 10 Gb/s, SL 0), as the
// API's reads say. The store's engines are the store suite's; this runs on
// SQLite.
func TestKubernetesQoS(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 4}, settings{UFMPKeys: []string{
		"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff", "apply_timeout = 60",
	}})
	m.confirmSwitches()
	k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
	h1, h2 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID
	k.applied(k.must("POST", "/ufmRest/resources/pkeys", fmt.Sprintf(
		`{"pkey":"0x1005","ip_over_ib":true,"membership":"full","index0":true,"guids":[%q,%q]}`, ufm(h1), ufm(h2)), http.StatusOK))
	if got := k.must("GET", "/ufmRest/resources/pkeys/0x1005?qos_conf=true", "", http.StatusOK); !strings.Contains(got,
		`"qos_conf":{"mtu_limit":2,"rate_limit":10,"service_level":0}`) {
		t.Errorf("a pkey without a QoS reads %s, want what OpenSM applies to it", got)
	}
	// The simulated links run at 4X QDR (40 Gb/s, rate code 7) with a
	// 2048-byte MTU (code 4): the path is the links'; the group is at
	// OpenSM's 10 Gb/s (code 3).
	m.wantQoS(h1, h2, 0x1005, saQoS{sl: 0, mtu: 4, rate: 7, group: &saGroup{mtu: 4, rate: 3, sl: 0}})

	// A PUT limits the pkey's paths at once (the QoS policy). OpenSM sets an
	// IPoIB group's MTU, rate and SL when it creates the group and keeps them
	// while the partition exists: the broadcast group keeps the ones it was
	// created with.
	k.applied(k.must("PUT", "/ufmRest/resources/pkeys/qos_conf",
		`{"pkey":"0x1005","mtu_limit":2,"service_level":5,"rate_limit":2.5}`, http.StatusOK))
	m.wantQoS(h1, h2, 0x1005, saQoS{sl: 5, mtu: 4, rate: 2, group: &saGroup{mtu: 4, rate: 3, sl: 0}})
	if got := k.must("GET", "/ufmRest/resources/pkeys?qos_conf=true&guids_data=true", "", http.StatusOK); !strings.Contains(got,
		`"qos_conf":{"mtu_limit":2,"rate_limit":2.5,"service_level":5}`) {
		t.Errorf("the list reads %s after the PUT", got)
	}
	// A pkey created with its QoS: its group has it. Above the links' rate
	// and MTU, the limits leave the path at the links'.
	k.applied(k.must("POST", "/ufmRest/resources/pkeys", fmt.Sprintf(
		`{"pkey":"0x1006","membership":"full","guids":[%q,%q],"mtu_limit":4,"service_level":2,"rate_limit":200}`,
		ufm(h1), ufm(h2)), http.StatusOK))
	m.wantQoS(h1, h2, 0x1006, saQoS{sl: 2, mtu: 4, rate: 7, group: &saGroup{mtu: 5, rate: 17, sl: 2}})
}

// TestKubernetesQoSKeepsOtherPartitionsSL: a partition adopted with sl=3
// (or the template's with one) keeps the SL of its paths when a Kubernetes
// pkey's QoS turns OpenSM's qos on, and a pkey without a QoS changes
// nothing: the SA's path records before and after are the same. Without qos
// OpenSM forces its sl= to 0, so its IPoIB group, created before, is at SL
// 0 too (a manager that ran qos TRUE from its start created it at SL 3).
func TestKubernetesQoSKeepsOtherPartitionsSL(t *testing.T) {
	m := launchManager(t, storetest.NewDatabase(t, config.EngineSQLite), fabricsim.Options{Hosts: 4}, settings{UFMPKeys: []string{
		"username = " + ufmUser, "password = " + ufmPassword, "pkey_range = 0x1000-0x1fff", "apply_timeout = 60",
	}})
	m.confirmSwitches()
	h := hostGUIDs(m, 4)
	running := filepath.Join(t.TempDir(), "running-partitions.conf")
	if err := os.WriteFile(running, []byte(fmt.Sprintf("storage=0x0abc, ipoib, sl=3 : %s=full, %s=full ;\n", h[0], h[1])),
		0o644); err != nil {
		t.Fatal(err)
	}
	m.operator("--adopt-partitions", running)
	m.waitPKey(h[1], 0x8abc, true)
	before := m.pathQoS("H1", h[0], h[1], 0x0abc)
	if before.sl != 0 {
		t.Errorf("adopted sl=3 partition's path without qos: %+v, want SL 0 (OpenSM forces sl= to 0)", before)
	}
	if g := m.groupQoS("H1", 0x0abc); g != (saGroup{mtu: 4, rate: 3, sl: 0}) {
		t.Errorf("adopted sl=3 partition's IPoIB group: %+v, want OpenSM's 2048 bytes, 10 Gb/s, SL 0", g)
	}

	k := &ufmClient{m: m, user: ufmUser, password: ufmPassword}
	k.applied(k.must("POST", "/ufmRest/resources/pkeys", fmt.Sprintf(
		`{"pkey":"0x1005","membership":"full","guids":[%q,%q]}`, ufm(h[2]), ufm(h[3])), http.StatusOK))
	if got := m.pathQoS("H1", h[0], h[1], 0x0abc); got != before {
		t.Errorf("adopted sl=3 partition's path after a pkey without a QoS: %+v, want %+v as before", got, before)
	}
	k.applied(k.must("PUT", "/ufmRest/resources/pkeys/qos_conf", `{"pkey":"0x1005","service_level":5}`, http.StatusOK))
	if got := m.pathQoS("H3", h[2], h[3], 0x1005); got.sl != 5 {
		t.Fatalf("the pkey's path after its QoS was set: %+v, want SL 5 (qos on)", got)
	}
	if got := m.pathQoS("H1", h[0], h[1], 0x0abc); got != before {
		t.Errorf("adopted sl=3 partition's path after a pkey's QoS turned qos on: %+v, want %+v as before", got, before)
	}
}

// groupQoS is the MTU, rate and SL codes of pkey's IPoIB broadcast group,
// as host reads them from the SA.
func (m *manager) groupQoS(host string, pkey fabric.PKey) saGroup {
	t := m.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mgid := fmt.Sprintf("ff12:401b:%x::ffff:ffff", uint16(pkey)|0x8000)
	for _, g := range m.saQuery(ctx, host, "-g") {
		if g["mgid"] == mgid {
			return saGroup{mtu: code(t, g["mtu"]), rate: code(t, g["rate"]), sl: code(t, g["sl"])}
		}
	}
	t.Fatalf("no IPoIB group %s in the SA's multicast records", mgid)
	return saGroup{}
}

// pathQoS is the SL, MTU and rate codes of the SA's path record from a to b
// in pkey, as host reads it (the SA answers a member of the pkey).
func (m *manager) pathQoS(host string, a, b fabric.GUID, pkey fabric.PKey) saQoS {
	t := m.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	paths := m.saQuery(ctx, host, "PR", "--sgid", gid(a), "--dgid", gid(b), "--pkey", pkey.String())
	if len(paths) != 1 {
		t.Fatalf("path records %s-%s in pkey %s: %v", a, b, pkey, paths)
	}
	p := paths[0]
	return saQoS{sl: code(t, p["sl"]), mtu: code(t, p["mtu"]), rate: code(t, p["rate"])}
}

// saQoS is what the SA answers for a pkey: its path's SL, MTU and rate codes
// (selector bits cleared), and its IPoIB group's when they differ from the
// path's (a group's are the partition's own, not limited by the links).
type saQoS struct {
	sl, mtu, rate int
	group         *saGroup
}

type saGroup struct{ mtu, rate, sl int }

// saField reads "name....value" lines of saquery's dumps.
var saField = regexp.MustCompile(`(?m)^\s*(\w+)\.{2,}(\S+)\s*$`)

// saQuery runs saquery in the fabric as host (its SA client's port), and
// returns its records, each a map of lower-cased field to value.
func (m *manager) saQuery(ctx context.Context, host string, args ...string) []map[string]string {
	m.t.Helper()
	path, err := fabricsim.LookPath("saquery")
	if err != nil {
		m.t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = m.fabric.Dir
	cmd.Env = append(append(os.Environ(), m.fabric.Env()...), "SIM_HOST="+host) // the last value wins
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		m.t.Fatalf("saquery %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var records []map[string]string
	for _, block := range strings.Split(string(out), " dump:") {
		r := map[string]string{}
		for _, f := range saField.FindAllStringSubmatch(block, -1) {
			r[strings.ToLower(f[1])] = f[2]
		}
		if len(r) > 0 {
			records = append(records, r)
		}
	}
	return records
}

// gid is a port's link-local GID, as saquery takes it.
func gid(g fabric.GUID) string {
	v := uint64(g)
	return fmt.Sprintf("fe80::%x:%x:%x:%x", v>>48, v>>32&0xffff, v>>16&0xffff, v&0xffff)
}

func code(t *testing.T, text string) int {
	t.Helper()
	v, err := strconv.ParseUint(text, 0, 8)
	if err != nil {
		t.Fatalf("saquery value %q: %v", text, err)
	}
	return int(v & 0x3f)
}

// wantQoS checks the path record between two hosts of pkey and the pkey's
// IPoIB broadcast group, as host H1 reads them from the SA.
func (m *manager) wantQoS(a, b fabric.GUID, pkey fabric.PKey, want saQoS) {
	t := m.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	paths := m.saQuery(ctx, "H1", "PR", "--sgid", gid(a), "--dgid", gid(b), "--pkey", pkey.String())
	if len(paths) != 1 {
		t.Fatalf("path records H1-H2 in pkey %s: %v", pkey, paths)
	}
	p := paths[0]
	if got := (saQoS{sl: code(t, p["sl"]), mtu: code(t, p["mtu"]), rate: code(t, p["rate"])}); got.sl != want.sl ||
		got.mtu != want.mtu || got.rate != want.rate {
		t.Errorf("path record H1-H2 in pkey %s: SL %d, MTU code %d, rate code %d; want %d, %d, %d (%v)",
			pkey, got.sl, got.mtu, got.rate, want.sl, want.mtu, want.rate, p)
	}
	mgid := fmt.Sprintf("ff12:401b:%x::ffff:ffff", uint16(pkey)|0x8000)
	group := saGroup{mtu: want.mtu, rate: want.rate, sl: want.sl}
	if want.group != nil {
		group = *want.group
	}
	for _, g := range m.saQuery(ctx, "H1", "-g") {
		if g["mgid"] != mgid {
			continue
		}
		if code(t, g["mtu"]) != group.mtu || code(t, g["rate"]) != group.rate || code(t, g["sl"]) != group.sl {
			t.Errorf("IPoIB group %s: MTU %s, rate %s, SL %s; want codes %d, %d, %d", mgid, g["mtu"], g["rate"], g["sl"],
				group.mtu, group.rate, group.sl)
		}
		return
	}
	t.Errorf("no IPoIB group %s in the SA's multicast records", mgid)
}
