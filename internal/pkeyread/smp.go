package pkeyread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// MADSize is the size of every management datagram, request and answer.
const MADSize = 256

// The fields of a LID-routed SMP this package uses (IBA 13.4.3, 14.2.1.1).
const (
	baseVersion    = 1
	classSubnLID   = 0x01 // subnet management, LID-routed
	classVersion   = 1
	methodGet      = 0x01
	methodGetResp  = 0x81
	offStatus      = 4
	offTID         = 8
	offAttrID      = 16
	offModifier    = 20
	offMKey        = 24
	offData        = 64 // an SMP's attribute data, 64 bytes
	smpDataSize    = 64
	attrNodeInfo   = 0x0011
	attrSwitchInfo = 0x0012
	attrPKeyTable  = 0x0016
	pkeysPerBlock  = 32
)

// The fields of a directed-route SMP (IBA 14.2.2): the hop pointer and
// count in the header's second word, the directed-route LIDs, and the path
// out (InitialPath) after the attribute data. Both LIDs permissive: the
// route is directed from the sender's port to the port it ends at.
const (
	classSubnDR    = 0x81 // subnet management, directed route
	offHopPointer  = 6
	offHopCount    = 7
	offDrSLID      = 32
	offDrDLID      = 34
	offInitialPath = 128
	maxDRHops      = 63 // InitialPath's 64 bytes; byte 0 is no hop
	// PermissiveLID is the destination LID of a directed-route SMP: the
	// transport sends it by its path, not by a LID.
	PermissiveLID = 0xffff
)

// DRPath is a directed route from the manager's port (topology.Route): the
// port each node on the way sends an SMP out of, one byte a hop. The zero
// DRPath is none known.
type DRPath struct {
	hops  string
	known bool
}

// NewDRPath is the directed route of hops (topology.Route's form); none
// when it has more hops than an SMP's InitialPath holds (63).
func NewDRPath(hops string) DRPath {
	return DRPath{hops: hops, known: len(hops) <= maxDRHops}
}

// Known says whether p is a route (the empty route, the manager's own port,
// is one).
func (p DRPath) Known() bool { return p.known }

// String is the route as infiniband-diags' tools take one (smpquery -D).
func (p DRPath) String() string {
	if !p.known {
		return "none"
	}
	b := []byte{'0'}
	for _, h := range []byte(p.hops) {
		b = strconv.AppendUint(append(b, ','), uint64(h), 10)
	}
	return string(b)
}

// getDRSMP is getSMP sent by the directed route path: hop pointer 0, the
// hop count, InitialPath[1..] the path (byte 0 is no hop), both
// directed-route LIDs permissive.
func getDRSMP(attr uint16, modifier uint32, mkey uint64, tid uint32, path DRPath) []byte {
	mad := getSMP(attr, modifier, mkey, tid)
	mad[1] = classSubnDR
	mad[offHopPointer], mad[offHopCount] = 0, byte(len(path.hops))
	binary.BigEndian.PutUint16(mad[offDrSLID:], PermissiveLID)
	binary.BigEndian.PutUint16(mad[offDrDLID:], PermissiveLID)
	copy(mad[offInitialPath+1:], path.hops)
	return mad
}

// getSMP is a LID-routed SubnGet of attribute attr with modifier, carrying
// the M_Key mkey (0 where none is set) and the transaction id tid.
func getSMP(attr uint16, modifier uint32, mkey uint64, tid uint32) []byte {
	mad := make([]byte, MADSize)
	mad[0], mad[1], mad[2], mad[3] = baseVersion, classSubnLID, classVersion, methodGet
	binary.BigEndian.PutUint32(mad[offTID+4:], tid)
	binary.BigEndian.PutUint16(mad[offAttrID:], attr)
	binary.BigEndian.PutUint32(mad[offModifier:], modifier)
	binary.BigEndian.PutUint64(mad[offMKey:], mkey)
	return mad
}

