package opensm

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkSweepWatch is the manager's reading of one heavy sweep of a large
// fabric: a VERBOSE line per port (20,000), each through the sweep's watch,
// which is on the path of every job's completion.
func BenchmarkSweepWatch(b *testing.B) {
	var log strings.Builder
	log.WriteString("Dec 01 10:04:03 100000 [C89DF6C0] 0x04 -> do_sweep:\n\n\n" + "******************************************************************" + "\n" +
		"********************* INITIATING HEAVY SWEEP *********************\n" + "******************************************************************" + "\n\n\n")
	for i := range 20000 {
		fmt.Fprintf(&log, "Dec 01 10:04:03 %06d [C89DF6C0] 0x04 -> osm_prtn_add_port: port 0x%x already in partition 'Default' (0x7fff). Will overwrite\n",
			i%1000000, 0x0002c90300000001+uint64(i)*0x100)
	}
	log.WriteString("Dec 01 10:04:04 000009 [C89DF6C0] 0x02 -> SUBNET UP\n")
	entries, err := ParseLog(strings.NewReader(log.String()))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		var w sweepWatch
		done := false
		for _, e := range entries {
			if _, done = w.observe(e); done {
				break
			}
		}
		if !done {
			b.Fatal("the sweep did not end")
		}
	}
}
