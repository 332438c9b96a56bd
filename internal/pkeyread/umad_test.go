package pkeyread

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// cField is a field of a C structure of include/uapi/rdma/ib_user_mad.h, in
// declaration order: the tests place each at the offset the C layout gives
// it (every field here is naturally aligned), independently of the package's
// offset constants.
type cField struct {
	name string
	size int
	big  bool // __be16/__be32
}

var umadHdrFields = []cField{
	{"id", 4, false}, {"status", 4, false}, {"timeout_ms", 4, false}, {"retries", 4, false},
	{"length", 4, false}, {"qpn", 4, true}, {"qkey", 4, true}, {"lid", 2, true}, {"sl", 1, false},
	{"path_bits", 1, false}, {"grh_present", 1, false}, {"gid_index", 1, false}, {"hop_limit", 1, false},
	{"traffic_class", 1, false}, {"gid", 16, false}, {"flow_label", 4, true}, {"pkey_index", 2, false},
	{"reserved", 6, false},
}

// cOffsets are the fields' offsets and the structure's size (padded to 4,
// the largest alignment of these structures' members).
func cOffsets(fields []cField) (map[string]int, int) {
	offs, off := map[string]int{}, 0
	for _, f := range fields {
		offs[f.name] = off
		off += f.size
	}
	return offs, (off + 3) / 4 * 4
}

// TestUmadHeaderLayout: what the package writes and reads is struct
// ib_user_mad_hdr (with pkey_index), field by field in each field's byte
// order, and, on a little-endian host such as x86-64 and arm64, the golden
// bytes of testdata.
func TestUmadHeaderLayout(t *testing.T) {
	offs, size := cOffsets(umadHdrFields)
	if size != umadHeaderSize {
		t.Fatalf("struct ib_user_mad_hdr is %d bytes, the package uses %d", size, umadHeaderSize)
	}
	h := umadHeader{agent: 0x11223344, status: 0x55667788, timeoutMS: 0x99aabbcc, retries: 0x0d0e0f10,
		length: 0x21222324, lid: 0x3132}
	b := make([]byte, umadHeaderSize)
	h.put(b)
	for _, f := range []struct {
		name string
		want uint64
	}{{"id", 0x11223344}, {"status", 0x55667788}, {"timeout_ms", 0x99aabbcc}, {"retries", 0x0d0e0f10},
		{"length", 0x21222324}, {"qpn", 0}, {"qkey", 0}, {"lid", 0x3132}, {"pkey_index", 0}} {
		field := umadHdrFields[slices.IndexFunc(umadHdrFields, func(c cField) bool { return c.name == f.name })]
		var order binary.ByteOrder = binary.NativeEndian
		if field.big {
			order = binary.BigEndian
		}
		var got uint64
		switch field.size {
		case 2:
			got = uint64(order.Uint16(b[offs[f.name]:]))
		case 4:
			got = uint64(order.Uint32(b[offs[f.name]:]))
		}
		if got != f.want {
			t.Errorf("%s at offset %d: %#x, want %#x", f.name, offs[f.name], got, f.want)
		}
	}
	if parsed := parseUmadHeader(b); parsed != h {
		t.Errorf("parsed %+v, want %+v", parsed, h)
	}
	// The header is in host order: the golden bytes below are a little-endian
	// host's (every host CI runs on); the offsets above hold on any host.
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		checkUmadGolden(t)
	}
}

// checkUmadGolden compares a header as sent, and one as read, with bytes a
// little-endian kernel writes.
func checkUmadGolden(t *testing.T) {
	t.Helper()
	sent := make([]byte, umadHeaderSize)
	umadHeader{agent: 3, timeoutMS: 500, retries: 2, lid: 0x0102}.put(sent)
	if want := answer(t, "umad-header-send"); !slices.Equal(sent, want) {
		t.Errorf("header sent:\n% x\nwant\n% x", sent, want)
	}
	got := parseUmadHeader(answer(t, "umad-header-timeout"))
	if want := (umadHeader{status: uint32(syscall.ETIMEDOUT), timeoutMS: 500, retries: 2, length: 320, lid: 0x0304}); got != want {
		t.Errorf("header read: %+v, want %+v", got, want)
	}
}

