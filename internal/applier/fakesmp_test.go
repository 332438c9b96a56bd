package applier

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// fakeSMPFabric is a fake of the fabric's subnet management agents, for the
// second-SM look: each LID answers the LID-routed SubnGets the look sends
// (NodeInfo, PortInfo, SMInfo) as an HCA port does (IBA 14.2.5), with the
// port's GUID, its MasterSMLID and, where an SM has the port open, IsSM and
// that SM's SMInfo. A fake, not the simulator: ibsim ignores M_Keys, so on
// it a tenant's SM really takes the ports over, while on hardware our SM_Key
// and M_Keys keep it off them and it masters nothing; only a fake shows that
// case. M_Keys are not checked here either: the look's key handling is the
// simulator tests' (pkeyread).
type fakeSMPFabric struct {
	mu    sync.Mutex
	ports map[uint16]*fakeSMPPort
	// hang makes every LID but the ones in it answer nothing until the
	// sender's context ends (a look the term's end cuts short).
	hang map[uint16]bool
	// hung, when set, is told of each SMP that hang keeps unanswered.
	hung chan struct{}
	sent atomic.Int64 // the SMPs sent
	// answered, when set, is told of each SMP answered (the LID, the
	// attribute) after its answer is made: a change it makes comes after
	// the look read that port.
	answered func(lid, attr uint16)
	// held, when set, holds every answer until it is closed, whatever the
	// sender's context: the simulator's answers, which a cancelled read
	// still waits for (its Send ends at the context's deadline, not at its
	// cancellation), slowed down. holding is told of each SMP held, and
	// heldOver counts those that returned.
	held     chan struct{}
	holding  chan struct{}
	heldOver atomic.Int64
}

// fakeSMPPort is one port's management agent.
type fakeSMPPort struct {
	guid      fabric.GUID
	masterLID uint16           // PortInfo.MasterSMLID
	sm        *pkeyread.SMInfo // the SM behind the port; nil: none
	answersAs fabric.GUID      // NodeInfo's port GUID when another port took the LID; 0: guid
	protect   uint8            // PortInfo.M_KeyProtectBits: 2, the hardening's; 0, none (the simulator's)
	// smSilent: the SM behind the port answers no SMInfo until the
	// sender's context ends, as a tenant's OpenSM busy in its first sweep
	// on the simulated fabric (its PortInfo, the SMA's, still answers).
	smSilent bool
}

// The ports of copySubnetDump's fabric, by LID: this manager's OpenSM's
// port at LID 1, the hosts H1 to H5 at LIDs 3 to 7.
const (
	smpOwnLID    = 1
	smpTenantLID = 5 // H3, a tenant's host
	ownSMGUID    = fabric.GUID(0x0002c90300a00001)
	tenantGUID   = fabric.GUID(0x0002c90300000301)
)

// newFakeSMPFabric is copySubnetDump's fabric with this manager's OpenSM
// MASTER on its port and every port's MasterSMLID naming it, every port
// under M_Key protection (level 2, the hardening's).
func newFakeSMPFabric() *fakeSMPFabric {
	f := &fakeSMPFabric{ports: map[uint16]*fakeSMPPort{}}
	f.ports[smpOwnLID] = &fakeSMPPort{guid: ownSMGUID, masterLID: smpOwnLID, protect: 2,
		sm: &pkeyread.SMInfo{GUID: ownSMGUID, Priority: 1, State: pkeyread.SMMaster}}
	for i, g := range []fabric.GUID{0x0002c90300000101, 0x0002c90300000201, tenantGUID, 0x0002c90300000401, 0x0002c90300000501} {
		f.ports[uint16(3+i)] = &fakeSMPPort{guid: g, masterLID: smpOwnLID, protect: 2}
	}
	return f
}

// set changes the fabric under its lock.
func (f *fakeSMPFabric) set(change func(ports map[uint16]*fakeSMPPort)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.ports)
}

// tenantSM starts (state MASTER) or stops (nil) a tenant's SM on H3; over
// says whether it masters the hosts' ports (their MasterSMLID names it), as
// it does where nothing keeps it off them.
func (f *fakeSMPFabric) tenantSM(state *pkeyread.SMState, over bool) {
	f.set(func(ports map[uint16]*fakeSMPPort) {
		ports[smpTenantLID].sm = nil
		if state != nil {
			ports[smpTenantLID].sm = &pkeyread.SMInfo{GUID: tenantGUID, Priority: 0, State: *state}
		}
		for lid, p := range ports {
			if lid != smpOwnLID {
				p.masterLID = smpOwnLID
				if over {
					p.masterLID = smpTenantLID
				}
			}
		}
	})
}

