package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// BenchmarkReadSnapshotAfterAChange is the applier's read of the recorded
// state after one port change (the change's apply, its prepare step), on a
// fabric of 30 bound ports, on each engine: the term's cache holds the state
// before the change. Each iteration records the change outside the timer.
func BenchmarkReadSnapshotAfterAChange(b *testing.B) {
	const ports = 30
	for _, engine := range Engines {
		b.Run(engine, func(b *testing.B) {
			ctx := context.Background()
			s := benchStore(ctx, b, engine)
			recordPorts(ctx, b, s, 0, ports)
			var c store.SnapshotCache
			if _, err := s.ReadSnapshot(ctx, &c); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				g := fabric.GUID(0x0002c90500000000 + uint64(i))
				if _, err := s.RecordPort(ctx, store.PortChange{Operation: store.OpAddPort, CreatedBy: "bench",
					Port: store.Port{ID: fmt.Sprintf("q%d", i), NetworkID: netA, GUID: &g, Host: "h"}}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				snap, err := s.ReadSnapshot(ctx, &c)
				if err != nil || c.Last().Full {
					b.Fatalf("read: full %v, %v", c.Last().Full, err)
				}
				_ = snap
			}
		})
	}
}
