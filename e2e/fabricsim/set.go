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
	return f.SetPKeyBlock(ctx, port, 0, keys)
}

// SetPKeyBlock is SetPKeys on block block (0 or 1: entries 32*block on) of
// the host port's table. OpenSM sends a Set only for the blocks its own copy
// says differ from what it wants: a block it never wrote keeps what was set
// into it while OpenSM programs the port's other block.
func (f *Fabric) SetPKeyBlock(ctx context.Context, port fabric.GUID, block int, keys []uint16) ([]uint16, error) {
	lid, err := f.LID(port)
	if err != nil {
		return nil, err
	}
	if block < 0 || block >= pkeyBlocks {
		return nil, fmt.Errorf("block %d: a host's table has %d", block, pkeyBlocks)
	}
	got, err := f.setBlock(ctx, lid, uint32(block), keys)
	if err != nil {
		return nil, fmt.Errorf("set P_Key table block %d of %s (LID %d): %w", block, port, lid, err)
	}
	return got, nil
}

// SetSwitchPKeys is SetPKeys on the switch port facing host (the SMP's
// attribute modifier names the switch port in its upper 16 bits): a switch
// port made to let another pkey through, as a second subnet manager would.
func (f *Fabric) SetSwitchPKeys(ctx context.Context, host fabric.GUID, keys []uint16) ([]uint16, error) {
	lid, port, err := f.switchPortFacing(host)
	if err != nil {
		return nil, err
	}
	got, err := f.setBlock(ctx, lid, uint32(port)<<16, keys)
	if err != nil {
		return nil, fmt.Errorf("set P_Key table block 0 of the switch port facing %s (LID %d port %d): %w", host, lid, port, err)
	}
	return got, nil
}

// setBlock sends the Set of a block, the attribute modifier naming it (and a
// switch's port).
func (f *Fabric) setBlock(ctx context.Context, lid int, modifier uint32, keys []uint16) ([]uint16, error) {
	if len(keys) > pkeysPerBlock {
		return nil, fmt.Errorf("%d keys: a block holds %d", len(keys), pkeysPerBlock)
	}
	data := make([]byte, 2*pkeysPerBlock)
	for i, k := range keys {
		binary.BigEndian.PutUint16(data[2*i:], k)
	}
	c := f.smpClient()
	c.mu.Lock()
	answer, err := c.transact(ctx, lid, methodSet, attrPKeyTable, modifier, data)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var got []uint16
	for i := range pkeysPerBlock {
		if k := binary.BigEndian.Uint16(answer[2*i:]); k != 0 {
			got = append(got, k)
		}
	}
	return got, nil
}
