package opensm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// Position is a place in a log file: which file (its inode) and a byte offset.
// A file that was deleted and re-created may get the same inode back; a
// follower notices that only if the new file is shorter than the offset.
// Rotation by renaming, which keeps the old file, is always noticed.
type Position struct {
	Inode  uint64
	Offset int64
}

// LogPosition returns the current end of the log file. A missing file gives the
// zero position: everything the file will hold comes after it.
func LogPosition(path string) (Position, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Position{}, nil
	}
	if err != nil {
		return Position{}, fmt.Errorf("log position: %w", err)
	}
	return Position{Inode: inodeOf(fi), Offset: fi.Size()}, nil
}

func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// ErrLogReset is returned (wrapped) by LogFollower.Next when the log was
// truncated in place (copytruncate, log_max_size), or when the position was
// taken in another file than the one at the path: whatever was logged in
// between may be lost, so any chain of lines being followed is broken. The
// follower carries on from the beginning of the file as it is now. A rotation
// by renaming while the follower reads is followed without loss and without a
// reset.
var ErrLogReset = errors.New("log truncated or replaced")

// How often a follower looks at the file when it has read everything: a stat
// and a read. Next waits this long between looks, and so does a SweepWatch
// while the end of its sweep is not near.
const pollInterval = 5 * time.Millisecond

// The gap of a SweepWatch while the end of the sweep it waits for may be
// near (SweepWatch.gap says when): the least time between two of its looks
// at the log, each woken by a write (logWake), or a poll where no write
// wakes it. That end is on the path of every job's completion, and OpenSM
// logs it after a quiet stretch (its Sets answered): polled every 5 ms, it
// was read about 3 ms after OpenSM logged it (median), every 1 ms under
// 1 ms. Woken by every write throughout the sweep instead, the reader took
// CPU from OpenSM on 2 cores at each of its lines; with the gap, a burst of
// lines costs a look a gap, and a quiet stretch none (docs/performance.md).
// A look is a read and two stats; an idle manager makes none.
const watchPollInterval = time.Millisecond

// A message box's header line ("do_sweep:") without its title is waited for
// this long after the last data before it is handed out anyway.
const openBoxPatience = 100 * time.Millisecond

// maxReadPerPoll keeps one poll from reading a huge backlog in one go.
const maxReadPerPoll = 1 << 20

// LogFollower reads the entries of a growing OpenSM log from a position on.
// Once it has read everything it polls every pollInterval (stat and read).
// It is not safe for concurrent use.
type LogFollower struct {
	path string
	from Position
	// opened: the file at path has been opened once; later opens follow a
	// rotation and start at offset 0.
	opened bool

	f      *os.File
	inode  uint64
	offset int64 // bytes of f read so far

	partial      []byte // data after the last newline
	skipFragment bool   // the data starts in the middle of a line: drop up to the first newline
	parser       entryParser
	lastData     time.Time // when data was last read

	fastPoll time.Duration // pollInterval
	patience time.Duration // openBoxPatience

	queue []queued
	reset error // a reset to report once the queue is empty

	gen        int   // files opened so far: the one being read is the gen-th
	entryStart int64 // offset of the header line of the entry the parser builds
	partialAt  int64 // offset of the line being assembled in partial
	buf        []byte
	read       int64 // bytes read, over all files
	looks      int   // polls: looks at the file for new data
	idle       bool  // the last look found no new data (see take)
}

// queued is an entry read, with where its header line is: the position in
// its file, and which of the files the follower opened that is (gen).
type queued struct {
	e   Entry
	at  Position
	gen int
}

// queued is the entry the parser handed out, at the place of its header line.
func (l *LogFollower) queued(e Entry) queued {
	return queued{e: e, at: Position{Inode: l.inode, Offset: l.entryStart}, gen: l.gen}
}

// FollowLog returns a follower that reads path from the position on. The file
// need not exist yet.
func FollowLog(path string, from Position) *LogFollower {
	return &LogFollower{path: path, from: from, fastPoll: pollInterval, patience: openBoxPatience}
}

