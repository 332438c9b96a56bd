package soak

import (
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// proxy is a TCP proxy between one manager and its database server, which
// the db-latency and db-partition faults slow down or black-hole. It is a few
// lines of its own rather than Shopify's toxiproxy: the soak needs two
// toxics (a jittered delay, and a black hole that holds the data without a
// reset) driven from its own goroutine, and the module gains no dependency
// that only a test uses.
//
// A black hole holds what either side sends until it is healed, as a network
// partition shorter than TCP's retransmission timeout does: no reset, no
// error, the bytes arrive late (a connection opened meanwhile is accepted
// and reaches the server once healed, as a SYN retransmitted).
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	healed  *sync.Cond // broadcast when blocked goes false
	blocked bool
	latency time.Duration // added to every chunk, each way
	jitter  time.Duration // plus up to this much, drawn per chunk
	conns   map[net.Conn]struct{}
	closed  bool
}

// newProxy listens on a free loopback port and forwards to target.
func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.healed = sync.NewCond(&p.mu)
	go p.serve()
	return p, nil
}

// addr is the address a manager connects to instead of the server's.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// slow adds latency plus up to jitter to every chunk either way (0, 0: none).
func (p *proxy) slow(latency, jitter time.Duration) {
	p.mu.Lock()
	p.latency, p.jitter = latency, jitter
	p.mu.Unlock()
}

// partition black-holes the connections (true) or heals them (false).
func (p *proxy) partition(on bool) {
	p.mu.Lock()
	p.blocked = on
	p.mu.Unlock()
	if !on {
		p.healed.Broadcast()
	}
}

// close ends the listener and every connection.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed, p.blocked = true, false
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.healed.Broadcast()
	p.ln.Close()
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *proxy) handle(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	if p.hold() {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the server is down: the client sees its connection end, as it would
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done // either side ended: end both
}

// pipe copies src to dst, each chunk held while black-holed and delayed
// while slowed.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.hold() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed side: handle ends both
		}
	}
}

// hold waits while black-holed, then sleeps the latency; it says whether
// the proxy was closed meanwhile.
func (p *proxy) hold() bool {
	p.mu.Lock()
	for p.blocked && !p.closed {
		p.healed.Wait()
	}
	d := p.latency
	if p.jitter > 0 {
		d += rand.N(p.jitter)
	}
	closed := p.closed
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return closed
}