// sameTID says whether answer carries request's transaction id. Only the low
// 32 bits are the sender's: the transport may use the high ones (the kernel
// puts its agent's id there, ibsim its client's).
func sameTID(request, answer []byte) bool {
	return string(answer[offTID+4:offTID+8]) == string(request[offTID+4:offTID+8])
}

// errMADStatus is the error of an answer whose status is not success.
var errMADStatus = errors.New("MAD status")

// answerData checks that answer is the GetResp to request and returns its
// attribute data.
func answerData(request, answer []byte) ([]byte, error) {
	if len(answer) != MADSize {
		return nil, fmt.Errorf("answer of %d bytes, want %d", len(answer), MADSize)
	}
	switch {
	case answer[1] != request[1] || answer[3] != methodGetResp:
		return nil, fmt.Errorf("answer of class 0x%02x method 0x%02x, want a SubnGetResp of class 0x%02x",
			answer[1], answer[3], request[1])
	case !sameTID(request, answer):
		return nil, errors.New("answer to another transaction")
	case string(answer[offAttrID:offAttrID+2]) != string(request[offAttrID:offAttrID+2]) ||
		string(answer[offModifier:offModifier+4]) != string(request[offModifier:offModifier+4]):
		return nil, errors.New("answer for another attribute")
	}
	// The high bit is a directed-route answer's D (direction) bit.
	if status := binary.BigEndian.Uint16(answer[offStatus:]); status&0x7fff != 0 {
		return nil, fmt.Errorf("%w 0x%04x: %s", errMADStatus, status, statusText(status))
	}
	return answer[offData : offData+smpDataSize], nil
}

// statusText says what a MAD status means (IBA 13.4.7): busy, redirect, or
// the invalid-field code in bits 2-4.
func statusText(status uint16) string {
	switch {
	case status&0x1 != 0:
		return "busy"
	case status&0x2 != 0:
		return "redirect required"
	}
	switch (status >> 2) & 0x7 {
	case 1:
		return "bad version"
	case 2:
		return "method not supported"
	case 3:
		return "method and attribute not supported"
	case 7:
		return "invalid attribute or modifier (for an M_Key-protected port: a wrong M_Key is answered so, or not at all)"
	}
	return "unknown status"
}

// Node types of NodeInfo.
const (
	nodeCA     = 1
	nodeSwitch = 2
)

// nodeInfo is what this package uses of a NodeInfo (IBA 14.2.5.3).
type nodeInfo struct {
	nodeType     uint8
	ports        uint8
	nodeGUID     uint64
	portGUID     uint64 // of the port that answered (a switch's: port 0's)
	partitionCap uint16 // entries of the P_Key table of that port
}

func parseNodeInfo(data []byte) nodeInfo {
	return nodeInfo{
		nodeType:     data[2],
		ports:        data[3],
		nodeGUID:     binary.BigEndian.Uint64(data[12:]),
		portGUID:     binary.BigEndian.Uint64(data[20:]),
		partitionCap: binary.BigEndian.Uint16(data[28:]),
	}
}

// switchPartitionCap is SwitchInfo's PartitionEnforcementCap (IBA 14.2.5.4):
// the entries of each external port's P_Key table.
func switchPartitionCap(data []byte) uint16 { return binary.BigEndian.Uint16(data[14:]) }

// pkeyModifier is P_KeyTable's attribute modifier: the block, and for a
// switch the port (bits 16-31); 0 for an HCA's port.
func pkeyModifier(port int, block int) uint32 { return uint32(port)<<16 | uint32(block) }

// appendPKeys appends a P_KeyTable block's non-zero entries to keys.
func appendPKeys(keys Table, data []byte) Table {
	for i := range pkeysPerBlock {
		if k := binary.BigEndian.Uint16(data[2*i:]); k != 0 {
			keys = append(keys, k)
		}
	}
	return keys
}
