package opensm

import (
	"fmt"
	"sync"
	"time"
)

// Tail is the one reader of OpenSM's log for whoever needs what it says: it
// reads each byte once, across rotation, truncation and re-creation (its
// LogFollower), and hands every entry, in log order, to the handlers it was
// opened with (the applier's enforcement recorder and freeze watch), then to
// the sweep watches taken from it (WatchSweep), each of which keeps the
// entries after its position. Nobody else reads the log: whoever needs what
// it holds now calls Pump, which reads it for all of them. It is safe for
// concurrent use; handlers run with the tail locked, so they must not call it.
type Tail struct {
	mu       sync.Mutex
	path     string
	follower *LogFollower
	handlers []func(Entry)
	feeds    map[*sweepFeed]struct{}
	closed   bool // a Pump after Close reads nothing (and opens no file again)
	// wake is lent to one sweep watch at a time, for its sweep
	// (lendWake); nil until first lent. noWake: inotify cannot be had, and
	// watches poll.
	wake     *logWake
	wakeLent bool
	noWake   bool
}

func newTail(path string, from Position, handlers ...func(Entry)) *Tail {
	return &Tail{path: path, follower: FollowLog(path, from), handlers: handlers, feeds: map[*sweepFeed]struct{}{}}
}

// OpenTail returns a tail of the log at path from the position, its file
// open already when there is one: a rotation before the first Pump does not
// hide what the file held after the position. A file at path other than the
// position's (or shorter than it) is read from its beginning. The error says
// why the file could not be opened now; the tail is usable all the same, and
// opens it at a later Pump. Close it.
func OpenTail(path string, from Position, handlers ...func(Entry)) (*Tail, error) {
	t := newTail(path, from, handlers...)
	err := t.follower.open()
	// A reset here concerns the tail's own start, before anyone watches a
	// sweep: the handlers read the new file from its beginning either way.
	t.follower.reset = nil
	return t, err
}

// Pump reads what the log holds now and hands every new entry to the
// handlers and the sweep watches. It waits for nothing. An error is one of
// reading the log; what could not be read is read at a later Pump.
func (t *Tail) Pump() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for !t.closed {
		q, reset, ok, err := t.follower.take(false)
		if err != nil || !ok {
			return err
		}
		if reset == nil {
			for _, h := range t.handlers {
				h(q.e)
			}
		}
		for f := range t.feeds {
			f.offer(q, reset)
		}
	}
	return nil
}

// Close releases the open file. A reader still running when its term ends
// (the freeze watch) may Pump after it: that reads nothing.
func (t *Tail) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.wake != nil {
		t.wake.close()
		t.wake = nil
	}
	return t.follower.Close()
}

// lendWake arms the tail's wake on the log for one sweep watch, which gives
// it back (returnWake). nil: another watch holds it, the tail is closed, or
// no wake can be had (no inotify, no file at the path yet): the watch polls.
func (t *Tail) lendWake() *logWake {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.noWake || t.wakeLent {
		return nil
	}
	if t.wake == nil {
		w, err := newLogWake()
		if err != nil {
			t.noWake = true
			return nil
		}
		t.wake = w
	}
	if t.wake.arm(t.path) != nil {
		return nil
	}
	t.wakeLent = true
	return t.wake
}

// dropWake closes a wake a watch found broken (its wait failed), unless the
// tail closed it already: no watch is lent one again, and they poll.
func (t *Tail) dropWake(w *logWake) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.wake == w {
		w.close()
		t.wake, t.wakeLent, t.noWake = nil, false, true
	}
}

// returnWake disarms the wake a watch was lent.
func (t *Tail) returnWake(w *logWake) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.wake == w {
		w.disarm()
		t.wakeLent = false
	}
}

// WatchSweep takes the log's position now (LogPosition) and returns a
// SweepWatch of the entries after it (see SweepWatch); Close it. Take it after
// the new partitions file is in place and before the SIGHUP. The position is
// taken with the tail locked, so every entry handed out after it is offered
// to the watch, which keeps those whose header line comes after the
// position.
func (t *Tail) WatchSweep() (*SweepWatch, Position, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	from, err := LogPosition(t.path)
	if err != nil {
		return nil, Position{}, err
	}
	return t.watch(from), from, nil
}

// watch starts a sweep watch of the entries after from; t.mu is held.
func (t *Tail) watch(from Position) *SweepWatch {
	f := &sweepFeed{path: t.path, from: from, gen: t.follower.gen}
	if t.follower.f != nil && from.Inode != 0 && t.follower.inode == from.Inode {
		f.state = feedIn
	}
	t.feeds[f] = struct{}{}
	return &SweepWatch{tail: t, feed: f, taken: time.Now(), now: time.Now, nap: sleep, waitWake: (*logWake).wait}
}

// unwatch ends a sweep watch.
func (t *Tail) unwatch(f *sweepFeed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.feeds, f)
}

// drain returns the entries f kept since the last drain, and what broke it
// (nil: nothing), which comes after them.
func (t *Tail) drain(f *sweepFeed) ([]Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	entries := f.entries
	f.entries = nil
	return entries, f.broken
}

// feedState says where the tail is relative to a sweep watch's position.
type feedState int

const (
	feedBefore feedState = iota // in a file read before the position's: nothing counts
	feedIn                      // in the position's file: entries after the position count
	feedAfter                   // in a file after it (a rotation since): everything counts
)

// sweepFeed is what a sweep watch keeps of the tail's entries.
type sweepFeed struct {
	path  string
	from  Position
	gen   int // the follower's file when the state last changed
	state feedState
	// entries: kept and not drained yet; broken: what makes the log prove
	// nothing since the position (ErrLogReset), after them.
	entries []Entry
	broken  error
}

// offer gives the feed the next entry of the tail, or a reset of the log.
// A truncation of the file the position is in, or of a later one, loses
// what was logged since it was last read: nothing after the position proves
// anything then, as it does not when the tail opens another file than the
// position's before reaching it (the log was replaced since).
func (f *sweepFeed) offer(q queued, reset error) {
	if f.broken != nil {
		return
	}
	if reset != nil {
		// Before the position's file, only a reset of a file opened since
		// concerns it: a truncation of the file read before is no news.
		if f.state != feedBefore || q.gen != f.gen {
			f.broken = reset
		}
		return
	}
	switch {
	case f.state == feedBefore && q.gen == f.gen:
		return // the file read when the watch began: all of it before the position
	case f.state == feedBefore && f.from.Inode != 0 && q.at.Inode != f.from.Inode:
		f.broken = fmt.Errorf("%w: %s is not the file the position was taken in (inode %d, was %d)",
			ErrLogReset, f.path, q.at.Inode, f.from.Inode)
		return
	case f.state == feedBefore:
		f.state, f.gen = feedIn, q.gen
	case f.state == feedIn && q.gen != f.gen:
		f.state = feedAfter
	}
	if f.state == feedIn && q.at.Offset < f.from.Offset {
		return // its header line was logged before the position
	}
	f.entries = append(f.entries, q.e)
}
