package pkeyread

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeUmadKernel is a FAKE of the kernel's user MAD device, for where there
// is no HCA (no test can open /dev/infiniband/umadN here, and the simulated
// fabric cannot answer a Go client of it). Each open is one end of a
// SOCK_SEQPACKET socket pair: one datagram per write() and per read(), as the
// device has one struct ib_user_mad per call, and pollable, so read deadlines
// go through the runtime's poller as on the device. Its ioctls keep the
// kernel's rules as ib_user_mad.h and user_mad.rst state them:
// ENABLE_PKEY only before any agent (and without it the 56-byte old header
// is what a write is parsed with), agents registered on QP0 only for the
// subnet management classes, ids from 0, UNREGISTER of a registered id only,
// and the file's last close unregisters what is left.
// Writes are parsed as the kernel does (header, then MAD); a request's
// transaction id gets the agent's high 32 bits; an answer comes back with
// status 0, the responder's LID and length; a request not answered within
// timeout_ms after each of its 1+retries attempts comes back as its header
// and MAD header with status ETIMEDOUT.
type fakeUmadKernel struct {
	t       *testing.T
	answers map[smpKey][]byte // attribute data of the ports at each LID

	mu sync.Mutex
	// lost says which attempts (from 0) of a request to lid get no answer.
	lost func(lid uint16, attempt int) bool
	// delay holds the answers to lid back that long (a slow or late answer).
	delay     map[uint16]time.Duration
	files     map[umadFile]*fakeUmadFile
	ioctls    []uint // in order, for every file
	sent      []umadHeader
	written   chan struct{} // a datagram was parsed (buffered, non-blocking)
	delivered chan struct{} // a reply was made readable (likewise)
}

type smpKey struct {
	lid      uint16
	attr     uint16
	modifier uint32
}

// fakeUmadFile is one open of the fake device.
type fakeUmadFile struct {
	kern        *os.File
	pkeyEnabled bool
	agents      map[uint32]bool
	closed      bool
}

func newFakeUmadKernel(t *testing.T, answers map[smpKey][]byte) *fakeUmadKernel {
	return &fakeUmadKernel{t: t, answers: answers, files: map[umadFile]*fakeUmadFile{},
		delay: map[uint16]time.Duration{}, written: make(chan struct{}, 100), delivered: make(chan struct{}, 100),
		lost: func(uint16, int) bool { return false }}
}

// ops are the fake's system calls, for umadDialer.
func (k *fakeUmadKernel) ops() umadOps { return umadOps{open: k.open, ioctl: k.ioctl} }

func (k *fakeUmadKernel) open(string) (umadFile, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	user, kern := os.NewFile(uintptr(fds[0]), "fake-umad"), os.NewFile(uintptr(fds[1]), "fake-umad-kernel")
	k.mu.Lock()
	k.files[user] = &fakeUmadFile{kern: kern, agents: map[uint32]bool{}}
	k.mu.Unlock()
	go k.serve(user, kern)
	return user, nil
}

func (k *fakeUmadKernel) ioctl(f umadFile, req uint, arg []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ioctls = append(k.ioctls, req)
	file := k.files[f]
	if file == nil {
		return syscall.EBADF
	}
	switch req {
	case umadIoctlEnablePKey:
		if len(file.agents) > 0 {
			return syscall.EINVAL
		}
		file.pkeyEnabled = true
	case umadIoctlRegisterAgent:
		if len(arg) != umadRegReqSize || arg[umadRegOffQPN] > 1 {
			return syscall.EINVAL
		}
		if class := arg[umadRegOffClass]; arg[umadRegOffQPN] == 0 && class != 0x01 && class != 0x81 {
			return syscall.EINVAL // QP0 takes only the subnet management classes
		}
		id := uint32(0)
		for file.agents[id] {
			id++
		}
		file.agents[id] = true
		binary.NativeEndian.PutUint32(arg, id)
	case umadIoctlUnregisterAgent:
		if len(arg) != 4 || !file.agents[binary.NativeEndian.Uint32(arg)] {
			return syscall.EINVAL
		}
		delete(file.agents, binary.NativeEndian.Uint32(arg))
	default:
		return syscall.ENOTTY
	}
	return nil
}

// serve reads the user's writes until the user closes its end.
func (k *fakeUmadKernel) serve(user umadFile, kern *os.File) {
	defer kern.Close()
	buf := make([]byte, 4096)
	for {
		n, err := kern.Read(buf)
		if err != nil || n == 0 {
			k.mu.Lock()
			k.files[user].closed = true
			clear(k.files[user].agents) // the kernel's release unregisters them
			k.mu.Unlock()
			return
		}
		k.request(user, kern, append([]byte(nil), buf[:n]...))
	}
}

