package pkeyread

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
)

// What another subnet manager sends an SM (IBA 14.4.1): a SubnGet of its
// SMInfo carrying the sender's own SMInfo, and SubnSets of SMInfo whose
// attribute modifier asks it to change state. The manager sends none of
// these: its tests send them from a host port, as a tenant with its HCA's
// umad device could, to show what OpenSM answers a host posing as an SM.

// The SubnSet(SMInfo) attribute modifiers (IBA 14.2.5.13).
const (
	SMInfoHandover    uint32 = 1
	SMInfoAcknowledge uint32 = 2
	SMInfoDisable     uint32 = 3
	SMInfoStandby     uint32 = 4
	SMInfoDiscover    uint32 = 5
)

const methodSet = 0x02 // SubnSet; its answer is a GetResp

// SMInfoRequest is one SMInfo SMP to an SM: a SubnGet, or a SubnSet with
// Modifier, carrying MKey and the sender's SMInfo (Sender, with SMKey as its
// SM_Key).
type SMInfoRequest struct {
	Set      bool
	Modifier uint32
	MKey     uint64
	Sender   SMInfo
	SMKey    uint64
}

// SendSMInfo sends r to the SM at lid and returns the SMInfo it answered
// with the SM_Key that answer carried.
func SendSMInfo(ctx context.Context, conn Conn, tid *atomic.Uint32, lid uint16, r SMInfoRequest) (SMInfo, uint64, error) {
	req := getSMP(attrSMInfo, r.Modifier, r.MKey, tid.Add(1))
	if r.Set {
		req[3] = methodSet
	}
	data := req[offData:]
	binary.BigEndian.PutUint64(data[0:], uint64(r.Sender.GUID))
	binary.BigEndian.PutUint64(data[8:], r.SMKey)
	data[20] = r.Sender.Priority<<4 | byte(r.Sender.State)&0x0f
	answer, err := conn.Send(ctx, lid, req)
	if err != nil {
		return SMInfo{}, 0, fmt.Errorf("SMInfo to LID %d: %w", lid, err)
	}
	got, err := answerData(req, answer)
	if err != nil {
		return SMInfo{}, 0, fmt.Errorf("SMInfo to LID %d: %w", lid, err)
	}
	return parseSMInfo(got, lid), binary.BigEndian.Uint64(got[8:]), nil
}
