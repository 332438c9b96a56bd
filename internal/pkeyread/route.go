package pkeyread

import (
	"context"
	"fmt"
	"time"
)

// How an SMP reaches its port, and what a lost one costs. A read is as
// robust as OpenSM's own: OpenSM reaches every port by a directed route
// (its discovery, and the port's programming), while a LID-routed SMP
// depends on the forwarding tables of every switch on its way, which a
// reroute leaves wrong for a while and which a simulator may not follow
// across a long chain (ibsim forwards one across 16 switches at most). So a
// port whose LID does not answer is read by the directed route OpenSM's
// subnet dump gives (topology.Route), and the answer is held to the same
// GUID check as a LID's: a path that now leads to another port fails the
// read (ErrMoved) rather than prove anything of it.
//
// A lost SMP (no answer, an error injected, a datagram dropped) is sent
// again after a pause that doubles from retryFirst to retryMax, each time
// by the other route when both are known, until the port's deadline: a port
// that answers only now and then is read, one that never answers fails at
// its deadline, as before. An answer with a MAD status is final: the port
// answered.
//
// SMPs outstanding stay bounded as OpenSM's max_wire_smps bounds its own:
// each worker has one connection and reads one port at a time, with at
// most portSMPs outstanding for it (one when the connection does not take
// overlapping Sends), and at most WireSMPs in all the Read's workers; a
// retry waits for the previous attempt's end. An SMP that does not wait
// for another's answer is sent ahead of the wait (ahead): a table's blocks
// with the NodeInfo that proves the node, the SwitchInfo with the switch's
// NodeInfo. Its answer is used only once the node proved to be the one
// read, and only when it came by the route that proved it; otherwise it is
// dropped (a read that fails ends it) or asked again by that route.
const (
	retryFirst = time.Millisecond
	retryMax   = 64 * time.Millisecond
	// attemptShare: an attempt waits at most this share of the time left to
	// its port, so that a lost SMP leaves time for the other route and for
	// retries (the kernel's umad transport waits the whole time given). The
	// share is a window the port's SMPs share while it lasts (attemptCtx).
	attemptShare = 3
)

// via is how one node is reached during one port's read: by its LID, or by
// its directed route, whichever answered last.
type via struct {
	lid  uint16
	path DRPath
	dr   bool // the next SMP goes by path
}

// String names the route the last answer came by, for an error that
// already names the LID: "LID", or "directed route 0,1,24,3".
func (v *via) String() string {
	if v.dr {
		return fmt.Sprintf("directed route %s", v.path)
	}
	return "LID"
}

// get sends one SubnGet to v's node and returns the answer's attribute
// data, sending it again while it is not answered and ctx has time.
func (w *worker) get(ctx context.Context, v *via, attr uint16, modifier uint32) ([]byte, error) {
	pause := retryFirst
	var lidErr, drErr error
	for {
		if ctx.Err() != nil {
			return nil, noAnswer(v, lidErr, drErr, ctx.Err())
		}
		dr := v.dr
		tid := w.r.tid.Add(1) // each attempt its own: a late answer to another is skipped
		req, lid := getSMP(attr, modifier, w.mkey, tid), v.lid
		if dr {
			req, lid = getDRSMP(attr, modifier, w.mkey, tid, v.path), PermissiveLID
		}
		answer, err := w.send(ctx, lid, req)
		if err == nil {
			return answerData(req, answer)
		}
		if dr {
			drErr = err
		} else {
			lidErr = err
		}
		if ctx.Err() != nil {
			return nil, noAnswer(v, lidErr, drErr, ctx.Err())
		}
		if v.path.Known() {
			v.dr = !dr
		}
		if v.path.Known() && !dr {
			continue // the directed route at once: the LID may never answer
		}
		if !sleep(ctx, pause) {
			return nil, noAnswer(v, lidErr, drErr, ctx.Err())
		}
		pause = min(2*pause, retryMax)
	}
}

