package fabricsim

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// methodSet is SubnSet; its answer is a GetResp.
const methodSet = 0x02

// SetPKeys writes keys (at most 32 entries, 0x8000 set: full member) into
// block 0 of a host port's P_Key table with an SMP Set, as a rogue agent or a
// second subnet manager would: the simulator does not check the M_Key, and
// OpenSM is not told. The rest of the block is zeroed. It returns the table
// as the port answered it.
func (f *Fabric) SetPKeys(ctx context.Context, port fabric.GUID, keys []uint16) ([]uint16, error) {
	if len(keys) > pkeysPerBlock {
		return nil, fmt.Errorf("%d keys: a block holds %d", len(keys), pkeysPerBlock)
	}
	lid, err := f.LID(port)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 2*pkeysPerBlock)
	for i, k := range keys {
		binary.BigEndian.PutUint16(data[2*i:], k)
	}
	c := f.smpClient()
	c.mu.Lock()
	answer, err := c.transact(ctx, lid, methodSet, attrPKeyTable, 0, data)
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("set P_Key table block 0 of %s (LID %d): %w", port, lid, err)
	}
	var got []uint16
	for i := range pkeysPerBlock {
		if k := binary.BigEndian.Uint16(answer[2*i:]); k != 0 {
			got = append(got, k)
		}
	}
	return got, nil
}
