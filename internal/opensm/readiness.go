package opensm

import (
	"context"
	"errors"
	"fmt"
)

// Readiness is what a supervisor knows, at one moment, of whether OpenSM may
// be signalled.
type Readiness struct {
	Ready      bool   // OpenSM runs and has logged its version line
	Supervised bool   // started, and not stopped since
	Failed     bool   // the last start failed; it is retried after a back-off
	LastError  string // why, when Failed
}

// AwaitReady is WaitReady's contract, written once for the Supervisor and
// for the fakes of it that tests of its callers use: it returns once OpenSM
// is ready, and fails at once when OpenSM is not supervised or its last start
// failed, as waiting would not help. observe returns the readiness now and a
// channel closed at its next change.
func AwaitReady(ctx context.Context, observe func() (Readiness, <-chan struct{})) error {
	for {
		r, changed := observe()
		switch {
		case r.Ready:
			return nil
		case !r.Supervised:
			return errors.New("opensm: not started")
		case r.Failed:
			return fmt.Errorf("opensm: not running: %s", r.LastError)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
