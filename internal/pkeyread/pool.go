package pkeyread

import (
	"context"
	"errors"
	"sync"
)

// Pool is a Dialer that keeps connections open between reads: a Conn its
// user closes after answers only is kept (at most MaxIdle of them) and
// handed out by the next Dial, so that a change's read-back and the
// second-SM look do not attach to the simulator (or open the HCA's user MAD
// device and register an agent) each time. A Conn that ended in an error is
// closed, never kept: a lost answer may leave a late one behind, and the
// error may be the transport's; the next Dial opens a new one. CloseIdle
// closes the kept ones at a leadership term's end, and a Conn in use then
// is closed when its user closes it.
//
// MaxIdle is small because the simulator serves ten clients at once,
// OpenSM and the operators' tools among them: a kept Conn holds one.
type Pool struct {
	Dialer  Dialer
	MaxIdle int // 0: 1

	mu   sync.Mutex
	idle []*pooledConn
	gen  uint64 // CloseIdle's count: a Conn of an earlier one is not kept
}

// Dial returns a kept Conn, or a new one of p.Dialer.
func (p *Pool) Dial(ctx context.Context) (Conn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		c.reused, c.failed = true, false
		return c, nil
	}
	gen := p.gen
	p.mu.Unlock()
	conn, err := p.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return &pooledConn{Conn: conn, pool: p, gen: gen}, nil
}

// CloseIdle closes the kept Conns; the Conns in use are closed, not kept,
// when their users close them.
func (p *Pool) CloseIdle() error {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.gen++
	p.mu.Unlock()
	var errs []error
	for _, c := range idle {
		errs = append(errs, c.Conn.Close())
	}
	return errors.Join(errs...)
}

// put keeps c, or closes it: after an error, past MaxIdle, or from before
// the last CloseIdle.
func (p *Pool) put(c *pooledConn) error {
	p.mu.Lock()
	if !c.failed && c.gen == p.gen && len(p.idle) < orDefault(p.MaxIdle, 1) {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	return c.Conn.Close()
}

// pooledConn is a Conn of a Pool, used by one caller at a time.
type pooledConn struct {
	Conn
	pool   *Pool
	gen    uint64
	failed bool // a Send failed since the last Dial
	// reused: handed out again by Dial, not yet sent on since. A kept Conn
	// may have gone stale meanwhile (the simulator restarted, the HCA's
	// device reset): its first Send that fails is tried once more on a new
	// one, so that it costs the read no port.
	reused bool
}

// Send sends on the Conn; see pooledConn.reused for a kept Conn's first.
func (c *pooledConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	reused := c.reused
	c.reused = false
	resp, err := c.Conn.Send(ctx, lid, mad)
	if err == nil {
		return resp, nil
	}
	if !reused || ctx.Err() != nil {
		c.failed = true
		return nil, err
	}
	fresh, derr := c.pool.Dialer.Dial(ctx)
	if derr != nil {
		c.failed = true
		return nil, errors.Join(err, derr)
	}
	c.Conn.Close() //nolint:errcheck // stale: replaced
	c.Conn = fresh
	resp, err = c.Conn.Send(ctx, lid, mad)
	c.failed = err != nil
	return resp, err
}

// Close gives the Conn back to its pool, which keeps or closes it.
func (c *pooledConn) Close() error { return c.pool.put(c) }
