package pkeyread

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// ownPortAnswers are the answers of the manager's OpenSM's port at LID 1,
// its port GUID answering as answersAs: its NodeInfo, its PortInfo naming
// its own SM master, and that SM's SMInfo (MASTER).
func ownPortAnswers(answersAs fabric.GUID) map[smpKey][]byte {
	ni, pi, sm := make([]byte, smpDataSize), make([]byte, smpDataSize), make([]byte, smpDataSize)
	ni[2] = 1 // a channel adapter
	binary.BigEndian.PutUint64(ni[20:], uint64(answersAs))
	binary.BigEndian.PutUint16(pi[16:], 1)
	binary.BigEndian.PutUint16(pi[18:], 1) // MasterSMLID: itself
	binary.BigEndian.PutUint64(sm[0:], uint64(ownSMPort))
	sm[20] = 1<<4 | byte(SMMaster)
	return map[smpKey][]byte{{1, attrNodeInfo, 0}: ni, {1, attrPortInfo, 0}: pi, {1, attrSMInfo, 0}: sm}
}

const ownSMPort = fabric.GUID(0x0002c90300a00001)

// TestReadMastersOverlapsItsSMPs: on a connection that takes overlapping
// Sends, the look at who is master (before every change's jobs complete)
// sends the own port's PortInfo and SMInfo with its NodeInfo, one answer's
// wait rather than three one after another, and uses them only once the
// NodeInfo, answered last here, proved the port: a LID that answers as
// another port is refused whatever the others said.
func TestReadMastersOverlapsItsSMPs(t *testing.T) {
	phase := [][]smpKey{{{1, attrNodeInfo, 0}, {1, attrPortInfo, 0}, {1, attrSMInfo, 0}}}
	for _, tc := range []struct {
		name      string
		answersAs fabric.GUID
		moved     bool
	}{
		{"the own port", ownSMPort, false},
		{"another port at its LID", 0x0002c90300000101, true},
	} {
		ans := ownPortAnswers(tc.answersAs)
		// NodeInfo is answered last (gateFabric's order).
		g := &gateFabric{answers: ans, phases: phase}
		var tid atomic.Uint32
		// The bound ends a read that waits for an answer the fabric holds
		// back until the others are sent (the test's failure, not a figure).
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		m, err := ReadMasters(ctx, g, 0, &tid, ownSMPort, 1)
		cancel()
		switch {
		case tc.moved && !errors.Is(err, ErrMoved):
			t.Errorf("%s: ReadMasters = %+v, %v; want ErrMoved", tc.name, m, err)
		case !tc.moved && err != nil:
			t.Errorf("%s: ReadMasters: %v (the SMPs sent at once: %d, answered %v); want the three sent together",
				tc.name, err, g.most, g.answered)
		case !tc.moved && (m.MasterLID != 1 || m.Own.GUID != ownSMPort || m.Master.State != SMMaster):
			t.Errorf("%s: ReadMasters = %+v; want its own SM master", tc.name, m)
		}
	}
}