// Close releases the open file.
func (l *LogFollower) Close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// wait waits until the log may have changed, or ctx ends.
func (l *LogFollower) wait(ctx context.Context) error {
	d := l.fastPoll
	if l.parser.pending && l.parser.openBox() {
		// An open box is handed out once the patience is over, data or not.
		d = min(d, max(l.patience-time.Since(l.lastData), time.Millisecond))
	}
	return sleep(ctx, d)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Next returns the next entry, waiting for it as long as ctx allows. When the log
// was truncated or replaced it returns an error wrapping ErrLogReset once, and the
// entries of the new file after that. An entry whose header line was logged
// before the position is never returned, even if its continuation lines come
// after it.
func (l *LogFollower) Next(ctx context.Context) (Entry, error) {
	for {
		q, reset, ok, err := l.take(true)
		switch {
		case err != nil:
			return Entry{}, err
		case reset != nil:
			return Entry{}, reset
		case ok:
			return q.e, nil
		}
		if err := l.wait(ctx); err != nil {
			return Entry{}, err
		}
	}
}

// take is Next without the wait: the next entry, or the next reset (an error
// wrapping ErrLogReset, with the gen of the file it concerns), that what the
// log holds now gives. ok is false when there is none yet. A look that finds
// no new data may still hand out an entry (the last one read, complete once
// nothing follows it): with lookAgain false, the take after that entry
// returns none without looking again, as the look before it was just now
// (a Tail's Pump: a look is a read and two stats, on the path of every
// job's completion); Next looks again.
func (l *LogFollower) take(lookAgain bool) (q queued, reset error, ok bool, err error) {
	for {
		if len(l.queue) > 0 {
			q = l.queue[0]
			l.queue = l.queue[1:]
			return q, nil, true, nil
		}
		if l.reset != nil {
			reset, l.reset = l.reset, nil
			return queued{gen: l.gen}, reset, true, nil
		}
		if l.idle {
			l.idle = false
			return queued{}, nil, false, nil
		}
		progressed, err := l.poll()
		if err != nil {
			return queued{}, nil, false, err
		}
		if !progressed && len(l.queue) == 0 && l.reset == nil {
			return queued{}, nil, false, nil
		}
		// A reset (a truncation) is handed out first, then the new data read.
		l.idle = !progressed && !lookAgain && l.reset == nil
	}
}

// poll reads what is available. progressed says that new data was read.
func (l *LogFollower) poll() (progressed bool, err error) {
	l.looks++
	if l.f == nil {
		if err := l.open(); err != nil || l.f == nil || l.reset != nil {
			return false, err
		}
	}
	n, err := l.readAvailable()
	if err != nil {
		return false, err
	}
	if n > 0 {
		l.lastData = time.Now()
		return true, nil
	}
	if e, ok := l.parser.flush(time.Since(l.lastData) >= l.patience); ok {
		l.queue = append(l.queue, l.queued(e))
	}
	if err := l.checkReplaced(); err != nil {
		return false, err
	}
	// Switched to the new file of a rotation: read it at once.
	return l.f == nil, nil
}

// open opens the file at path, if it exists, and places the read offset.
//
// Never through a symbolic link: OpenSM's user owns the log's directory
// (runas.go) and could put one there to a file only the manager may read,
// whose lines would then reach the manager's log and the jobs' texts.
func (l *LogFollower) open() error {
	f, err := os.OpenFile(l.path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // not there yet (or rotated away and not yet re-created)
	}
	if err != nil {
		return fmt.Errorf("follow %s: %w", l.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("follow %s: %w", l.path, err)
	}
	l.f, l.inode, l.offset = f, inodeOf(fi), 0
	l.gen++
	first := !l.opened
	l.opened = true
	switch {
	case !first:
		// A rotation brought us here; it has been reported already.
	case l.from.Inode != 0 && l.inode != l.from.Inode:
		l.reset = fmt.Errorf("%w: %s is not the file the position was taken in (inode %d, was %d)",
			ErrLogReset, l.path, l.inode, l.from.Inode)
	case fi.Size() < l.from.Offset:
		l.reset = fmt.Errorf("%w: %s has %d bytes, fewer than at the position (%d)",
			ErrLogReset, l.path, fi.Size(), l.from.Offset)
	default:
		l.offset = l.from.Offset
	}
	l.partialAt = l.offset
	if l.offset == 0 {
		return nil
	}
	// Starting inside a line would make its tail look like a line of its own.
	var before [1]byte
	if _, err := f.ReadAt(before[:], l.offset-1); err != nil {
		return fmt.Errorf("follow %s: %w", l.path, err)
	}
	l.skipFragment = before[0] != '\n'
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return fmt.Errorf("follow %s: %w", l.path, err)
	}
	return nil
}

// readAvailable reads up to the end of the file (or maxReadPerPoll bytes).
func (l *LogFollower) readAvailable() (int, error) {
	if l.buf == nil {
		l.buf = make([]byte, 64*1024)
	}
	total := 0
	for total < maxReadPerPoll {
		n, err := l.f.Read(l.buf)
		if n > 0 {
			total += n
			l.offset += int64(n)
			l.read += int64(n)
			l.consume(l.buf[:n])
		}
		if err == io.EOF || n == 0 {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("follow %s: %w", l.path, err)
		}
	}
	return total, nil
}

// consume splits data into lines and feeds the complete ones to the parser.
// data ends at the follower's offset.
func (l *LogFollower) consume(data []byte) {
	at := l.offset - int64(len(data)) // file offset of data[0]
	for len(data) > 0 {
		if len(l.partial) == 0 {
			l.partialAt = at
		}
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			l.partial = append(l.partial, data...)
			if len(l.partial) > maxLineLength { // not a log line anyone wants whole
				l.feed(string(l.partial), l.partialAt)
				l.partial = l.partial[:0]
			}
			return
		}
		line := string(append(l.partial, data[:i]...))
		l.partial = l.partial[:0]
		data = data[i+1:]
		start := l.partialAt
		at += int64(i + 1)
		l.feed(line, start)
	}
}

