package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// BenchmarkFinishApplyStorm is the completion of a boot storm of 1,000 port
// jobs on each engine: all proven (FinishApply, one statement), and all but
// one, whose host is down (FinishApplyProven, one statement a job). Each
// iteration records the jobs anew, outside the timer.
func BenchmarkFinishApplyStorm(b *testing.B) {
	const ports = 1000
	for _, engine := range Engines {
		for _, held := range []int{0, 1} {
			b.Run(fmt.Sprintf("%s/held=%d", engine, held), func(b *testing.B) {
				ctx := context.Background()
				s := benchStore(ctx, b, engine)
				term, err := s.NewTerm(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.CompleteJobs(ctx, term, 1); err != nil { // the network's
					b.Fatal(err)
				}
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					ids := recordPorts(ctx, b, s, i, ports)
					rev, err := s.Revision(ctx)
					if err != nil {
						b.Fatal(err)
					}
					a := store.Apply{Revision: rev, SHA256: "ab", Term: term, Outcome: "applied", Detail: "SUBNET UP",
						StartedAt: time.Now().UTC(), FinishedAt: time.Now().UTC()}
					open := func(store.GateState) bool { return true }
					b.StartTimer()
					var f store.Finished
					if held == 0 {
						f, err = s.FinishApply(ctx, a, open)
					} else {
						f, err = s.FinishApplyProven(ctx, a, store.Proven{Jobs: ids[held:], Kubernetes: true}, open)
					}
					if err != nil || f.Completed != int64(ports-held) {
						b.Fatalf("finish: %+v, %v", f, err)
					}
					b.StopTimer()
					if held > 0 {
						if _, err := s.FailJobs(ctx, term, rev, "bench"); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
			})
		}
	}
}

// benchStore opens a store on engine with network netA (VLAN 101)
// recorded: the network the benchmarks' ports join.
func benchStore(ctx context.Context, b *testing.B, engine string) *store.Store {
	b.Helper()
	s := Open(b, engine)
	if _, err := s.RecordNetwork(ctx, store.NetworkChange{Network: vlanNetwork(netA, 101),
		Operation: store.OpCreateNetwork, CreatedBy: "bench", Request: `{}`}); err != nil {
		b.Fatal(err)
	}
	return s
}

// recordPorts records n ports of round i in network netA, 16 at a time, and
// returns their jobs' ids.
func recordPorts(ctx context.Context, b *testing.B, s *store.Store, round, n int) []int64 {
	ids := make([]int64, n)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for c := range 16 {
		wg.Go(func() {
			for i := c; i < n; i += 16 {
				g := fabric.GUID(0x0002c90400000000 + uint64(round*n+i))
				j, err := s.RecordPort(ctx, store.PortChange{Operation: store.OpAddPort, CreatedBy: "bench",
					Port: store.Port{ID: fmt.Sprintf("p%d-%d", round, i), NetworkID: netA, GUID: &g, Host: "h"}})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = j.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return ids
}

// BenchmarkFinishApplyOne is the completion of a one-port change on each
// engine, the step on the path of every job's completion: by FinishApply
// (verify = log) and by FinishApplyProven (verify = tables, the default).
// Each iteration records the job anew, outside the timer.
func BenchmarkFinishApplyOne(b *testing.B) {
	for _, engine := range Engines {
		for _, proven := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/proven=%t", engine, proven), func(b *testing.B) {
				ctx := context.Background()
				s := benchStore(ctx, b, engine)
				term, err := s.NewTerm(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				open := func(store.GateState) bool { return true }
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					ids := recordPorts(ctx, b, s, i, 1)
					rev, err := s.Revision(ctx)
					if err != nil {
						b.Fatal(err)
					}
					a := store.Apply{Revision: rev, SHA256: "ab", Term: term, Outcome: "applied", Detail: "SUBNET UP",
						StartedAt: time.Now().UTC(), FinishedAt: time.Now().UTC(), NewestJob: ids[0]}
					b.StartTimer()
					var f store.Finished
					if proven {
						f, err = s.FinishApplyProven(ctx, a, store.Proven{Jobs: ids, Kubernetes: true}, open)
					} else {
						f, err = s.FinishApply(ctx, a, open)
					}
					if err != nil || f.Completed < 1 {
						b.Fatalf("finish: %+v, %v", f, err)
					}
				}
			})
		}
	}
}
