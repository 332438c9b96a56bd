package pkeyread

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Which subnet manager is master, read from the fabric: the manager's OpenSM
// must be the only master, since a master programs every port's P_Key table
// with its own partitions. Two reads answer it, whatever the number of
// hosts: the local port's PortInfo names the master's LID (MasterSMLID,
// which the master writes into every port it sweeps), and SMInfo at that LID
// says which port that master is, its priority and its state. A master that
// took the subnet over from the manager's OpenSM (a higher priority) has
// rewritten MasterSMLID and made the manager's OpenSM STANDBY; both show.
//
// The own port's LID comes from OpenSM's subnet dump, checked by NodeInfo as
// the P_Key reads are: a master that re-LIDed it fails the read instead of
// naming another port's master.

// The attributes and fields of this file (IBA 14.2.5).
const (
	attrSMInfo     = 0x0020
	capabilityIsSM = 1 << 1 // PortInfo.CapabilityMask: an SM runs behind the port
)

// SMState is a subnet manager's state (SMInfo.SMState).
type SMState uint8

const (
	SMNotActive SMState = iota
	SMDiscovering
	SMStandby
	SMMaster
)

func (s SMState) String() string {
	switch s {
	case SMNotActive:
		return "NOTACTIVE"
	case SMDiscovering:
		return "DISCOVERING"
	case SMStandby:
		return "STANDBY"
	case SMMaster:
		return "MASTER"
	}
	return fmt.Sprintf("state %d", uint8(s))
}

// SMInfo is what a subnet manager says of itself (IBA 14.2.5.13).
type SMInfo struct {
	GUID     fabric.GUID // the port the SM runs on
	Priority uint8
	State    SMState
	LID      uint16 // where it was read
}

func parseSMInfo(data []byte, lid uint16) SMInfo {
	return SMInfo{
		GUID:     fabric.GUID(binary.BigEndian.Uint64(data[0:])),
		Priority: data[20] >> 4,
		State:    SMState(data[20] & 0x0f),
		LID:      lid,
	}
}

// Masters is one look at who is master, from the manager's OpenSM's port.
type Masters struct {
	Port      fabric.GUID // the manager's OpenSM's port
	OwnLID    uint16      // its LID now
	MasterLID uint16      // its MasterSMLID; 0: no master has swept it
	// Own is what the SM behind the own port says of itself; Master what
	// the SM at MasterLID says (Own again when MasterLID is OwnLID), zero
	// when MasterLID is 0 or nothing answers there: the master that last
	// swept the port is gone, and MasterSMLID is what it left.
	Own, Master SMInfo
	MasterErr   error // why Master is zero although MasterLID is not 0
}

// ReadMastersWithKeys is ReadMasters with each of mkeys in turn until one
// answers (a port under M_Key protection answers no Get with another key;
// during a rotation the ports move to the new key one sweep at a time); it
// returns the key that answered, for the SMPs that follow.
func ReadMastersWithKeys(ctx context.Context, conn Conn, mkeys []uint64, tid *atomic.Uint32, own fabric.GUID, lid uint16) (Masters, uint64, error) {
	if len(mkeys) == 0 {
		mkeys = []uint64{0}
	}
	var err error
	for _, k := range mkeys {
		var m Masters
		if m, err = ReadMasters(ctx, conn, k, tid, own, lid); err == nil {
			return m, k, nil
		}
	}
	return Masters{}, 0, err
}

// ReadMasters reads the PortInfo of own (the manager's OpenSM's port) at lid,
// once the LID answered as own, its SM's SMInfo, and the SMInfo of the master
// its MasterSMLID names when that is another port: up to five SMPs on conn,
// each carrying mkey, with transaction ids from tid. On a connection that
// takes overlapping Sends (Concurrent) the PortInfo and the SMInfo go out
// with the NodeInfo, and are used only once the NodeInfo proved the port,
// as the read-back's first table block is (worker.hostTable): the look
// before every change's jobs complete waits for one answer, not three.
func ReadMasters(ctx context.Context, conn Conn, mkey uint64, tid *atomic.Uint32, own fabric.GUID, lid uint16) (Masters, error) {
	m := Masters{Port: own, OwnLID: lid}
	get := func(lid uint16, attr uint16) ([]byte, error) { return smpGet(ctx, conn, mkey, tid, lid, attr) }
	portInfo, smInfo := func() ([]byte, error) { return get(lid, attrPortInfo) }, func() ([]byte, error) { return get(lid, attrSMInfo) }
	if Concurrent(conn) {
		actx, abort := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() { abort(); wg.Wait() }() // nothing sent ahead outlives the read
		portInfo = getAhead(actx, &wg, conn, mkey, tid, lid, attrPortInfo)
		smInfo = getAhead(actx, &wg, conn, mkey, tid, lid, attrSMInfo)
	}
	data, err := get(lid, attrNodeInfo)
	if err != nil {
		return m, fmt.Errorf("port %s at LID %d: NodeInfo: %w", own, lid, err)
	}
	if ni := parseNodeInfo(data); fabric.GUID(ni.portGUID) != own {
		return m, fmt.Errorf("port %s at LID %d: %w: the LID answers as port %s", own, lid, ErrMoved, fabric.GUID(ni.portGUID))
	}
	if data, err = portInfo(); err != nil {
		return m, fmt.Errorf("port %s at LID %d: PortInfo: %w", own, lid, err)
	}
	m.MasterLID = parsePortInfo(data).MasterSMLID
	if data, err = smInfo(); err != nil {
		return m, fmt.Errorf("SMInfo of port %s at LID %d: %w", own, lid, err)
	}
	m.Own = parseSMInfo(data, lid)
	switch m.MasterLID {
	case 0:
	case lid:
		m.Master = m.Own
	default:
		if data, err = get(m.MasterLID, attrSMInfo); err != nil {
			m.MasterErr = fmt.Errorf("SMInfo of the master at LID %d: %w", m.MasterLID, err)
		} else {
			m.Master = parseSMInfo(data, m.MasterLID)
		}
	}
	return m, nil
}

