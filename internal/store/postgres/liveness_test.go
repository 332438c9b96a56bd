package postgres

import (
	"net"
	"testing"
	"time"
)

func TestClosedByPeer(t *testing.T) {
	cases := []struct {
		name string
		peer func(t *testing.T, c net.Conn) // what the server side does to an idle session
		want bool
	}{
		{"idle and open", func(*testing.T, net.Conn) {}, false},
		{"a message waiting", func(t *testing.T, c net.Conn) {
			if _, err := c.Write([]byte("E")); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"closed", func(t *testing.T, c net.Conn) { c.Close() }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, server := tcpPair(t)
			tc.peer(t, server)
			// What the peer did reaches the client's socket a moment later.
			deadline := time.Now().Add(5 * time.Second)
			got := closedByPeer(client)
			for got != tc.want && tc.want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
				got = closedByPeer(client)
			}
			if got != tc.want {
				t.Errorf("closedByPeer = %v, want %v", got, tc.want)
			}
			// It looks without reading: a message stays for the reader.
			if tc.name == "a message waiting" {
				b := make([]byte, 1)
				client.SetReadDeadline(time.Now().Add(5 * time.Second))
				if n, err := client.Read(b); n != 1 || b[0] != 'E' {
					t.Errorf("read after the check: %q, %v; want the message", b[:n], err)
				}
			}
		})
	}
	t.Run("a connection it cannot look into counts as open", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		if closedByPeer(a) {
			t.Error("closedByPeer(net.Pipe) = true, want false")
		}
	})
}

func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// BenchmarkClosedByPeer is what the check adds to taking a connection from
// the pool, against a round trip of tens of microseconds at least.
func BenchmarkClosedByPeer(b *testing.B) {
	c, _ := tcpPair(b)
	for b.Loop() {
		if closedByPeer(c) {
			b.Fatal("an open connection reads as closed")
		}
	}
}
