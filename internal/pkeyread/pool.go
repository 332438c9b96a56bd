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
		c.mu.Lock()
		c.reused, c.failed = true, false
		c.mu.Unlock()
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
	c.mu.Lock()
	failed := c.failed
	c.mu.Unlock()
	p.mu.Lock()
	if !failed && c.gen == p.gen && len(p.idle) < orDefault(p.MaxIdle, 1) {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	return c.Conn.Close()
}

// pooledConn is a Conn of a Pool, used by one caller at a time, whose
// Sends may overlap when its Conn's may (Concurrent).
type pooledConn struct {
	Conn // replaced under mu only
	pool *Pool
	gen  uint64

	mu     sync.Mutex
	failed bool // a Send failed since the last Dial
	// reused: handed out again by Dial, not yet answered since. A kept Conn
	// may have gone stale meanwhile (the simulator restarted, the HCA's
	// device reset): a Send that fails on it is tried once more on a new
	// one, so that it costs the read no port. The Sends that overlapped on
	// the stale one each try once more on the same new one.
	reused bool
}

// Concurrent says whether Sends may overlap: when they may on the Conn.
func (c *pooledConn) Concurrent() bool {
	c.mu.Lock()
	conn := c.Conn
	c.mu.Unlock()
	return Concurrent(conn)
}

// Send sends on the Conn; see pooledConn.reused for a kept Conn's first.
func (c *pooledConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	c.mu.Lock()
	conn, reused := c.Conn, c.reused
	c.mu.Unlock()
	resp, err := conn.Send(ctx, lid, mad)
	if err == nil {
		c.mu.Lock()
		if c.Conn == conn {
			c.reused = false // it answers: not stale
		}
		c.mu.Unlock()
		return resp, nil
	}
	if !reused || ctx.Err() != nil {
		c.fail()
		return nil, err
	}
	fresh, derr := c.replace(ctx, conn)
	if derr != nil {
		c.fail()
		return nil, errors.Join(err, derr)
	}
	resp, err = fresh.Send(ctx, lid, mad)
	if err != nil {
		c.fail()
	}
	return resp, err
}

func (c *pooledConn) fail() {
	c.mu.Lock()
	c.failed = true
	c.mu.Unlock()
}

// replace puts a new Conn in stale's place, unless another Send did.
func (c *pooledConn) replace(ctx context.Context, stale Conn) (Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Conn != stale {
		return c.Conn, nil
	}
	fresh, err := c.pool.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	stale.Close() //nolint:errcheck // stale: replaced
	c.Conn, c.reused = fresh, false
	return fresh, nil
}

// Close gives the Conn back to its pool, which keeps or closes it.
func (c *pooledConn) Close() error { return c.pool.put(c) }
