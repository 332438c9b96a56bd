package topology

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// Dump is OpenSM's subnet dump at a path, parsed again only when its content
// changed. OpenSM rewrites the file at every SUBNET UP, usually with the same
// content, and the applier reads it after every sweep (the gates, the
// capacity check) while the API reads it for every port: on a fabric of 1,500
// hosts the file is 1 MB and a parse costs tens of milliseconds, which every
// apply would pay, however small its change.
//
// A read whose file has the same identity as the last one (device, inode,
// size, modification and change time) returns the last result without reading
// the file; any other is read whole and compared with the last content, and
// parsed only when it differs. A file whose times are too recent to tell a
// later write in the same clock tick apart (file times advance by the kernel's
// coarse clock) is never trusted by identity: the next read compares the
// content again.
//
// It is safe for concurrent use.
type Dump struct {
	path string

	mu   sync.Mutex
	id   fileID // of the file whose content is data; zero: none trusted
	data []byte // the content last read; nil before the first read
	// spare is the buffer of a read whose content was data's: the next read
	// reuses it, so that comparing a 1 MB dump after every sweep allocates
	// nothing.
	spare  []byte
	topo   *Topology
	err    error // of parsing data
	parses int   // how many times a content was parsed (for tests)
	now    func() time.Time
}

// NewDump returns the dump at path, for instance <dump_files_dir>/opensm-subnet.lst.
func NewDump(path string) *Dump { return &Dump{path: path, now: time.Now} }

// Path is the dump's file.
func (d *Dump) Path() string { return d.path }

// fileID is what says, without reading it, that a file has not changed.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(),
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}

// racyWindow: a file modified this recently may be written again without its
// times changing (they move by the coarse clock's tick, a few milliseconds).
const racyWindow = 100 * time.Millisecond

// Load returns the topology of the dump as it is now, as the package's Load
// does: an error when the file is missing, cannot be read or does not parse.
func (d *Dump) Load() (*Topology, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fi, err := os.Stat(d.path)
	if err != nil {
		d.id = fileID{}
		return nil, fmt.Errorf("read OpenSM's subnet dump: %w", err)
	}
	if id, ok := idOf(fi); ok && id != (fileID{}) && id == d.id && d.data != nil {
		return d.topo, d.err
	}
	data, id, err := readStable(d.path, d.spare)
	d.spare = nil
	if err != nil {
		d.id = fileID{}
		return nil, fmt.Errorf("read OpenSM's subnet dump: %w", err)
	}
	if d.data == nil || !bytes.Equal(data, d.data) {
		// Parse copies what it keeps: the old content's buffer is free.
		d.topo, d.err = Parse(bytes.NewReader(data))
		if d.err != nil {
			d.topo, d.err = nil, fmt.Errorf("%s: %w", d.path, d.err)
		}
		data, d.data = d.data, data
		d.parses++
	}
	d.spare = data
	d.id = id
	if recent := d.now().Add(-racyWindow).UnixNano(); id.mtime > recent || id.ctime > recent {
		d.id = fileID{} // too recent to vouch for its content by its times
	}
	return d.topo, d.err
}

// Parses says how many times a new content was parsed.
func (d *Dump) Parses() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.parses
}

// readStable reads the file and returns its content with its identity, zero
// unless the file kept the same identity while it was read (a file rewritten
// meanwhile must be read again before its identity says anything). The
// content is read into buf when it has room.
func readStable(path string, buf []byte) ([]byte, fileID, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, fileID{}, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return nil, fileID{}, err
	}
	// One read of the size the file has, and more only if it grew.
	size := int(before.Size()) + 1
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	data := buf[:size]
	n, err := io.ReadFull(f, data)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		data = data[:n]
	case err != nil:
		return nil, fileID{}, err
	default:
		rest, err := io.ReadAll(f)
		if err != nil {
			return nil, fileID{}, err
		}
		data = append(data, rest...)
	}
	after, err := f.Stat()
	if err != nil {
		return nil, fileID{}, err
	}
	idBefore, ok1 := idOf(before)
	idAfter, ok2 := idOf(after)
	if !ok1 || !ok2 || idBefore != idAfter || int64(len(data)) != idAfter.size {
		return data, fileID{}, nil
	}
	// The path may name another file by now; then the next Stat differs.
	return data, idAfter, nil
}
