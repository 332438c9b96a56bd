package opensm

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// logNotify wakes a LogFollower when the directory of the log changes: a
// write to a file in it (OpenSM appending, or to the old file of a rotation
// renamed within the directory), a file created, renamed or removed (a
// rotation). The directory is watched rather than the file, so that a file
// not created yet, or re-created by a rotation, is covered by one watch. A
// wake-up says only that something may have changed; the follower then reads
// as it does when it polls, so a spurious one costs a stat and a read.
type logNotify struct {
	file    *os.File      // the inotify instance, in the runtime's poller: closing it ends read
	changed chan struct{} // one token: a change since the follower last looked
	done    chan struct{} // closed once read has returned
	quit    chan struct{} // closed by close
}

// notifyEvents are the changes of the directory that wake a follower: a
// write (a truncation too), a file created, renamed or removed. Not
// IN_ATTRIB: the follower's own read of a file just written updates its
// access time, which would wake it once more for every write.
const notifyEvents = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// newLogNotify watches the directory of path. It fails where inotify cannot be
// had (the directory does not exist yet, the instance limit is reached, a
// file system without it): the follower polls then.
func newLogNotify(path string) (*logNotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), notifyEvents); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify watch of %s: %w", filepath.Dir(path), err)
	}
	// A non-blocking descriptor goes into the runtime's poller: a read waits
	// without a thread, and Close makes it return.
	n := &logNotify{file: os.NewFile(uintptr(fd), "inotify"), changed: make(chan struct{}, 1),
		done: make(chan struct{}), quit: make(chan struct{})}
	go n.read()
	return n, nil
}

// read turns every batch of events into one token, until the instance is
// closed. The events themselves need not be parsed: any change makes the
// follower look.
func (n *logNotify) read() {
	defer close(n.done)
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		if _, err := n.file.Read(buf); err != nil {
			return // closed; or broken, and the slow poll carries on
		}
		// Blocks while a token waits: the events meanwhile stay in the
		// kernel, which merges a file's repeated IN_MODIFY into one, so that
		// a burst of OpenSM's lines wakes this goroutine once per look of the
		// follower, not once per line.
		select {
		case n.changed <- struct{}{}:
		case <-n.quit:
			return
		}
	}
}

// broken says the instance stopped reading events.
func (n *logNotify) broken() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// close ends the notifications without waiting for the instance to go away.
// Closing an inotify instance that holds a watch waits in the kernel until
// no reader of the file system's notification marks can still see it (an
// SRCU grace period): 4-20 ms measured on an idle machine, against some 50 µs
// to set one up, and os.File.Close waits for that, having first waited for
// the reader to return. WaitSweep closes its follower before it returns, so
// a close that waited would put those milliseconds on the path of every
// apply, after the sweep's end was read (which is why the followers woken by
// notifications were slower than the 5 ms poll). The instance is closed in a
// goroutine of its own instead: nobody needs it to be gone.
func (n *logNotify) close() {
	close(n.quit)
	go closeInstance(n.file)
}

// closeInstance closes an inotify instance; tests replace it to see who waits.
var closeInstance = func(f *os.File) { f.Close() }
