package pkeyread

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// SimDialer attaches to a simulated fabric (ibsim) the way libumad2sim does for
// the C tools, over ibsim's own client protocol (include/ibsim.h): a control
// socket that attaches the client to a node (SIM_CTL_CONNECT with the node's
// name) and a data socket on which each datagram is a sim_request, a 32-byte
// header and a 256-byte MAD, in the host's byte order except the LIDs
// (big-endian 16-bit values in the low-addressed bytes of a 32-bit field) and
// the length (big-endian 64-bit). Sockets are datagram sockets in the
// abstract namespace, named "<socket>:ctl", ":out<client>" (ibsim's) and
// ":ctl<id>", ":in<id>" (the client's), each name with a trailing NUL as
// ibsim's own clients make them.
//
// ibsim serves at most ten clients at once, OpenSM included: keep a Reader's
// workers well under that.
type SimDialer struct {
	Socket string // ibsim's socket name (IBSIM_SOCKNAME)
	Node   string // the HCA the client attaches to (SIM_HOST), the SM's
}

// SimDialerFromEnv is the dialer of the simulated fabric an exec environment
// (KEY=VALUE lines, the one OpenSM runs with) attaches to; ok is false when
// the environment names none.
func SimDialerFromEnv(env []string) (d SimDialer, ok bool) {
	for _, line := range env {
		if v, found := strings.CutPrefix(line, "IBSIM_SOCKNAME="); found {
			d.Socket = v
		}
		if v, found := strings.CutPrefix(line, "SIM_HOST="); found {
			d.Node = v
		}
	}
	return d, d.Socket != "" && d.Node != ""
}

const (
	simMagic      = 0xdeadbeef
	simCtlConnect = 1
	simCtlDiscon  = 2
	simCtlError   = 0
	simCtlSize    = 16 + 64 // magic, client id, type, length, data
	simReqHeader  = 32      // dlid, slid, dqp, sqp, status, padding, length
	simNodeName   = 32      // bytes of sim_client_info's node name
)

// A connection's name suffix: unique within this process and, with the pid,
// among the processes attached to the simulator.
var simConnections atomic.Uint32

func simSocket(name string) *net.UnixAddr {
	return &net.UnixAddr{Name: "@" + name + "\x00", Net: "unixgram"}
}

// Dial attaches a new client to the simulator at d.Node.
func (d SimDialer) Dial(ctx context.Context) (Conn, error) {
	if len(d.Node) >= simNodeName {
		return nil, fmt.Errorf("simulated node name %q: longer than %d bytes", d.Node, simNodeName-1)
	}
	id := uint32(os.Getpid())<<8 | simConnections.Add(1)&0xff
	suffix := strconv.FormatUint(uint64(id), 10)
	ctl, err := net.DialUnix("unixgram", simSocket(d.Socket+":ctl"+suffix), simSocket(d.Socket+":ctl"))
	if err != nil {
		return nil, fmt.Errorf("attach to the simulator: %w", err)
	}
	// ibsim connects its socket for this client to ":in<id>" on
	// SIM_CTL_CONNECT, so the name must be bound first.
	data, err := net.ListenUnixgram("unixgram", simSocket(d.Socket+":in"+suffix))
	if err != nil {
		ctl.Close()
		return nil, fmt.Errorf("attach to the simulator: %w", err)
	}
	// sim_client_info: the connection's id, qp, issm, the node's name.
	info := make([]byte, 12+simNodeName)
	binary.NativeEndian.PutUint32(info[0:], id)
	copy(info[12:], d.Node)
	reply, err := simControl(ctx, ctl, 0, simCtlConnect, info)
	if err != nil {
		ctl.Close()
		data.Close()
		return nil, fmt.Errorf("attach to the simulator at node %s: %w", d.Node, err)
	}
	client := binary.NativeEndian.Uint32(reply[0:4])
	out := simSocket(d.Socket + ":out" + strconv.FormatUint(uint64(client), 10))
	return newSimConn(ctl, data, out, client), nil
}

// simControl sends one control message and returns the answer's data.
func simControl(ctx context.Context, ctl *net.UnixConn, client, kind uint32, payload []byte) ([]byte, error) {
	msg := simControlMessage(client, kind, payload)
	if err := ctl.SetDeadline(deadline(ctx, 5*time.Second)); err != nil {
		return nil, err
	}
	if _, err := ctl.Write(msg); err != nil {
		return nil, err
	}
	n, err := ctl.Read(msg)
	if err != nil {
		return nil, err
	}
	if n != simCtlSize || binary.NativeEndian.Uint32(msg[8:]) == simCtlError {
		return nil, errors.New("the simulator refused the control message")
	}
	return msg[16:], nil
}

