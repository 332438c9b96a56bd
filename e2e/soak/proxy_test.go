package soak

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(l))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, deadline time.Duration) (time.Duration, error) {
	t.Helper()
	began := time.Now()
	c.SetDeadline(time.Now().Add(deadline))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	l, err := r.ReadString('\n')
	if err == nil && l != "ping\n" {
		t.Fatalf("echo read %q", l)
	}
	return time.Since(began), err
}

// TestProxyFaults: a slowed proxy delays each way; a black-holed one holds
// the bytes, without a reset, until healed, and then delivers them.
func TestProxyFaults(t *testing.T) {
	p, err := newProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := roundTrip(t, c, r, 10*time.Second); err != nil {
		t.Fatalf("through a healthy proxy: %v", err)
	}

	p.slow(100*time.Millisecond, 50*time.Millisecond)
	if d, err := roundTrip(t, c, r, 10*time.Second); err != nil || d < 200*time.Millisecond {
		t.Fatalf("through a slowed proxy: %s, %v; want at least 200ms (100ms each way)", d, err)
	}
	p.slow(0, 0)

	p.partition(true)
	if _, err := roundTrip(t, c, r, 300*time.Millisecond); err == nil {
		t.Fatal("an echo came back through a black-holed proxy")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("black-holed: %v; want a timeout, not a reset", err)
	}
	p.partition(false)
	// The held ping arrives once healed (the connection was never reset).
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if l, err := r.ReadString('\n'); err != nil || l != "ping\n" {
		t.Fatalf("after healing: %q, %v; want the held ping", l, err)
	}
	if _, err := roundTrip(t, c, r, 10*time.Second); err != nil {
		t.Fatalf("after healing: %v", err)
	}
}
