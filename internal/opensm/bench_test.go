package opensm

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
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

// BenchmarkSweepWatchWait is a watch waiting for a heavy sweep that OpenSM
// logs as it goes: the log's parts at the moments of a real sweep (4 hosts:
// its end 7 ms after the SIGHUP; 1,500 hosts: a burst of VERBOSE lines, then
// the MADs' quiet stretch, its last steps at 200 ms, its end at 207 ms). It
// reports how late the end was read (late-µs/op: from its write to the
// Wait's return), the looks at the log, and the process's CPU time (the
// writer's included, which is the same whatever the polling).
func BenchmarkSweepWatchWait(b *testing.B) {
	for _, tl := range []struct {
		name              string
		verbose           int           // VERBOSE lines logged at once after the start
		steps, last, ends time.Duration // when the sweep's middle, its last steps and its end are logged
	}{
		{"hosts=4", 0, 2 * time.Millisecond, 6500 * time.Microsecond, 7 * time.Millisecond},
		{"hosts=1500", 1500, 50 * time.Millisecond, 200 * time.Millisecond, 207 * time.Millisecond},
	} {
		b.Run(tl.name, func(b *testing.B) {
			before, sweep := sweepText(b, "applied.log")
			head, rest := cutAfterBox(b, sweep, titleHeavySweepStart)
			middle, end := cutAfterBox(b, rest, "ALIAS GUIDS CONFIGURED")
			last, end := cutAfterBox(b, end, "LINKS ARMED - SET LINKS TO ACTIVE STATE")
			var verbose strings.Builder
			for i := range tl.verbose {
				fmt.Fprintf(&verbose, "Dec 01 10:04:03 %06d [C89DF6C0] 0x04 -> osm_prtn_add_port: port 0x%x already in partition 'Default' (0x7fff). Will overwrite\n",
					i, 0x0002c90300000001+uint64(i)*0x100)
			}
			var late time.Duration
			var looks int
			cpu := cpuTime(b)
			for i := 0; b.Loop(); i++ {
				path := filepath.Join(b.TempDir(), "opensm.log")
				opensmtest.AppendLog(b, path, before)
				tail, err := OpenTail(path, Position{})
				if err != nil {
					b.Fatal(err)
				}
				w, _, err := tail.WatchSweep()
				if err != nil {
					b.Fatal(err)
				}
				wrote := make(chan time.Time, 1)
				go func() {
					start := time.Now()
					at := func(d time.Duration, text string) {
						time.Sleep(time.Until(start.Add(d)))
						opensmtest.AppendLog(b, path, text)
					}
					at(0, head+verbose.String())
					at(tl.steps, middle)
					at(tl.last, last)
					at(tl.ends, end)
					wrote <- time.Now()
				}()
				res, err := w.Wait(context.Background(), 10*time.Second)
				returned := time.Now()
				if err != nil || res.Outcome != Applied {
					b.Fatalf("%+v, %v", res, err)
				}
				late += returned.Sub(<-wrote)
				looks += watchLooks(w)
				w.Close()
				tail.Close()
			}
			b.ReportMetric(float64(late.Microseconds())/float64(b.N), "late-µs/op")
			b.ReportMetric(float64(looks)/float64(b.N), "looks/op")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// watchLooks is how many times w's tail has looked at the log.
func watchLooks(w *SweepWatch) int {
	w.tail.mu.Lock()
	defer w.tail.mu.Unlock()
	return w.tail.follower.looks
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
