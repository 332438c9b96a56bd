package pkeyread_test

import (
	"sync"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// TestSimConnOverlap: Sends that overlap on one simulator client (as a
// port's read sends its SMPs) each get the answer to their own MAD, by its
// transaction id, however the simulator orders the answers: one NodeInfo to
// every host's LID at once, each answered by that host's port.
func TestSimConnOverlap(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	tg := targets(t, f)
	conn, err := simReader(t, f).Dialer.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if c, ok := conn.(interface{ Concurrent() bool }); !ok || !c.Concurrent() {
		t.Fatalf("%T does not take overlapping Sends", conn)
	}
	for round := range 20 {
		var wg sync.WaitGroup
		for i, x := range tg {
			wg.Go(func() {
				req := pkeyread.NodeInfoSMP(uint32(1000*round + i + 1))
				answer, err := conn.Send(t.Context(), x.LID, req)
				if err != nil {
					t.Errorf("round %d: %s at LID %d: %v", round, x.Port, x.LID, err)
					return
				}
				if guid, err := pkeyread.AnsweredPortGUID(req, answer); err != nil || fabric.GUID(guid) != x.Port {
					t.Errorf("round %d: LID %d answered as %s (%v), want %s", round, x.LID, fabric.GUID(guid), err, x.Port)
				}
			})
		}
		wg.Wait()
	}
}

// TestSimCloseFreesPlace: a closed client's place is free for the next
// attach at once, though Close does not wait for the simulator's answer to
// the detach: three times the simulator's ten places attached and closed
// one after another, each answering.
func TestSimCloseFreesPlace(t *testing.T) {
	f := sweptFabric(t, 2, 1)
	tg := targets(t, f)
	d := simReader(t, f).Dialer
	for i := range 30 {
		conn, err := d.Dial(t.Context())
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		req := pkeyread.NodeInfoSMP(uint32(i + 1))
		if _, err := conn.Send(t.Context(), tg[0].LID, req); err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		if err := conn.Close(); err != nil {
			t.Fatalf("detach %d: %v", i, err)
		}
	}
}
