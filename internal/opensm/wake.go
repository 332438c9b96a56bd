package opensm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// logWake wakes a sweep watch when OpenSM writes to its log: an inotify
// watch of the log file, armed while a sweep is watched. The watch looks at
// the log when a write wakes it, but not sooner than its gap after its last
// look (SweepWatch.pause): woken by every write throughout a sweep, the
// reader took CPU from OpenSM on two cores at each of a sweep's many lines,
// and OpenSM's own sweep took longer by about as much as the end was read
// sooner (docs/performance.md); polled instead, a large sweep's quiet
// stretches cost a look every few milliseconds.
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
	// ino and dev are the armed file's inode and device. proven: a write to it has woken a
	// wait, and nothing since said that later ones may not (see
	// onlyWrites): a sweep watch can then trust the wake to come, and
	// looks less often without one (SweepWatch.pause). It holds across
	// armings on the same file: a large sweep's first stretch is quiet.
	ino, dev uint64
	proven   bool
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
// arming are dropped first; one that moved or removed the file unproves
// the wake, as an arming on another file (inode and device) does. A file
// re-created with its predecessor's inode number on the same file system is
// taken for it: its writes wake as its predecessor's did.
func (w *logWake) arm(path string) error {
	if w.drain() {
		w.proven = false
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, wakeEvents|unix.IN_DONT_FOLLOW)
	if err != nil {
		return fmt.Errorf("inotify watch of %s: %w", path, err)
	}
	w.wd = wd
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Ino != w.ino || st.Dev != w.dev {
		w.ino, w.dev, w.proven = st.Ino, st.Dev, false // another file (or unknown): not proven on it
	}
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

// drain reads the events queued, without waiting. moved: one of them
// moved or removed the armed file, or some were lost; a removed watch's
// own end (IN_IGNORED, queued by every disarm) is not.
func (w *logWake) drain() (moved bool) {
	for {
		n, err := unix.Read(w.fd, w.buf[:])
		if n <= 0 || err != nil {
			return moved
		}
		eachEvent(w.buf[:n], func(mask uint32) {
			moved = moved || mask&(unix.IN_MOVE_SELF|unix.IN_DELETE_SELF|unix.IN_Q_OVERFLOW) != 0
		})
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
	n, err := w.f.Read(w.buf[:])
	switch {
	case err == nil:
		w.proven = onlyWrites(w.buf[:n])
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, ctx.Err()
	default:
		return false, fmt.Errorf("inotify: %w", err)
	}
}

// onlyWrites says whether the inotify events in b are all writes
// (IN_MODIFY alone): a rename or removal of the file, the watch's end
// (IN_IGNORED) or an overflowed queue say that later writes may not wake
// anyone.
func onlyWrites(b []byte) bool {
	only := true
	whole := eachEvent(b, func(mask uint32) { only = only && mask == unix.IN_MODIFY })
	return only && whole
}

// eachEvent calls f with the mask of each inotify event in b; whole says
// that b held whole events only.
func eachEvent(b []byte, f func(mask uint32)) (whole bool) {
	for len(b) >= unix.SizeofInotifyEvent {
		f(binary.NativeEndian.Uint32(b[4:8]))
		nameLen := int(binary.NativeEndian.Uint32(b[12:16]))
		b = b[min(len(b), unix.SizeofInotifyEvent+nameLen):]
	}
	return len(b) == 0
}

// close ends the instance without waiting for it to go away: closing an
// inotify instance that held a watch waits in the kernel until no reader of
// the file system's notification marks can still see it (an SRCU grace
// period, 4-20 ms measured), which nobody needs to wait for.
func (w *logWake) close() {
	w.disarm()
	go w.f.Close()
}