// TestUmadRegisterRequest: the agent registration is struct
// ib_user_mad_reg_req on QP0 for the LID-routed SM class, version 1, no
// methods, and the ioctl numbers are _IOWR/_IOW/_IO(0x1b, nr, size) of the
// structures' sizes.
func TestUmadRegisterRequest(t *testing.T) {
	fields := []cField{{"id", 4, false}, {"method_mask", 16, false}, {"qpn", 1, false},
		{"mgmt_class", 1, false}, {"mgmt_class_version", 1, false}, {"oui", 3, false}, {"rmpp_version", 1, false}}
	offs, size := cOffsets(fields)
	req := smpAgentRequest()
	if len(req) != size {
		t.Fatalf("request of %d bytes, struct ib_user_mad_reg_req is %d", len(req), size)
	}
	want := make([]byte, size)
	want[offs["qpn"]], want[offs["mgmt_class"]], want[offs["mgmt_class_version"]] = 0, 0x01, 1
	if !slices.Equal(req, want) {
		t.Errorf("request % x, want % x", req, want)
	}
	ioc := func(dir, nr, size uint) uint { return dir<<30 | size<<16 | 0x1b<<8 | nr }
	for _, c := range []struct {
		name      string
		got, want uint
	}{
		{"REGISTER_AGENT", umadIoctlRegisterAgent, ioc(3, 1, uint(size))},
		{"UNREGISTER_AGENT", umadIoctlUnregisterAgent, ioc(1, 2, 4)},
		{"ENABLE_PKEY", umadIoctlEnablePKey, ioc(0, 3, 0)},
	} {
		if c.got != c.want {
			t.Errorf("IB_USER_MAD_%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if umadIoctlRegisterAgent != 0xc01c1b01 {
		t.Errorf("IB_USER_MAD_REGISTER_AGENT = %#x, want 0xc01c1b01", umadIoctlRegisterAgent)
	}
}

// tree writes files (path: content) under a new directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestUmadDialerPort finds the umad device of an HCA port in a sysfs tree
// (testdata/umad-host: mlx5_0 port 1 on umad0, mlx5_1 ports 1 and 2 on umad1
// and umad2, an issm0 that is not a umad device), and says what is wrong
// with a port it cannot use.
func TestUmadDialerPort(t *testing.T) {
	host := umadHost{root: filepath.Join("testdata", "umad-host")}
	const local = "the host's: mlx5_0:1, mlx5_1:1, mlx5_1:2"
	for _, c := range []struct {
		port, device, err string
	}{
		{"mlx5_0:1", "umad0", ""},
		{"mlx5_1:2", "umad2", ""},
		{"", "", "set [opensm] smp_port to a local port (" + local + ")"},
		{"mlx5_1", "", `HCA port "mlx5_1": want device:port, e.g. mlx5_0:1 (` + local + ")"},
		{"mlx5_0:2", "", "HCA port mlx5_0:2: no such local port (" + local + ")"},
	} {
		d, err := host.dialer(c.port, kernelUmad)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error saying %q", c.port, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.port, err)
			continue
		}
		if want := filepath.Join(host.root, "dev/infiniband", c.device); d.(umadDialer).path != want {
			t.Errorf("%q: device %s, want %s", c.port, d.(umadDialer).path, want)
		}
	}

	for name, c := range map[string]struct {
		files map[string]string
		err   string
	}{
		"no ib_umad":  {map[string]string{"sys/class/infiniband/mlx5_0/ports/1/gids/0": ""}, "is the ib_umad kernel module loaded?"},
		"another ABI": {map[string]string{"sys/class/infiniband_mad/abi_version": "6\n"}, "ABI is version 6, this manager speaks 5"},
		"no ports":    {map[string]string{"sys/class/infiniband_mad/abi_version": "5\n"}, "(the host has none)"},
		"unreadable": {map[string]string{"sys/class/infiniband_mad/abi_version": "5\n",
			"sys/class/infiniband_mad/umad0/ibdev": "mlx5_0\n"}, "user MAD device umad0"},
	} {
		_, err := umadHost{root: tree(t, c.files)}.dialer("mlx5_0:1", kernelUmad)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.err)
		}
	}
}