// send sends one attempt once the port and the Read have room for it
// (portSMPs, WireSMPs), within its attempts' window.
func (w *worker) send(ctx context.Context, lid uint16, req []byte) ([]byte, error) {
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("not sent: %w", ctx.Err())
	}
	defer func() { <-w.slots }()
	select {
	case w.wire <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("not sent: %w", ctx.Err())
	}
	defer func() { <-w.wire }()
	window := w.attemptCtx(ctx)
	answer, err := w.conn.Send(window, lid, req)
	if err != nil {
		w.loseWindow(window) // the next attempt waits a window of its own
	}
	return answer, err
}

// attemptCtx is what an attempt under ctx (a port's) waits within: a
// window of attemptShare of ctx's time left, kept for the port's next SMPs
// while it lasts (one timer a port, not one an SMP: most SMPs are answered
// in microseconds) and opened anew after a lost one.
func (w *worker) attemptCtx(ctx context.Context) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.window != nil && w.windowOf == ctx && w.window.Err() == nil {
		return w.window
	}
	w.loseWindowLocked()
	d, ok := ctx.Deadline()
	if !ok {
		return ctx
	}
	w.window, w.endWindowCtx = context.WithTimeout(ctx, max(time.Until(d)/attemptShare, retryFirst))
	w.windowOf = ctx
	return w.window
}

// loseWindow stops handing out window, an attempt lost in it. The port's
// other SMPs outstanding in it keep it until the port's end (endWindow).
func (w *worker) loseWindow(window context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.window == window {
		w.loseWindowLocked()
	}
}

func (w *worker) loseWindowLocked() {
	if w.window != nil {
		w.spent = append(w.spent, w.endWindowCtx)
		w.window, w.windowOf, w.endWindowCtx = nil, nil, nil
	}
}

// endWindow ends the attempts' windows, at the port's end.
func (w *worker) endWindow() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.loseWindowLocked()
	for _, end := range w.spent {
		end()
	}
	w.spent = nil
}

// pending is an SMP sent ahead (worker.ahead): its attribute data, or why
// none, and the route its last attempt went by.
type pending struct {
	done     chan struct{}
	attr     uint16
	modifier uint32
	data     []byte
	err      error
	dr       bool
	later    bool // not sent: the port's SMPs do not overlap
}

// ahead sends a Get to at's node on a goroutine of the port's read, ended
// before the port's (worker.tables): an SMP whose answer is wanted after
// another's, sent before that one's answer.
func (w *worker) ahead(ctx context.Context, at via, attr uint16, modifier uint32) *pending {
	p := &pending{done: make(chan struct{}), attr: attr, modifier: modifier}
	if !w.overlap {
		p.later = true // sent when used, as if not sent ahead
		return p
	}
	w.smps.Go(func() {
		defer close(p.done)
		p.data, p.err = w.get(ctx, &at, attr, modifier)
		p.dr = at.dr
	})
	return p
}

// use is p's answer once at's node proved to be the one read: p's when it
// came by at's route (or p found no answer by ctx's end), else asked again
// by at's route, as if it had not been sent ahead.
func (p *pending) use(ctx context.Context, w *worker, at *via) ([]byte, error) {
	if p.later {
		return w.get(ctx, at, p.attr, p.modifier)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, noAnswer(at, nil, nil, ctx.Err())
	}
	if p.dr == at.dr || (p.err != nil && ctx.Err() != nil) {
		return p.data, p.err
	}
	return w.get(ctx, at, p.attr, p.modifier)
}

// noAnswer is the error of an SMP that got none by ctx's end: each route's
// last error, and ctx's (a cancelled read says so).
func noAnswer(v *via, lidErr, drErr, ctxErr error) error {
	switch {
	case lidErr != nil && drErr != nil:
		return fmt.Errorf("%w (LID %d), and by directed route %s: %w: %w", lidErr, v.lid, v.path, drErr, ctxErr)
	case drErr != nil:
		return fmt.Errorf("%w (directed route %s): %w", drErr, v.path, ctxErr)
	case lidErr != nil:
		return fmt.Errorf("%w: %w", lidErr, ctxErr)
	}
	return fmt.Errorf("no answer: %w", ctxErr)
}

// sleep waits d, or until ctx ends: false then.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