// getAhead sends attr's SubnGet to lid now (smpGet) and returns the wait
// for its answer; wg counts the Send until it returns.
func getAhead(ctx context.Context, wg *sync.WaitGroup, conn Conn, mkey uint64, tid *atomic.Uint32, lid, attr uint16) func() ([]byte, error) {
	type answer struct {
		data []byte
		err  error
	}
	got := make(chan answer, 1)
	wg.Go(func() {
		data, err := smpGet(ctx, conn, mkey, tid, lid, attr)
		got <- answer{data, err}
	})
	return func() ([]byte, error) {
		a := <-got
		return a.data, a.err
	}
}

// smpGet sends one LID-routed SubnGet of attr (modifier 0) and returns the
// answer's attribute data.
func smpGet(ctx context.Context, conn Conn, mkey uint64, tid *atomic.Uint32, lid uint16, attr uint16) ([]byte, error) {
	req := getSMP(attr, 0, mkey, tid.Add(1))
	answer, err := conn.Send(ctx, lid, req)
	if err != nil {
		return nil, err
	}
	return answerData(req, answer)
}

// PortLID is a port where OpenSM's last sweep put it.
type PortLID struct {
	Port fabric.GUID
	LID  uint16
}

// ReadSMs finds the subnet managers behind ports: each port's PortInfo says
// whether an SM runs behind it (IsSM in its CapabilityMask, which the HCA
// sets while an SM has it open), and that SM's SMInfo says which it is and
// its state. This finds a master that the own port's MasterSMLID does not
// name: one that does not share the own SM's SM_Key ignores it and sweeps
// the fabric as master beside it. One SMP a port and one an SM, each port
// within portTimeout (a port down answers nothing); unread counts the ports
// that did not answer, or whose SM did not.
func ReadSMs(ctx context.Context, conn Conn, mkey uint64, tid *atomic.Uint32, ports []PortLID,
	portTimeout time.Duration) (sms []SMInfo, unread int) {
	s := ScanSMs(ctx, conn, mkey, tid, ports, portTimeout)
	return s.SMs, s.Unread + len(s.SMUnread)
}

// SMScan is what ScanSMs read of the ports.
type SMScan struct {
	SMs    []SMInfo // the SMs behind the ports
	Unread int      // ports that did not answer
	// SMUnread are the ports whose PortInfo says an SM runs behind them
	// (IsSM) but whose SMInfo did not answer: which SM, in which state, is
	// unknown (an SM busy in its first sweep answers late), so no look
	// may take the port for one without a master.
	SMUnread []PortLID
	// MasterLIDs counts the ports that answered by the MasterSMLID each
	// names: the master that last swept (programmed) them. A master whose
	// LID no port names has programmed none of them.
	MasterLIDs map[uint16]int
	// Unprotected counts the ports that answered without M_Key protection
	// (M_KeyProtectBits 0): any SM may program them, whatever MasterSMLID
	// says (OpenSM does not always rewrite it).
	Unprotected int
}

// ScanSMs is ReadSMs, keeping what the PortInfo read says of each port's
// master as well (MasterSMLID), at no SMP more.
func ScanSMs(ctx context.Context, conn Conn, mkey uint64, tid *atomic.Uint32, ports []PortLID,
	portTimeout time.Duration) SMScan {
	s := SMScan{MasterLIDs: map[uint16]int{}}
	for i, p := range ports {
		if ctx.Err() != nil {
			s.Unread += len(ports) - i // never asked
			return s
		}
		sm, pi, err := readSM(ctx, conn, mkey, tid, p, portTimeout)
		switch {
		case err != nil && !pi.IsSM:
			s.Unread++
			continue
		case err != nil:
			s.SMUnread = append(s.SMUnread, p)
		case pi.IsSM:
			s.SMs = append(s.SMs, sm)
		}
		if pi.MasterSMLID != 0 {
			s.MasterLIDs[pi.MasterSMLID]++
		}
		if pi.MKeyProtect == 0 {
			s.Unprotected++
		}
	}
	return s
}

func readSM(ctx context.Context, conn Conn, mkey uint64, tid *atomic.Uint32, p PortLID,
	timeout time.Duration) (SMInfo, PortInfo, error) {
	if p.LID == 0 {
		return SMInfo{}, PortInfo{}, ErrNoLID
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	data, err := smpGet(ctx, conn, mkey, tid, p.LID, attrPortInfo)
	if err != nil {
		return SMInfo{}, PortInfo{}, err
	}
	pi := parsePortInfo(data)
	if !pi.IsSM {
		return SMInfo{}, pi, nil
	}
	if data, err = smpGet(ctx, conn, mkey, tid, p.LID, attrSMInfo); err != nil {
		return SMInfo{}, pi, err
	}
	return parseSMInfo(data, p.LID), pi, nil
}