// TestUmadPortOfGUID finds the local port by the port GUID in its GID 0.
func TestUmadPortOfGUID(t *testing.T) {
	host := umadHost{root: filepath.Join("testdata", "umad-host")}
	for guid, want := range map[fabric.GUID]string{0x0002c90300a00001: "mlx5_0:1", 0x0002c90300b00002: "mlx5_1:2"} {
		if got, err := host.portOfGUID(guid); got != want || err != nil {
			t.Errorf("%s: %q, %v, want %s", guid, got, err, want)
		}
	}
	if _, err := host.portOfGUID(0x0002c90300c00001); err == nil || !strings.Contains(err.Error(), "no local HCA port has GUID 0x0002c90300c00001") {
		t.Errorf("an unknown GUID: %v", err)
	}
}

// fakeFabric are the answers of H1 (port GUID 0x0002c90300000101, a full
// member of 0x0064) at LID 2 and of switch S1 (H1 on its port 2) at LID 1, as
// the simulated fabric gave them (testdata), for the fake umad device.
func fakeFabric(t *testing.T) map[smpKey][]byte {
	data := func(name string) []byte { return answer(t, name)[offData : offData+smpDataSize] }
	empty := make([]byte, smpDataSize)
	return map[smpKey][]byte{
		{2, attrNodeInfo, 0}: data("nodeinfo-hca"), {2, attrPKeyTable, 0}: data("pkeytable-hca-block0"),
		{2, attrPKeyTable, 1}: empty,
		{1, attrNodeInfo, 0}:  data("nodeinfo-switch"), {1, attrSwitchInfo, 0}: data("switchinfo"),
		{1, attrPKeyTable, pkeyModifier(2, 0)}: data("pkeytable-switch-port2-block0"),
		{1, attrPKeyTable, pkeyModifier(2, 1)}: empty,
	}
}

var fakeH1 = Target{Port: 0x0002c90300000101, LID: 2, Switch: SwitchPort{GUID: 0x0002c90300f00001, LID: 1, Port: 2}}

