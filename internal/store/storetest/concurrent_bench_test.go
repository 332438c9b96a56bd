package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// BenchmarkRecordPortsConcurrently is a burst's port POSTs as the store sees
// them: 16 callers at once on 2 cores (8 per GOMAXPROCS), each recording a
// new port of one network, so that the changes meet in groups, each change
// in a savepoint (group.go). ns/op is the time per change of the burst.
func BenchmarkRecordPortsConcurrently(b *testing.B) {
	for _, engine := range Engines {
		b.Run(engine, func(b *testing.B) {
			ctx := context.Background()
			s := benchStore(ctx, b, engine)
			var n atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					g := fabric.GUID(0x0002c90500000000 + uint64(i))
					if _, err := s.RecordPort(ctx, store.PortChange{Operation: store.OpAddPort, CreatedBy: "bench",
						Port: store.Port{ID: fmt.Sprintf("q%d", i), NetworkID: netA, GUID: &g, Host: "h"}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
