package pkeyread

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// attrPortInfo is PortInfo's attribute id (IBA 14.2.5.6).
const attrPortInfo = 0x0015

// PortInfo is what the manager uses of a port's PortInfo: where the master
// subnet manager is, whether one runs behind the port, and, on a switch's
// external port, whether the switch
// enforces partitions there.
type PortInfo struct {
	LID         uint16
	MasterSMLID uint16
	// IsSM: CapabilityMask's IsSM bit, a subnet manager runs behind the port.
	IsSM bool
	// MKeyProtect is M_KeyProtectBits (bits 272-273): 0, no M_Key protection,
	// any SM may Set the port's attributes; 1 and up, a Set without the
	// port's M_Key fails. A simulator that ignores M_Keys says 0.
	MKeyProtect uint8
	// The partition enforcement and raw-packet filter bits (IBA 14.2.5.6,
	// bits 348-351): a switch port with PartitionEnforcementInbound off lets
	// the host behind it send with any pkey.
	EnforceInbound, EnforceOutbound     bool
	FilterRawInbound, FilterRawOutbound bool
}

// Enforcing says whether the switch port checks pkeys in both directions.
func (p PortInfo) Enforcing() bool { return p.EnforceInbound && p.EnforceOutbound }

// parsePortInfo reads PortInfo's attribute data: the LID at bit 128, the
// master SM's LID at bit 144, the CapabilityMask at bit 160, and OperationalVLs (4 bits) followed by the four
// enforcement bits in byte 43.
func parsePortInfo(data []byte) PortInfo {
	b := data[43]
	return PortInfo{
		LID:               binary.BigEndian.Uint16(data[16:]),
		MasterSMLID:       binary.BigEndian.Uint16(data[18:]),
		IsSM:              binary.BigEndian.Uint32(data[20:])&capabilityIsSM != 0,
		MKeyProtect:       data[34] >> 6,
		EnforceInbound:    b&0x08 != 0,
		EnforceOutbound:   b&0x04 != 0,
		FilterRawInbound:  b&0x02 != 0,
		FilterRawOutbound: b&0x01 != 0,
	}
}

// PortInfoResult is one PortInfo read: of a switch's external port, or of a
// host port (Switch.Port 0, Switch.GUID the port's GUID).
type PortInfoResult struct {
	Port SwitchPort
	Info PortInfo
	Err  error
}

// ReadPortInfo reads the PortInfo of each port in ports, one after the other
// on one connection, each within the Reader's PortTimeout. A switch's
// external port is addressed by the switch's LID and the port's number; a
// host port by its own LID and port 0. The node at the LID must answer as
// the GUID given, as for a table read.
func (r *Reader) ReadPortInfo(ctx context.Context, ports []SwitchPort) []PortInfoResult {
	results := make([]PortInfoResult, len(ports))
	w := worker{r: r, wire: make(chan struct{}, 1)} // one port, one SMP at a time
	defer w.close()
	for i, p := range ports {
		results[i] = PortInfoResult{Port: p}
		results[i].Info, results[i].Err = w.portInfo(ctx, p)
	}
	return results
}

// portInfo reads p's PortInfo once the node at its LID answered as p.GUID.
func (w *worker) portInfo(ctx context.Context, p SwitchPort) (PortInfo, error) {
	where := fmt.Sprintf("node %s port %d at LID %d", p.GUID, p.Port, p.LID)
	if err := ctx.Err(); err != nil {
		return PortInfo{}, fmt.Errorf("%s not read: %w", where, err)
	}
	if p.LID == 0 {
		return PortInfo{}, fmt.Errorf("%s not read: %w", where, ErrNoLID)
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(w.r.PortTimeout, DefaultPortTimeout))
	defer cancel()
	defer w.endWindow()
	info, err := w.portInfoAt(ctx, p)
	if err != nil {
		w.close() // a lost answer may leave a late one behind
		return PortInfo{}, fmt.Errorf("%s: %w", where, err)
	}
	return info, nil
}

func (w *worker) portInfoAt(ctx context.Context, p SwitchPort) (PortInfo, error) {
	if err := w.open(ctx); err != nil {
		return PortInfo{}, err
	}
	at := via{lid: p.LID, path: p.Path}
	data, err := w.get(ctx, &at, attrNodeInfo, 0)
	if err != nil {
		return PortInfo{}, fmt.Errorf("NodeInfo: %w", err)
	}
	ni := parseNodeInfo(data)
	if got := answeringAs(ni, p.Port); got != p.GUID {
		return PortInfo{}, fmt.Errorf("%w: the %s answers as %s", ErrMoved, at.String(), got)
	}
	data, err = w.get(ctx, &at, attrPortInfo, uint32(p.Port))
	if err != nil {
		return PortInfo{}, fmt.Errorf("PortInfo: %w", err)
	}
	return parsePortInfo(data), nil
}

// answeringAs is the GUID a NodeInfo names for a PortInfo read: a switch's
// node GUID for its external ports, a host's port GUID for port 0.
func answeringAs(ni nodeInfo, port int) fabric.GUID {
	if port != 0 || ni.nodeType == nodeSwitch {
		return fabric.GUID(ni.nodeGUID)
	}
	return fabric.GUID(ni.portGUID)
}