// simControlMessage is a sim_ctl: magic, client id, type, length, data.
func simControlMessage(client, kind uint32, payload []byte) []byte {
	msg := make([]byte, simCtlSize)
	binary.NativeEndian.PutUint32(msg[0:], simMagic)
	binary.NativeEndian.PutUint32(msg[4:], client)
	binary.NativeEndian.PutUint32(msg[8:], kind)
	binary.NativeEndian.PutUint32(msg[12:], uint32(len(payload)))
	copy(msg[16:], payload)
	return msg
}

// deadline is ctx's deadline, or at most limit from now.
func deadline(ctx context.Context, limit time.Duration) time.Time {
	d := time.Now().Add(limit)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// simConn is one client attached to the simulator. Its Sends may overlap:
// a reader goroutine (mux) hands each answer to the Send of its transaction
// id.
type simConn struct {
	ctl    *net.UnixConn
	data   *net.UnixConn // bound to ":in<id>", where ibsim sends the answers
	out    *net.UnixAddr // ibsim's socket for this client, ":out<client>"
	client uint32        // the id ibsim gave this client
	mux    *mux
}

func newSimConn(ctl, data *net.UnixConn, out *net.UnixAddr, client uint32) *simConn {
	c := &simConn{ctl: ctl, data: data, out: out, client: client, mux: newMux()}
	go c.mux.run(c.next)
	return c
}

// Concurrent says that Sends may overlap on the connection.
func (c *simConn) Concurrent() bool { return true }

// next reads the next datagram ibsim sends this client.
func (c *simConn) next() (muxAnswer, bool, error) {
	resp := make([]byte, simReqHeader+MADSize)
	n, err := c.data.Read(resp)
	if err != nil {
		return muxAnswer{}, false, err
	}
	if n != simReqHeader+MADSize {
		return muxAnswer{}, false, nil
	}
	// A MAD ibsim could not deliver (no port at the LID, a link down,
	// a drop by error injection) comes back as it was sent, with the
	// errno a umad send would end with in the header (ETIMEDOUT).
	if status := binary.BigEndian.Uint32(resp[16:]); status != 0 {
		return muxAnswer{mad: resp[simReqHeader:], err: fmt.Errorf("no answer: %w", syscall.Errno(status))}, true, nil
	}
	return muxAnswer{mad: resp[simReqHeader:]}, true, nil
}

// Send sends mad to lid (PermissiveLID: a directed-route SMP). The simulator drops the MADs its error injection
// asks it to, and answers nothing for a LID no port has: both end at ctx's
// deadline (at most a second: ibsim answers at once or never).
func (c *simConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	req := make([]byte, simReqHeader+MADSize)
	binary.BigEndian.PutUint16(req[0:], lid) // dlid; slid 0: ibsim fills it
	if lid == PermissiveLID {
		// A directed-route SMP: ibsim routes it by its path, and its
		// answer back by the slid, which must be permissive too (as
		// libumad2sim sends it).
		binary.BigEndian.PutUint16(req[4:], PermissiveLID)
	}
	binary.BigEndian.PutUint64(req[24:], MADSize)
	copy(req[simReqHeader:], mad)
	answer, err := c.mux.expect(mad)
	if err != nil {
		return nil, fmt.Errorf("send to the simulator: %w", err)
	}
	if err := c.data.SetWriteDeadline(deadline(ctx, time.Second)); err != nil {
		c.mux.forget(mad)
		return nil, err
	}
	if _, err := c.data.WriteToUnix(req, c.out); err != nil {
		c.mux.forget(mad)
		return nil, fmt.Errorf("send to the simulator: %w", err)
	}
	return c.mux.wait(ctx, mad, answer, time.Second)
}

// Close detaches the client: the detach is sent before Close returns, and
// its answer is waited for off the caller's path, by a goroutine that then
// closes the sockets (a change's read-back waited one more round trip
// through the simulator for it). The simulator has the detach in its queue
// before Close returns, so it frees the client's place even if this
// process dies at once, and handles it before any later attach of this
// process (it reads its control socket's datagrams in order). An answer
// sent to a socket closed meanwhile costs the simulator a warning only.
func (c *simConn) Close() error {
	msg := simControlMessage(c.client, simCtlDiscon, nil)
	if err := c.ctl.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return errors.Join(err, c.ctl.Close(), c.data.Close())
	}
	if _, err := c.ctl.Write(msg); err != nil {
		return errors.Join(fmt.Errorf("detach from the simulator: %w", err), c.ctl.Close(), c.data.Close())
	}
	go func() {
		c.ctl.Read(msg) //nolint:errcheck // the answer says nothing more: the detach is sent
		c.ctl.Close()
		c.data.Close()
	}()
	return nil
}