func (f *fakeSMPFabric) Dial(context.Context) (pkeyread.Conn, error) { return f, nil }
func (f *fakeSMPFabric) Close() error                                { return nil }

// Send answers mad as the port at lid would; a LID that nothing answers (no
// port, or hang) times out with the context.
func (f *fakeSMPFabric) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	f.sent.Add(1)
	f.mu.Lock()
	p, ok := f.ports[lid]
	hang := f.hang != nil && !f.hang[lid]
	hung, answered, held, holding := f.hung, f.answered, f.held, f.holding
	var port fakeSMPPort
	if ok {
		port = *p
	}
	f.mu.Unlock()
	if held != nil {
		select {
		case holding <- struct{}{}:
		default:
		}
		<-held
		defer f.heldOver.Add(1)
	}
	if hang && hung != nil {
		select {
		case hung <- struct{}{}:
		default:
		}
	}
	if !ok || hang || port.smSilent && port.sm != nil && binary.BigEndian.Uint16(mad[16:]) == 0x0020 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	answer := append([]byte(nil), mad...)
	answer[3] = 0x81 // GetResp
	data := answer[64:128]
	clear(data)
	switch binary.BigEndian.Uint16(mad[16:]) {
	case 0x0011: // NodeInfo
		data[2], data[3] = 1, 1 // a CA of one port
		as := port.guid
		if port.answersAs != 0 {
			as = port.answersAs
		}
		binary.BigEndian.PutUint64(data[12:], uint64(as)&^0xff)
		binary.BigEndian.PutUint64(data[20:], uint64(as))
		binary.BigEndian.PutUint16(data[28:], 128)
	case 0x0015: // PortInfo
		binary.BigEndian.PutUint16(data[16:], lid)
		binary.BigEndian.PutUint16(data[18:], port.masterLID)
		capabilities := uint32(0x02510848)
		if port.sm != nil {
			capabilities |= 1 << 1 // IsSM
		}
		binary.BigEndian.PutUint32(data[20:], capabilities)
		data[34] = port.protect << 6
	case 0x0020: // SMInfo
		if port.sm == nil {
			binary.BigEndian.PutUint16(answer[4:], 3<<2) // method and attribute not supported
			break
		}
		binary.BigEndian.PutUint64(data[0:], uint64(port.sm.GUID))
		data[20] = port.sm.Priority<<4 | byte(port.sm.State)
	default:
		binary.BigEndian.PutUint16(answer[4:], 3<<2)
	}
	if answered != nil {
		answered(lid, binary.BigEndian.Uint16(mad[16:]))
	}
	return answer, nil
}

// unprotect takes the M_Key protection off every port, as the simulator
// reports it (it ignores M_Keys).
func (f *fakeSMPFabric) unprotect() {
	f.set(func(ports map[uint16]*fakeSMPPort) {
		for _, p := range ports {
			p.protect = 0
		}
	})
}

// remoteSMLines is what this manager's OpenSM logs in a heavy sweep of the
// fake's fabric: for each port behind which another SM runs (the fake's SMs
// other than its own carry another SM_Key, as a tenant's stock OpenSM
// does), the lines a real OpenSM logs when it asks that port's SMInfo
// (measured on the simulated fabric: ERR 2F18, then the SYS line, at every
// heavy sweep while that SM runs).
func (f *fakeSMPFabric) remoteSMLines() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, lid := range slices.Sorted(maps.Keys(f.ports)) {
		if p := f.ports[lid]; lid != smpOwnLID && p.sm != nil {
			path := fmt.Sprintf("0,1,%d", lid)
			b.WriteString(logLine(0x01, fmt.Sprintf("smi_rcv_process_get_response: ERR 2F18: Got SM (%s) with sm_key "+
				"0x0000000000000001 that doesn't match our local sm_key. Ignoring SMInfo", path)))
			b.WriteString(logLine(0x80, fmt.Sprintf("Found remote SM (%s) with non-matching sm_key", path)))
		}
	}
	return b.String()
}

// newWideFakeSMPFabric is the fake for largeDump(hosts, switches)'s fabric:
// H1's port (own, at LID switches+1) runs this manager's OpenSM, MASTER;
// every host port names it master and is under M_Key protection.
func newWideFakeSMPFabric(hosts, switches int) *fakeSMPFabric {
	f := &fakeSMPFabric{ports: map[uint16]*fakeSMPPort{}}
	own := uint16(switches + 1)
	for i := 1; i <= hosts; i++ {
		f.ports[uint16(switches+i)] = &fakeSMPPort{guid: hostPort(i), masterLID: own, protect: 2}
	}
	f.ports[own].sm = &pkeyread.SMInfo{GUID: hostPort(1), Priority: 1, State: pkeyread.SMMaster}
	return f
}