// request handles one write: a header (of the size the file's mode says)
// and a MAD.
func (k *fakeUmadKernel) request(user umadFile, kern *os.File, msg []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	file := k.files[user]
	hdrSize := 56
	if file.pkeyEnabled {
		hdrSize = umadHeaderSize
	}
	if len(msg) != hdrSize+MADSize {
		k.t.Errorf("fake umad: write of %d bytes, want a %d-byte header and a MAD", len(msg), hdrSize)
		return
	}
	h, mad := parseUmadHeader(msg), msg[hdrSize:]
	switch {
	case !file.agents[h.agent]:
		k.t.Errorf("fake umad: write for agent %d, not registered (the kernel fails it with EINVAL)", h.agent)
		return
	case mad[1] != classSubnLID || mad[3] != methodGet:
		k.t.Errorf("fake umad: MAD of class 0x%02x method 0x%02x, want a SubnGet", mad[1], mad[3])
		return
	case binary.BigEndian.Uint32(msg[umadOffQPN:]) != 0 || h.timeoutMS == 0:
		k.t.Errorf("fake umad: header %+v qpn %d: want QP0 and a timeout (a solicited request)", h,
			binary.BigEndian.Uint32(msg[umadOffQPN:]))
		return
	}
	k.sent = append(k.sent, h)
	binary.BigEndian.PutUint32(mad[offTID:], 0x80000000|h.agent) // the agent's hi_tid
	select {
	case k.written <- struct{}{}:
	default:
	}
	// The first answer to any attempt that arrives while the request is
	// outstanding completes it; after (1+retries) timeouts the kernel gives
	// up, and an answer after that is dropped.
	timeout := time.Duration(h.timeoutMS) * time.Millisecond
	giveUp := time.Duration(h.retries+1) * timeout
	for attempt := range int(h.retries) + 1 {
		arrival := time.Duration(attempt)*timeout + k.delay[h.lid]
		if k.hasPort(h.lid) && !k.lost(h.lid, attempt) && arrival < giveUp {
			k.deliver(kern, k.answer(h, mad), arrival)
			return
		}
	}
	// The original header and the MAD's header, status ETIMEDOUT.
	reply := append([]byte(nil), msg[:hdrSize+umadTimeoutHeader]...)
	binary.NativeEndian.PutUint32(reply[umadOffStatus:], uint32(syscall.ETIMEDOUT))
	copy(reply[hdrSize:], mad[:umadTimeoutHeader])
	k.deliver(kern, reply, giveUp)
}

// deliver makes reply readable after a while, and says so on delivered.
func (k *fakeUmadKernel) deliver(kern *os.File, reply []byte, after time.Duration) {
	time.AfterFunc(after, func() {
		kern.Write(reply) //nolint:errcheck // the user may have closed its end
		select {
		case k.delivered <- struct{}{}:
		default:
		}
	})
}

// hasPort says whether a port answers at lid.
func (k *fakeUmadKernel) hasPort(lid uint16) bool {
	for key := range k.answers {
		if key.lid == lid {
			return true
		}
	}
	return false
}

// answer is the GetResp to mad from the port at h.lid: its attribute data,
// or status 0x001c (invalid attribute or modifier) for one it does not have.
func (k *fakeUmadKernel) answer(h umadHeader, mad []byte) []byte {
	reply := make([]byte, umadHeaderSize+MADSize)
	umadHeader{agent: h.agent, length: umadHeaderSize + MADSize, lid: h.lid}.put(reply)
	resp := reply[umadHeaderSize:]
	copy(resp, mad)
	resp[3] = methodGetResp
	key := smpKey{h.lid, binary.BigEndian.Uint16(mad[offAttrID:]), binary.BigEndian.Uint32(mad[offModifier:])}
	if data, ok := k.answers[key]; ok {
		copy(resp[offData:], data)
	} else {
		binary.BigEndian.PutUint16(resp[offStatus:], 7<<2)
	}
	return reply
}

// agents is how many agents the fake's open files hold; open, how many files
// the user has not closed.
func (k *fakeUmadKernel) agents() (agents, open int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range k.files {
		agents += len(f.agents)
		if !f.closed {
			open++
		}
	}
	return agents, open
}

func (k *fakeUmadKernel) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return fmt.Sprintf("ioctls %#x, sent %+v", k.ioctls, k.sent)
}
