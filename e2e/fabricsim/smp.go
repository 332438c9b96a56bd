package fabricsim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// smpClient reads P_Key tables with SMPs sent to ibsim over its own client
// protocol, on one connection kept open. smpquery does the same through
// libumad2sim, but each run builds and removes a fake sysfs tree and attaches
// to ibsim anew: about 150 ms and a process per table, where a read over an
// open connection is two datagrams. The soak reads tables thousands of times.
//
// ibsim's protocol (include/ibsim.h): a control socket that attaches the
// client to a node (SIM_CTL_CONNECT with the node's name) and a data socket on
// which each datagram is a sim_request, a 32-byte header and a 256-byte MAD,
// in the host's byte order except the LIDs (big-endian 16-bit values in the
// low-addressed bytes of a 32-bit field) and the length (big-endian 64-bit).
// Sockets are datagram sockets in the abstract namespace, named
// "<IBSIM_SOCKNAME>:ctl", ":out<client>" (ibsim's) and ":ctl<id>", ":in<id>"
// (the client's), each name with a trailing NUL as ibsim's own clients make
// them.
type smpClient struct {
	sock string // IBSIM_SOCKNAME
	node string // the node the client attaches to (SIM_HOST)

	mu     sync.Mutex // one transaction at a time
	ctl    *net.UnixConn
	data   *net.UnixConn // bound to ":in<id>", where ibsim sends the answers
	out    *net.UnixAddr // ibsim's socket for this client, ":out<client>"
	client uint32        // the id ibsim gave this client
	tid    uint32
}

// A connection's name suffix: unique within this process and, with the pid,
// among the processes attached to the simulator.
var smpConnections atomic.Uint32

const (
	simMagic      = 0xdeadbeef
	simCtlConnect = 1
	simCtlDiscon  = 2
	simCtlError   = 0
	simCtlSize    = 16 + 64 // magic, client id, type, length, data
	simReqHeader  = 32      // dlid, slid, dqp, sqp, status, padding, length
	madSize       = 256

	mgmtClassSubnLIDRouted = 0x01
	methodGet              = 0x01
	methodGetResp          = 0x81
	attrPKeyTable          = 0x0016
	madDataOffset          = 64 // where an SMP's attribute data begins
	pkeysPerBlock          = 32
	// ibsim gives HCA ports and switch ports 64-entry P_Key tables.
	pkeyBlocks = 2
)

func sockName(name string) *net.UnixAddr {
	return &net.UnixAddr{Name: "@" + name + "\x00", Net: "unixgram"}
}

// connect attaches a new client to the simulator at c.node.
func (c *smpClient) connect() error {
	id := uint32(os.Getpid())<<8 | smpConnections.Add(1)&0xff
	suffix := strconv.FormatUint(uint64(id), 10)
	ctl, err := net.DialUnix("unixgram", sockName(c.sock+":ctl"+suffix), sockName(c.sock+":ctl"))
	if err != nil {
		return fmt.Errorf("attach to the simulator: %w", err)
	}
	// ibsim connects its socket for this client to ":in<id>" on
	// SIM_CTL_CONNECT, so the name must be bound first.
	data, err := net.ListenUnixgram("unixgram", sockName(c.sock+":in"+suffix))
	if err != nil {
		ctl.Close()
		return fmt.Errorf("attach to the simulator: %w", err)
	}
	// sim_client_info: the connection's id, qp, issm, the node's name.
	info := make([]byte, 12+32)
	binary.NativeEndian.PutUint32(info[0:], id)
	copy(info[12:43], c.node)
	reply, err := control(ctl, 0, simCtlConnect, info)
	if err != nil {
		ctl.Close()
		data.Close()
		return fmt.Errorf("attach to the simulator at node %s: %w", c.node, err)
	}
	c.client = binary.NativeEndian.Uint32(reply[0:4])
	c.out = sockName(c.sock + ":out" + strconv.FormatUint(uint64(c.client), 10))
	c.ctl, c.data = ctl, data
	return nil
}

