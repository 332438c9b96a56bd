package pkeyread

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"time"
)

// mux lets several Sends wait on one connection at once: one goroutine
// reads every answer the transport delivers and hands it to the Send that
// waits for its transaction id (the low 32 bits, the sender's), so that a
// port's SMPs can be outstanding together on the connection a read already
// holds, without attaching another client to the simulator (which serves
// ten) or registering another agent. An answer nobody waits for (a Send
// that gave up) is dropped, as the serial Send skipped it.
type mux struct {
	mu      sync.Mutex
	waiting map[uint32]chan muxAnswer
	err     error // why the reader ended: every Send from then on fails
}

// muxAnswer is an answer's MAD, or the transport's verdict on the request
// (a status: ibsim's or the kernel's ETIMEDOUT).
type muxAnswer struct {
	mad []byte
	err error
}

func newMux() *mux { return &mux{waiting: map[uint32]chan muxAnswer{}} }

// run reads answers with next until it fails (the connection closed), and
// delivers each to its waiting Send. next returns ok false for a datagram
// that is no answer of this connection's.
func (m *mux) run(next func() (a muxAnswer, ok bool, err error)) {
	for {
		a, ok, err := next()
		if err != nil {
			m.fail(err)
			return
		}
		if !ok || len(a.mad) < offTID+8 {
			continue
		}
		tid := binary.BigEndian.Uint32(a.mad[offTID+4:])
		m.mu.Lock()
		ch := m.waiting[tid]
		delete(m.waiting, tid)
		m.mu.Unlock()
		if ch != nil {
			ch <- a // buffered: one answer per registration
		}
	}
}

// fail ends every Send waiting, and every one to come, with err.
func (m *mux) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = fmt.Errorf("the connection's reader ended: %w", err)
	}
	for tid, ch := range m.waiting {
		ch <- muxAnswer{err: m.err}
		delete(m.waiting, tid)
	}
}

// expect registers a Send for mad's answer, before it is sent.
func (m *mux) expect(mad []byte) (chan muxAnswer, error) {
	tid := binary.BigEndian.Uint32(mad[offTID+4:])
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	if _, dup := m.waiting[tid]; dup {
		return nil, fmt.Errorf("transaction id %#x already outstanding on the connection", tid)
	}
	ch := make(chan muxAnswer, 1)
	m.waiting[tid] = ch
	return ch, nil
}

// forget unregisters mad's Send (it gave up): its answer, if it comes, is
// dropped.
func (m *mux) forget(mad []byte) {
	m.mu.Lock()
	delete(m.waiting, binary.BigEndian.Uint32(mad[offTID+4:]))
	m.mu.Unlock()
}

// wait waits for the answer on ch within ctx and at most limit.
func (m *mux) wait(ctx context.Context, mad []byte, ch chan muxAnswer, limit time.Duration) ([]byte, error) {
	var expired <-chan time.Time
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > limit {
		t := time.NewTimer(limit)
		defer t.Stop()
		expired = t.C
	}
	select {
	case a := <-ch:
		return a.mad, a.err
	case <-ctx.Done():
		m.forget(mad)
		return nil, fmt.Errorf("no answer: %w", ctx.Err())
	case <-expired:
		m.forget(mad)
		return nil, fmt.Errorf("no answer within %s: %w", limit, os.ErrDeadlineExceeded)
	}
}
