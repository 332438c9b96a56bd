package opensm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// logWake wakes a sweep watch when OpenSM writes to its log: an inotify
// watch of the log file, armed only while the watched sweep is near its end
// (sweepWatch.near), when OpenSM logs a handful of lines in the last
// milliseconds of the sweep, the last of them its end. Woken by every write
// throughout a sweep instead, the reader took CPU from OpenSM on two cores at
// each of a sweep's many lines, and OpenSM's own sweep took longer by about
// as much as the end was read sooner (docs/performance.md); polled every
// millisecond, the end was read 0.6-0.8 ms after OpenSM logged it (median).
//
// One instance per Tail, lent to one watch at a time and armed on the file
// by that watch: creating and closing one per apply would cost a close that
// waits in the kernel (see close). A wake-up says only that the file may
// have changed; the watch then looks as it does when it polls.
type logWake struct {
	fd  int      // the inotify instance
	f   *os.File // fd, in the runtime's poller: a read waits without a thread
	wd  int      // the armed watch; -1: none
	buf [4096]byte
}

// wakeEvents are the changes of the log file that wake a watch: a write (a
// truncation too), and the file renamed or removed (a rotation: the watch
// stays on the old file, and the poll's fallback finds the new one).
const wakeEvents = unix.IN_MODIFY | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF

// newLogWake makes an inotify instance. It fails where inotify cannot be had
// (the instance limit reached, a kernel without it): watches poll then.
func newLogWake() (*logWake, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	// A non-blocking descriptor goes into the runtime's poller.
	return &logWake{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), wd: -1}, nil
}

// arm watches the file at path, never through a symbolic link (OpenSM's
// user owns the log's directory): a link at path is watched itself, gets no
// writes, and the watch falls back on its poll. Events left from an earlier
// arming are dropped first.
func (w *logWake) arm(path string) error {
	w.drain()
	wd, err := unix.InotifyAddWatch(w.fd, path, wakeEvents|unix.IN_DONT_FOLLOW)
	if err != nil {
		return fmt.Errorf("inotify watch of %s: %w", path, err)
	}
	w.wd = wd
	return nil
}

// disarm removes the watch. Unlike closing the instance, removing a watch
// does not wait for the kernel to free it.
func (w *logWake) disarm() {
	if w.wd >= 0 {
		_, _ = unix.InotifyRmWatch(w.fd, uint32(w.wd))
		w.wd = -1
	}
}

// drain reads the events queued, without waiting.
func (w *logWake) drain() {
	for {
		if n, err := unix.Read(w.fd, w.buf[:]); n <= 0 || err != nil {
			return
		}
	}
}

// wait waits up to d for a change of the armed file, or until ctx ends.
// woken says a change came; err is ctx's end, or the instance's failure
// (closed with its tail): the watch polls then.
func (w *logWake) wait(ctx context.Context, d time.Duration) (woken bool, err error) {
	if err := w.f.SetReadDeadline(time.Now().Add(d)); err != nil {
		return false, fmt.Errorf("inotify: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = w.f.SetReadDeadline(time.Now()) })
	defer stop()
	_, err = w.f.Read(w.buf[:])
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, ctx.Err()
	default:
		return false, fmt.Errorf("inotify: %w", err)
	}
}

// close ends the instance without waiting for it to go away: closing an
// inotify instance that held a watch waits in the kernel until no reader of
// the file system's notification marks can still see it (an SRCU grace
// period, 4-20 ms measured), which nobody needs to wait for.
func (w *logWake) close() {
	w.disarm()
	go w.f.Close()
}
