package pkeyread

import (
	"context"
	"sync"
	"time"
)

// Ahead is a Dialer that opens one connection before it is asked for one:
// Prepare starts a dial, and the next Dial takes what it opened. The
// applier prepares the read-back's connection while OpenSM sweeps, so that
// the attach to the simulator (a round trip to a simulator busy with the
// sweep's end: about 0.5 ms on a change's path, measured) is not made
// between the sweep's end and the read's first SMP. Attaching reads nothing
// of the fabric: every SMP is still sent after Dial returned.
//
// A prepared connection no Dial took is closed by the release Prepare
// returns: the simulator frees a client's place only when the client
// detaches, so nothing prepared outlives the apply that prepared it. On an
// HCA a Pool keeps a connection open between reads already; Ahead is for
// the simulator, whose connections are never kept.
type Ahead struct {
	Dialer Dialer

	mu    sync.Mutex
	spare *aheadDial // the prepared dial no Dial took yet; nil: none
}

// aheadDial is a dial under way: conn (nil if it failed) is set once done
// is closed; taken, guarded by Ahead.mu, once a Dial took it.
type aheadDial struct {
	done  chan struct{}
	conn  Conn
	taken bool
}

// aheadDialTimeout bounds a prepared dial, which a Dial may wait for.
const aheadDialTimeout = 5 * time.Second

// Prepare starts a dial whose connection the next Dial takes. release waits
// for the dial and closes its connection if no Dial took it; call it once
// the reads it was prepared for are done. A Prepare replaces a prepared
// connection no Dial took: that one is closed by its own release.
func (a *Ahead) Prepare(ctx context.Context) (release func()) {
	d := &aheadDial{done: make(chan struct{})}
	a.mu.Lock()
	a.spare = d
	a.mu.Unlock()
	go func() {
		defer close(d.done)
		dctx, cancel := context.WithTimeout(ctx, aheadDialTimeout)
		defer cancel()
		if conn, err := a.Dialer.Dial(dctx); err == nil {
			d.conn = conn
		}
	}()
	return func() {
		<-d.done
		a.mu.Lock()
		unclaimed := !d.taken
		d.taken = true
		if a.spare == d {
			a.spare = nil
		}
		a.mu.Unlock()
		if unclaimed && d.conn != nil {
			d.conn.Close() //nolint:errcheck // nothing was sent on it
		}
	}
}

// Dial takes the prepared connection, once its dial ended (begun earlier,
// it ends sooner than a new one), or dials a new one: when none was
// prepared, or its dial failed.
func (a *Ahead) Dial(ctx context.Context) (Conn, error) {
	a.mu.Lock()
	d := a.spare
	a.spare = nil
	if d != nil {
		d.taken = true
	}
	a.mu.Unlock()
	if d != nil {
		<-d.done // bounded by aheadDialTimeout
		if d.conn != nil {
			return d.conn, nil
		}
	}
	return a.Dialer.Dial(ctx)
}
