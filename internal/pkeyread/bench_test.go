package pkeyread_test

import (
	"fmt"
	"testing"
)

// BenchmarkRead reads every host port of a simulated fabric and the switch
// port facing it (one op: all of them), with a real OpenSM's tables, on 1 and
// 4 workers. ports/s is the figure to compare; ibsim answers one MAD at a
// time, so more workers help only while the client side is the bottleneck.
// 1,000 hosts hang on 16 switches: ibsim forwards a LID-routed MAD across at
// most 16 switches of the harness's chain (smpquery fails the same way beyond).
func BenchmarkRead(b *testing.B) {
	for _, size := range []struct{ hosts, switches int }{{4, 1}, {100, 4}, {1000, 16}} {
		f := sweptFabric(b, size.hosts, size.switches)
		tg := targets(b, f)
		for _, workers := range []int{1, 4} {
			b.Run(fmt.Sprintf("hosts=%d/workers=%d", size.hosts, workers), func(b *testing.B) {
				r := simReader(b, f)
				r.Workers = workers
				for b.Loop() {
					for _, res := range r.Read(b.Context(), tg) {
						if res.Err != nil {
							b.Fatal(res.Err)
						}
					}
				}
				b.ReportMetric(float64(len(tg)*b.N)/b.Elapsed().Seconds(), "ports/s")
				b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N*len(tg)), "ms/port")
			})
		}
	}
}
