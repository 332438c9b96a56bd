package pkeyread_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// poolCountingDialer counts the Conns it opened and closed, and makes the
// Sends of those opened before a restart fail (a simulator restarted under
// them: every Conn opened before it is dead).
type poolCountingDialer struct {
	pkeyread.Dialer

	mu             sync.Mutex
	opened, closed int
	epoch          int // bumped by restart: Conns of an earlier epoch are dead
}

func (d *poolCountingDialer) Dial(ctx context.Context) (pkeyread.Conn, error) {
	c, err := d.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opened++
	return &poolCountedConn{Conn: c, d: d, epoch: d.epoch}, nil
}

// restart makes every Conn opened so far fail its Sends at once, as a
// simulator that restarted refuses its old clients' datagrams.
func (d *poolCountingDialer) restart() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.epoch++
}

func (d *poolCountingDialer) counts() (opened, closed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opened, d.closed
}

type poolCountedConn struct {
	pkeyread.Conn
	d     *poolCountingDialer
	epoch int
}

func (c *poolCountedConn) Send(ctx context.Context, lid uint16, mad []byte) ([]byte, error) {
	c.d.mu.Lock()
	dead := c.epoch != c.d.epoch
	c.d.mu.Unlock()
	if dead {
		return nil, errors.New("send to the simulator: connection refused")
	}
	return c.Conn.Send(ctx, lid, mad)
}

func (c *poolCountedConn) Close() error {
	c.d.mu.Lock()
	c.d.closed++
	c.d.mu.Unlock()
	return c.Conn.Close()
}

// readAll reads tg with r and fails t on any port's error.
func readAll(t *testing.T, r *pkeyread.Reader, tg []pkeyread.Target, what string) {
	t.Helper()
	for _, res := range r.Read(t.Context(), tg) {
		if res.Err != nil {
			t.Fatalf("%s: %s: %v", what, res.Target.Port, res.Err)
		}
	}
}

// TestPoolKeepsConn: reads through a Pool attach to the simulator once, not
// once a read (a change's read-back, the second-SM look); a read cut short
// by a lost answer opens a new Conn; CloseIdle (a term's end) closes the one
// kept, and the next read opens another.
func TestPoolKeepsConn(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	r := simReader(t, f)
	counting := &poolCountingDialer{Dialer: r.Dialer}
	pool := &pkeyread.Pool{Dialer: counting}
	r.Dialer, r.Workers = pool, 1
	tg := targets(t, f)[:1]
	for i := range 3 {
		readAll(t, r, tg, "read")
		if opened, closed := counting.counts(); opened != 1 || closed != 0 {
			t.Fatalf("after %d reads: %d Conns opened, %d closed; want 1 kept open", i+1, opened, closed)
		}
	}
	// A Send that fails: the Conn is closed, not kept.
	lossy := newRecordingDialer(counting, func(sent) bool { return true })
	pool.CloseIdle()
	pool = &pkeyread.Pool{Dialer: lossy}
	r.Dialer, r.PortTimeout = pool, 100*time.Millisecond
	if res := r.Read(t.Context(), tg); res[0].Err == nil {
		t.Fatal("a read whose SMPs are all lost succeeded")
	}
	// The read after the loss gets the whole default deadline back: under a
	// loaded machine an answer slower than a 100 ms deadline's first attempt
	// is a failed Send too, and its Conn is rightly not kept.
	lossy.lose = nil
	r.PortTimeout = pkeyread.DefaultPortTimeout
	readAll(t, r, tg, "read after the loss")
	opened, closed := counting.counts()
	if opened != 3 || closed != 2 {
		t.Fatalf("after a failed read and one more: %d Conns opened, %d closed; want 3 and 2 (the term's, the failed one)",
			opened, closed)
	}
	if err := pool.CloseIdle(); err != nil {
		t.Fatal(err)
	}
	if _, closed := counting.counts(); closed != 3 {
		t.Fatalf("CloseIdle left %d of 3 Conns open", 3-closed)
	}
}

// TestPoolStaleConn: a kept Conn that the simulator no longer serves (it
// restarted) costs the read nothing: its first Send is sent again on a new
// Conn, which is kept in its place.
func TestPoolStaleConn(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	r := simReader(t, f)
	counting := &poolCountingDialer{Dialer: r.Dialer}
	r.Dialer, r.Workers = &pkeyread.Pool{Dialer: counting}, 1
	tg := targets(t, f)[:1]
	readAll(t, r, tg, "first read")
	counting.restart()
	readAll(t, r, tg, "read after the simulator restarted")
	readAll(t, r, tg, "the next read")
	if opened, closed := counting.counts(); opened != 2 || closed != 1 {
		t.Fatalf("%d Conns opened, %d closed; want 2 and 1 (the stale one)", opened, closed)
	}
}

// TestPoolInUseAtCloseIdle: a Conn in use when CloseIdle runs (a look the
// term's end did not wait for) is closed when its user closes it, not kept
// for the next term; MaxIdle bounds what is kept.
func TestPoolInUseAtCloseIdle(t *testing.T) {
	f := sweptFabric(t, 4, 1)
	counting := &poolCountingDialer{Dialer: simReader(t, f).Dialer}
	pool := &pkeyread.Pool{Dialer: counting, MaxIdle: 1}
	a, err := pool.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, err := pool.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b.Close() // kept
	pool.CloseIdle()
	a.Close() // from before CloseIdle: closed
	if opened, closed := counting.counts(); opened != 2 || closed != 2 {
		t.Fatalf("%d Conns opened, %d closed; want both closed", opened, closed)
	}
	c, _ := pool.Dial(t.Context())
	d, _ := pool.Dial(t.Context())
	c.Close()
	d.Close() // past MaxIdle: closed
	if opened, closed := counting.counts(); opened != 4 || closed != 3 {
		t.Fatalf("%d Conns opened, %d closed; want 4 and 3 (one kept)", opened, closed)
	}
}

// BenchmarkReadOnePort is a change's read-back of one port (five SMPs) on a
// simulated fabric, attaching to the simulator for each read (each) or on
// a Conn a Pool kept (pool).
func BenchmarkReadOnePort(b *testing.B) {
	f := sweptFabric(b, 4, 1)
	tg := targets(b, f)[:1]
	for _, pooled := range []bool{false, true} {
		name := map[bool]string{false: "dial=each", true: "dial=pool"}[pooled]
		b.Run(name, func(b *testing.B) {
			r := simReader(b, f)
			r.Workers = 1
			if pooled {
				pool := &pkeyread.Pool{Dialer: r.Dialer}
				defer pool.CloseIdle()
				r.Dialer = pool
			}
			for b.Loop() {
				if res := r.Read(b.Context(), tg); res[0].Err != nil {
					b.Fatal(res[0].Err)
				}
			}
		})
	}
}
