package pkeyread

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's user MAD interface (include/uapi/rdma/ib_user_mad.h, ABI
// version 5, Documentation/infiniband/user_mad.rst): one character device per
// HCA port, /dev/infiniband/umadN. A file registers agents by ioctl; write()
// sends one struct ib_user_mad (a header, then the MAD) on behalf of an agent,
// and read() returns one: the answer to a request, or the request itself
// with status ETIMEDOUT once the kernel gave up waiting and retrying. The
// kernel routes an answer to the agent that sent the request by the high 32
// bits of the transaction id, which it sets itself on every request.
const (
	umadABIVersion = 5
	// umadHeaderSize is struct ib_user_mad_hdr with pkey_index, the layout
	// IB_USER_MAD_ENABLE_PKEY selects (without it, the 56-byte old one).
	umadHeaderSize = 64
	// The header's fields: __u32 in the host's byte order, __be in big-endian.
	umadOffAgent     = 0  // __u32 id: the agent sent with or received by
	umadOffStatus    = 4  // __u32 status: 0, or ETIMEDOUT for a request without answer
	umadOffTimeoutMS = 8  // __u32 timeout_ms: the wait for an answer, each attempt
	umadOffRetries   = 12 // __u32 retries: resends after the first attempt
	umadOffLength    = 16 // __u32 length: of what read() returned (set on receive)
	umadOffQPN       = 20 // __be32 qpn: 0, the subnet management QP
	umadOffQKey      = 24 // __be32 qkey: 0 on QP0
	umadOffLID       = 28 // __be16 lid: destination, or the answer's source
	umadOffPKeyIndex = 56 // __u16 pkey_index: 0, the default P_Key's entry
	// umadTimeoutHeader is the MAD header (IBA 13.4.3, 24 bytes) the kernel
	// returns after the header of a request that timed out: enough to match
	// its transaction id.
	umadTimeoutHeader = 24

	// struct ib_user_mad_reg_req: __u32 id, a 128-bit method mask (longs
	// aligned to 4, so at offset 4 on 32- and 64-bit kernels alike), then
	// __u8 qpn, mgmt_class, mgmt_class_version, oui[3], rmpp_version; 27
	// bytes padded to 28.
	umadRegReqSize         = 28
	umadRegOffQPN          = 20
	umadRegOffClass        = 21
	umadRegOffClassVersion = 22

	// The ioctls, _IOWR/_IOW/_IO of type 0x1b (IB_IOCTL_MAGIC):
	// dir<<30 | size<<16 | type<<8 | nr, with dir 1 write, 2 read.
	umadIoctlRegisterAgent   = 3<<30 | umadRegReqSize<<16 | 0x1b<<8 | 1 // struct ib_user_mad_reg_req
	umadIoctlUnregisterAgent = 1<<30 | 4<<16 | 0x1b<<8 | 2              // __u32 agent id
	umadIoctlEnablePKey      = 0x1b<<8 | 3                              // no argument
)

// umadHeader is the part of struct ib_user_mad_hdr this package sends and
// reads; the rest (GRH, SL, path bits) stays zero: SMPs stay within the
// subnet on the default SL. A directed-route SMP goes to PermissiveLID, as
// libibumad sends one: the kernel's SMI routes it by its path.
type umadHeader struct {
	agent     uint32
	status    uint32
	timeoutMS uint32
	retries   uint32
	length    uint32
	lid       uint16
}

func (h umadHeader) put(b []byte) {
	binary.NativeEndian.PutUint32(b[umadOffAgent:], h.agent)
	binary.NativeEndian.PutUint32(b[umadOffStatus:], h.status)
	binary.NativeEndian.PutUint32(b[umadOffTimeoutMS:], h.timeoutMS)
	binary.NativeEndian.PutUint32(b[umadOffRetries:], h.retries)
	binary.NativeEndian.PutUint32(b[umadOffLength:], h.length)
	binary.BigEndian.PutUint32(b[umadOffQPN:], 0)
	binary.BigEndian.PutUint32(b[umadOffQKey:], 0)
	binary.BigEndian.PutUint16(b[umadOffLID:], h.lid)
	binary.NativeEndian.PutUint16(b[umadOffPKeyIndex:], 0)
}

