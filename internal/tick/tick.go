// Package tick runs periodic work that must stop with its context: a
// leader's lock check, a watch of OpenSM's state.
package tick

import (
	"context"
	"time"
)

// Every calls f every interval, the first time one interval from now, until
// ctx ends or f returns false. It returns once it calls f no more.
func Every(ctx context.Context, interval time.Duration, f func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !f() {
				return
			}
		}
	}
}