// control sends one control message and returns the answer's data.
func control(ctl *net.UnixConn, client, kind uint32, payload []byte) ([]byte, error) {
	msg := make([]byte, simCtlSize)
	binary.NativeEndian.PutUint32(msg[0:], simMagic)
	binary.NativeEndian.PutUint32(msg[4:], client)
	binary.NativeEndian.PutUint32(msg[8:], kind)
	binary.NativeEndian.PutUint32(msg[12:], uint32(len(payload)))
	copy(msg[16:], payload)
	if err := ctl.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
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

// detach ends the connection, if any, as the fabric stops.
func (c *smpClient) detach() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.close()
}

// close detaches the client; the next read attaches again. The caller holds
// c.mu.
func (c *smpClient) close() {
	if c.ctl == nil {
		return
	}
	control(c.ctl, c.client, simCtlDiscon, nil) //nolint:errcheck // ibsim may be gone
	c.ctl.Close()
	c.data.Close()
	c.ctl, c.data = nil, nil
}

// pkeys returns the non-zero entries of the P_Key table of a port: of the
// port at lid (port 0), or of port `port` of the switch at lid.
func (c *smpClient) pkeys(ctx context.Context, lid, port int) ([]uint16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []uint16
	for block := range pkeyBlocks {
		data, err := c.get(ctx, lid, attrPKeyTable, uint32(port)<<16|uint32(block))
		if err != nil {
			return nil, fmt.Errorf("P_Key table block %d of LID %d port %d: %w", block, lid, port, err)
		}
		for i := range pkeysPerBlock {
			if k := binary.BigEndian.Uint16(data[2*i:]); k != 0 {
				keys = append(keys, k)
			}
		}
	}
	return keys, nil
}

// get sends a LID-routed SubnGet and returns the answer's attribute data. A
// lost answer (a MAD dropped by the simulator's error injection, or a
// simulator restarted) fails the read and drops the connection.
func (c *smpClient) get(ctx context.Context, lid int, attr uint16, modifier uint32) ([]byte, error) {
	return c.transact(ctx, lid, methodGet, attr, modifier, nil)
}

// transact sends a LID-routed SMP of method (Get, or Set with data as the
// attribute's data) and returns the answer's attribute data.
func (c *smpClient) transact(ctx context.Context, lid int, method byte, attr uint16, modifier uint32, data []byte) ([]byte, error) {
	if c.ctl == nil {
		if err := c.connect(); err != nil {
			return nil, err
		}
	}
	c.tid++
	req := make([]byte, simReqHeader+madSize)
	binary.BigEndian.PutUint16(req[0:], uint16(lid)) // dlid; slid 0: ibsim fills it
	binary.BigEndian.PutUint64(req[24:], madSize)
	mad := req[simReqHeader:]
	mad[0], mad[1], mad[2], mad[3] = 1, mgmtClassSubnLIDRouted, 1, method
	binary.BigEndian.PutUint32(mad[12:], c.tid)
	binary.BigEndian.PutUint16(mad[16:], attr)
	binary.BigEndian.PutUint32(mad[20:], modifier)
	copy(mad[madDataOffset:], data)

	deadline := time.Now().Add(time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.data.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := c.data.WriteToUnix(req, c.out); err != nil {
		c.close()
		return nil, err
	}
	resp := make([]byte, simReqHeader+madSize)
	for {
		n, err := c.data.Read(resp)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("no answer: %w", err)
		}
		m := resp[simReqHeader:]
		if n != len(resp) || m[3] != methodGetResp || binary.BigEndian.Uint32(m[12:]) != c.tid {
			continue // an answer to an earlier, timed-out request
		}
		if status := binary.BigEndian.Uint16(m[4:]); status != 0 {
			return nil, fmt.Errorf("MAD status 0x%04x", status)
		}
		return m[madDataOffset : madDataOffset+64], nil
	}
}
