package postgres

import (
	"context"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// A server that shuts down (a restart, a failover, pg_terminate_backend)
// writes a FATAL message to each of its sessions and closes them. The pool
// does not read an idle connection, so it only learns of this when a
// request sends on it: every idle connection of the pool would fail one
// request after a database restart, each answered 503, though the server is
// back. pgxpool pings only connections idle for over a second; one that the
// server closed half a second ago would still be handed out.
//
// dropClosedIdle is the pool's PrepareConn hook: an idle connection with
// anything to read (an idle session is sent nothing else) or hung up is
// dropped, and the pool takes another or dials. It costs one poll(2) with no
// wait, no round trip; a link cut without a word from the server is not seen
// here (the request's own deadline covers that).
func dropClosedIdle(_ context.Context, c *pgx.Conn) (bool, error) {
	return !closedByPeer(c.PgConn().Conn()), nil
}

// closedByPeer reports whether the idle connection c has data or a hang-up
// waiting, without reading it. A connection it cannot look into counts as
// open.
func closedByPeer(c net.Conn) bool {
	for {
		u, ok := c.(interface{ NetConn() net.Conn }) // TLS
		if !ok {
			break
		}
		c = u.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	err = raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		closed = err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
	})
	return err != nil || closed
}