// feed hands one line to the parser; start is its offset in the file.
func (l *LogFollower) feed(line string, start int64) {
	if l.skipFragment {
		l.skipFragment = false
		return
	}
	e, ok, header, _ := l.parser.lineHeader(line)
	if ok {
		l.queue = append(l.queue, l.queued(e))
	}
	if header {
		l.entryStart = start
	}
}

// checkReplaced looks for truncation in place (log_max_size, copytruncate) and
// for rotation (path now names another file).
func (l *LogFollower) checkReplaced() error {
	fi, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("follow %s: %w", l.path, err)
	}
	if fi.Size() < l.offset {
		l.reset = fmt.Errorf("%w: %s shrank from %d to %d bytes", ErrLogReset, l.path, l.offset, fi.Size())
		l.restart()
		if _, err := l.f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("follow %s: %w", l.path, err)
		}
		return nil
	}
	cur, err := os.Stat(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // moved away, new file not created yet: the old one may still grow
	}
	if err != nil {
		return fmt.Errorf("follow %s: %w", l.path, err)
	}
	if inodeOf(cur) == l.inode {
		return nil
	}
	// Rotated: the path names another file (logrotate renamed ours, and it or
	// OpenSM created a new one). Until OpenSM reopens its log (SIGUSR1), it
	// appends to the old file, so the new one is not followed before it holds
	// data: OpenSM has then stopped writing to the old file, whose last lines
	// are read before switching. Nothing is lost, and the chain of lines
	// carries on in the new file: no reset is reported.
	if cur.Size() == 0 {
		return nil
	}
	for {
		n, err := l.readAvailable()
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	if len(l.partial) > 0 { // the old file's last line, without its newline
		l.feed(string(l.partial), l.partialAt)
		l.partial = l.partial[:0]
	}
	if e, ok := l.parser.flush(true); ok {
		l.queue = append(l.queue, l.queued(e))
	}
	l.restart()
	l.f.Close()
	l.f = nil
	return nil
}

// restart forgets everything read so far, to read a file from its beginning.
func (l *LogFollower) restart() {
	l.offset = 0
	l.partial = l.partial[:0]
	l.skipFragment = false
	l.parser = entryParser{}
	l.lastData = time.Now()
}