func parseUmadHeader(b []byte) umadHeader {
	return umadHeader{
		agent:     binary.NativeEndian.Uint32(b[umadOffAgent:]),
		status:    binary.NativeEndian.Uint32(b[umadOffStatus:]),
		timeoutMS: binary.NativeEndian.Uint32(b[umadOffTimeoutMS:]),
		retries:   binary.NativeEndian.Uint32(b[umadOffRetries:]),
		length:    binary.NativeEndian.Uint32(b[umadOffLength:]),
		lid:       binary.BigEndian.Uint16(b[umadOffLID:]),
	}
}

// smpAgentRequest is the registration of an agent on QP0 for the LID-routed
// subnet management class. Its method mask is empty: the agent only sends
// requests, and answers reach it by their transaction id, not by method
// (so it takes nothing that OpenSM's own agents on the port receive).
func smpAgentRequest() []byte {
	req := make([]byte, umadRegReqSize)
	req[umadRegOffQPN] = 0
	req[umadRegOffClass] = classSubnLID
	req[umadRegOffClassVersion] = classVersion
	return req
}

// umadFile is what a connection uses of the opened device. *os.File is the
// kernel's (opened non-blocking by the runtime, so read deadlines work); the
// tests' fake kernel hands out one end of a socket pair.
type umadFile interface {
	Read(b []byte) (int, error)
	Write(b []byte) (int, error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// umadOps are the system calls behind a umad connection: a seam, so that a
// fake kernel can stand in for the device where there is no HCA.
type umadOps struct {
	open  func(path string) (umadFile, error)
	ioctl func(f umadFile, req uint, arg []byte) error
}

// kernelUmad opens the real device and issues real ioctls.
var kernelUmad = umadOps{
	open: func(path string) (umadFile, error) { return os.OpenFile(path, os.O_RDWR, 0) },
	ioctl: func(f umadFile, req uint, arg []byte) error {
		file, ok := f.(*os.File)
		if !ok {
			return fmt.Errorf("ioctl on %T, not a device file", f)
		}
		raw, err := file.SyscallConn()
		if err != nil {
			return err
		}
		var errno syscall.Errno
		err = raw.Control(func(fd uintptr) {
			if len(arg) == 0 {
				_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), 0)
				return
			}
			// The conversion in the call's arguments keeps arg alive and in
			// place until the system call returns (unsafe.Pointer's rule 4).
			_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(unsafe.Pointer(&arg[0])))
		})
		if err != nil {
			return err
		}
		if errno != 0 {
			return errno
		}
		return nil
	},
}

// umadDialer opens connections on one umad device.
type umadDialer struct {
	port string // "mlx5_0:1", for errors
	path string // /dev/infiniband/umadN
	ops  umadOps
}

// Dial opens the device and registers an SMP agent on it. The pkey_index
// header is enabled first: the kernel takes it only before any agent.
func (d umadDialer) Dial(ctx context.Context) (Conn, error) {
	f, err := d.ops.open(d.path)
	if err != nil {
		return nil, fmt.Errorf("HCA port %s: open %s (the manager needs read and write access to it): %w",
			d.port, d.path, err)
	}
	if err := d.ops.ioctl(f, umadIoctlEnablePKey, nil); err != nil {
		f.Close()
		return nil, fmt.Errorf("HCA port %s: %s: enable the pkey_index header: %w", d.port, d.path, err)
	}
	req := smpAgentRequest()
	if err := d.ops.ioctl(f, umadIoctlRegisterAgent, req); err != nil {
		f.Close()
		return nil, fmt.Errorf("HCA port %s: %s: register an SMP agent: %w", d.port, d.path, err)
	}
	c := &umadConn{file: f, ops: d.ops, agent: binary.NativeEndian.Uint32(req), port: d.port, mux: newMux()}
	go c.mux.run(c.next)
	return c, nil
}