// TestUmadReader reads tables through the umad transport on the fake device
// with the package's Reader: every SMP is a write of header and MAD and a
// read of the answer with its transaction id; a LID where nothing answers
// fails with the kernel's ETIMEDOUT; closing unregisters every agent and
// closes every file.
func TestUmadReader(t *testing.T) {
	k := newFakeUmadKernel(t, fakeFabric(t))
	r := &Reader{Dialer: umadDialer{port: "mlx5_0:1", path: "/dev/infiniband/umad0", ops: k.ops()}, Workers: 2,
		PortTimeout: 2 * time.Second}
	nowhere := Target{Port: 0x0002c90300000201, LID: 9}
	results := r.Read(t.Context(), []Target{fakeH1, nowhere, fakeH1})
	for _, i := range []int{0, 2} {
		res := results[i]
		if res.Err != nil || res.PKeys.Membership(0x64) != Full || res.SwitchPKeys.Membership(0x64) != Full ||
			len(res.PKeys) != 2 || len(res.SwitchPKeys) != 2 {
			t.Errorf("H1: %#04x, switch %#04x, %v; want 0x7fff and 0x8064 in both (%s)", res.PKeys, res.SwitchPKeys, res.Err, k)
		}
	}
	if err := results[1].Err; !errors.Is(err, syscall.ETIMEDOUT) || !strings.Contains(err.Error(), "NodeInfo: no answer") {
		t.Errorf("LID 9, where nothing answers: %v, want NodeInfo: no answer (ETIMEDOUT)", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for agents, open := k.agents(); agents != 0 || open != 0; agents, open = k.agents() {
		if time.Now().After(deadline) {
			t.Fatalf("after the read: %d agents registered, %d files open (%s)", agents, open, k)
		}
		time.Sleep(5 * time.Millisecond)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ioctls[0] != umadIoctlEnablePKey || k.ioctls[1] != umadIoctlRegisterAgent {
		t.Errorf("ioctls %#x: want ENABLE_PKEY, then REGISTER_AGENT first", k.ioctls)
	}
	for _, h := range k.sent {
		budget := time.Duration(h.timeoutMS) * time.Millisecond * time.Duration(h.retries+1)
		if h.retries != umadRetries || h.timeoutMS == 0 || budget > r.PortTimeout {
			t.Errorf("request %+v: want %d retries whose timeouts end within the port's %s", h, umadRetries, r.PortTimeout)
		}
	}
}

// dialFake opens a connection on k.
func dialFake(t *testing.T, k *fakeUmadKernel) *umadConn {
	t.Helper()
	c, err := umadDialer{port: "mlx5_0:1", ops: k.ops()}.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*umadConn)
}

// TestUmadSend: a lost attempt is answered by the kernel's retry within one
// Send; a cancelled Send returns at once with ctx's error, and the answer
// that comes after it is skipped by the next Send.
func TestUmadSend(t *testing.T) {
	k := newFakeUmadKernel(t, fakeFabric(t))
	k.lost = func(lid uint16, attempt int) bool { return lid == 2 && attempt == 0 }
	c := dialFake(t, k)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	req := getSMP(attrNodeInfo, 0, 0, 41)
	answer, err := c.Send(ctx, 2, req)
	if err != nil {
		t.Fatalf("the first attempt lost: %v, want the retry's answer", err)
	}
	if data, err := answerData(req, answer); err != nil || fabric.GUID(parseNodeInfo(data).portGUID) != fakeH1.Port {
		t.Errorf("answer: %v, %v", data, err)
	}

	// A Send cancelled while the kernel still waits: the answer comes after
	// it returned, and the next Send reads it first and skips it.
	k.mu.Lock()
	k.delay[1] = 200 * time.Millisecond
	k.mu.Unlock()
	drain(k.written)
	drain(k.delivered)
	cancelled, cancelNow := context.WithCancel(t.Context())
	go func() {
		<-k.written
		cancelNow()
	}()
	start := time.Now()
	if _, err := c.Send(cancelled, 1, getSMP(attrNodeInfo, 0, 0, 42)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
	if time.Since(start) >= 200*time.Millisecond {
		t.Errorf("a cancelled Send returned after %s, not at once", time.Since(start))
	}
	<-k.delivered // the late answer to 42 is readable
	k.mu.Lock()
	sent := len(k.sent)
	k.mu.Unlock()
	if _, err := c.Send(cancelled, 1, getSMP(attrNodeInfo, 0, 0, 99)); !errors.Is(err, context.Canceled) {
		t.Errorf("Send on a cancelled context: %v", err)
	}

	k.mu.Lock()
	k.delay[1] = 0
	k.mu.Unlock()
	req = getSMP(attrSwitchInfo, 0, 0, 43)
	if answer, err := c.Send(ctx, 1, req); err != nil || !sameTID(req, answer) || answer[offAttrID+1] != attrSwitchInfo {
		t.Errorf("after a late answer: %v", err)
	}
	k.mu.Lock() // the device's datagrams are in order: 99's would be parsed before 43's
	if len(k.sent) != sent+1 {
		t.Errorf("a request was sent on a cancelled context: %+v", k.sent[sent:])
	}
	k.mu.Unlock()
}

func drain(c chan struct{}) {
	for len(c) > 0 {
		<-c
	}
}

// TestUmadClose unregisters the connection's agent, whose id may be 0.
func TestUmadClose(t *testing.T) {
	k := newFakeUmadKernel(t, fakeFabric(t))
	c := dialFake(t, k)
	if c.agent != 0 {
		t.Errorf("first agent %d, want the kernel's first id, 0", c.agent)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	unregistered := slices.Contains(k.ioctls, umadIoctlUnregisterAgent)
	k.mu.Unlock()
	if !unregistered {
		t.Errorf("Close did not unregister the agent (%s)", k)
	}
	if err := c.Close(); err == nil || !strings.Contains(err.Error(), "unregister agent 0") {
		t.Errorf("second Close: %v, want the failed unregistration", err)
	}
}

// TestUmadKernelOps: the real system calls, on files that are not a umad
// device: the open's error names the device, and the first ioctl reaches the
// kernel, which refuses it for /dev/null (ENOTTY), and the file is closed.
func TestUmadKernelOps(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "umad0")
	_, err := umadDialer{port: "mlx5_0:1", path: missing, ops: kernelUmad}.Dial(t.Context())
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "read and write access") {
		t.Errorf("a missing device: %v", err)
	}
	_, err = umadDialer{port: "mlx5_0:1", path: os.DevNull, ops: kernelUmad}.Dial(t.Context())
	if !errors.Is(err, syscall.ENOTTY) || !strings.Contains(err.Error(), "enable the pkey_index header") {
		t.Errorf("/dev/null as a umad device: %v, want ENOTTY from ENABLE_PKEY", err)
	}
	if err := kernelUmad.ioctl(nil, umadIoctlEnablePKey, nil); err == nil {
		t.Error("an ioctl on no file succeeded")
	}
}
