package main

import (
	"fmt"
	"slices"
	"time"
)

// latencies summarises a set of durations.
type latencies []time.Duration

// quantile is the q-quantile (0..1) by the nearest-rank method; 0 when empty.
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	rank := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func (l latencies) median() time.Duration { return l.quantile(0.5) }

// ms formats a duration in milliseconds, to a precision that suits its size.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 0 && v > -10, v >= 0 && v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000 && v > -1000:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// rate is events per second, formatted.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