// umadConn is one open umad file with one SMP agent. Its Sends may
// overlap: a reader goroutine (mux) hands each answer to the Send of its
// transaction id.
type umadConn struct {
	file  umadFile
	ops   umadOps
	agent uint32 // the kernel's id; 0 is a valid one
	port  string
	mux   *mux
}

// Concurrent says that Sends may overlap on the connection.
func (c *umadConn) Concurrent() bool { return true }

// Retries and the bounds of one attempt's wait that Send asks of the kernel.
// The kernel resends a request that was not answered in time itself (with
// the same transaction id): a lost datagram then costs one attempt's wait,
// not the port's whole deadline.
const (
	umadRetries    = 2
	umadMinTimeout = time.Millisecond
	umadMaxTimeout = time.Second
)

// umadWait is the timeout of each of a request's umadRetries+1 attempts,
// at most umadMaxTimeout: ctx's remaining time shared among them and one
// share more, so that the kernel's verdict (an answer, or ETIMEDOUT) comes
// before ctx's deadline and the error says that the port did not answer.
func umadWait(ctx context.Context) time.Duration {
	wait := umadMaxTimeout
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d)/(umadRetries+2))
	}
	return max(wait, umadMinTimeout)
}

// Send writes mad to lid and waits for the answer with its transaction id
// (the reader hands it over). Anything else read (an answer or a timeout of
// an earlier request that the caller gave up on) is dropped. A cancelled ctx
// ends the wait at once, not at its deadline. The kernel's own timeout
// ends as "no answer" with ETIMEDOUT, as on the simulated fabric.
func (c *umadConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil { // no request the caller will not wait for
		return nil, fmt.Errorf("not sent: %w", err)
	}
	wait := umadWait(ctx)
	msg := make([]byte, umadHeaderSize+MADSize)
	umadHeader{agent: c.agent, timeoutMS: uint32(wait / time.Millisecond), retries: umadRetries, lid: lid}.put(msg)
	copy(msg[umadHeaderSize:], mad)
	answer, err := c.mux.expect(mad)
	if err != nil {
		return nil, fmt.Errorf("send through HCA port %s: %w", c.port, err)
	}
	if _, err := c.file.Write(msg); err != nil {
		c.mux.forget(mad)
		return nil, fmt.Errorf("send through HCA port %s: %w", c.port, err)
	}
	// The kernel answers by (retries+1) × wait at the latest; the limit
	// past that is only against a kernel that never does.
	return c.mux.wait(ctx, mad, answer, (umadRetries+1)*wait+time.Second)
}

// next reads the next MAD the kernel hands this file: an answer to one of
// its agent's requests, or a request the kernel gave up on (its status
// ETIMEDOUT, its MAD header enough to match it).
func (c *umadConn) next() (muxAnswer, bool, error) {
	buf := make([]byte, umadHeaderSize+MADSize)
	n, err := c.file.Read(buf)
	if err != nil {
		return muxAnswer{}, false, err
	}
	if n < umadHeaderSize+umadTimeoutHeader {
		return muxAnswer{}, false, fmt.Errorf("HCA port %s: read %d bytes, less than a header and a MAD header", c.port, n)
	}
	h, answer := parseUmadHeader(buf), buf[umadHeaderSize:n]
	if h.agent != c.agent {
		return muxAnswer{}, false, nil
	}
	if h.status != 0 {
		return muxAnswer{mad: answer, err: fmt.Errorf("no answer: %w", syscall.Errno(h.status))}, true, nil
	}
	return muxAnswer{mad: answer}, true, nil
}

// Close unregisters the agent and closes the file (which would unregister
// it too: the ioctl only makes a failure visible).
func (c *umadConn) Close() error {
	id := make([]byte, 4)
	binary.NativeEndian.PutUint32(id, c.agent)
	var errs []error
	if err := c.ops.ioctl(c.file, umadIoctlUnregisterAgent, id); err != nil {
		errs = append(errs, fmt.Errorf("HCA port %s: unregister agent %d: %w", c.port, c.agent, err))
	}
	return errors.Join(append(errs, c.file.Close())...)
}
