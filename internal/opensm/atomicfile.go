package opensm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// WriteFileAtomic replaces path with data so that a reader sees either the old
// file or the new one, never a mix, and the new one survives a crash once the
// function returns. OpenSM may start a heavy sweep at any moment and applies
// whatever partitions file it finds, so a half-written file would be applied.
//
// The data goes to a temporary file in the same directory (created with mode
// 0600, so secrets are never readable by others even briefly), which is synced,
// given mode, renamed over path, and then the directory is synced so the rename
// itself is durable. A process that reads the file through a bind mount must mount
// the directory: a mounted file keeps pointing at the old inode.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	durable, err := ReplaceFile(path, data, mode)
	if err != nil {
		return err
	}
	return durable()
}

// ReplaceFile is WriteFileAtomic in two steps: when it returns, the new file
// is in place, whole, for every reader, and durable (the directory's sync,
// which makes the rename survive a crash) finishes the job. Until durable
// returns, a crash leaves the old file or the new one, each whole. The
// applier signals OpenSM before the directory's sync, which then runs during
// OpenSM's sweep instead of before it, and waits for it before any job can
// complete. The file's own data is synced before the rename: a crash never
// leaves a partial file at path, for an OpenSM that may start from it.
func ReplaceFile(path string, data []byte, mode os.FileMode) (durable func() error, err error) {
	return replaceFile(path, data, mode, false)
}

// ReplaceFileSyncLate is ReplaceFile with the file's own sync in durable
// too, before the directory's: until durable returns, a crash (power loss)
// may leave an empty or partial file at path. Only for a file no program
// reads after a crash before its writer has written it again, synced
// (WriteFileAtomic): the partitions file of an OpenSM that only the manager
// starts, and always after writing the recorded state. durable must be
// called once, even when the file is not used: it closes the file.
func ReplaceFileSyncLate(path string, data []byte, mode os.FileMode) (durable func() error, err error) {
	return replaceFile(path, data, mode, true)
}

// fileSync is the file's fsync: a seam for the tests that see when it runs
// beside the rename.
var fileSync = (*os.File).Sync

func replaceFile(path string, data []byte, mode os.FileMode, late bool) (durable func() error, err error) {
	tmp, err := createTemp(path)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return replaceWith(tmp, path, data, mode, late)
}

// splitDir is path's directory ("." for a bare name) and base name.
func splitDir(path string) (dir, base string) {
	dir, base = filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return dir, base
}

// createTemp creates an empty temporary file beside path (mode 0600), given
// to the directory's owner (giveToDirOwner), with a name RemoveLeftTemps
// knows.
func createTemp(path string) (*os.File, error) {
	dir, base := splitDir(path)
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := giveToDirOwner(tmp, dir); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, nil
}

// replaceWith writes data to tmp, a temporary file of createTemp, and puts
// it at path (see replaceFile); on an error, tmp is closed and removed.
func replaceWith(tmp *os.File, path string, data []byte, mode os.FileMode, late bool) (durable func() error, err error) {
	dir, _ := splitDir(path)
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if !late {
		if err = fileSync(tmp); err != nil {
			return nil, fmt.Errorf("write %s: sync: %w", path, err)
		}
	}
	if err = tmp.Chmod(mode); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if late {
		return placeLate(tmp, path, dir)
	}
	if err = tmp.Close(); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return func() error {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("write %s: the file is in place but %w", path, err)
		}
		return nil
	}, nil
}

// placeLate puts tmp, written but not synced, at path, and returns the
// durable that syncs it, closes it and syncs dir. Where a file is at path,
// the two names are exchanged (renameat2's RENAME_EXCHANGE, as atomic for a
// reader as a rename) rather than tmp renamed over it: ext4 (auto_da_alloc)
// allocates and starts writing a file renamed over another before the rename
// returns, most of what the fsync cost, which the exchange leaves to durable;
// durable then removes the old file, now at tmp's name, first. Where there
// is no file at path yet, or the file system cannot exchange, tmp is renamed.
func placeLate(tmp *os.File, path, dir string) (durable func() error, err error) {
	exchanged := unix.Renameat2(unix.AT_FDCWD, tmp.Name(), unix.AT_FDCWD, path, unix.RENAME_EXCHANGE) == nil
	if !exchanged {
		if err := os.Rename(tmp.Name(), path); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return func() error {
		var errs []error
		if exchanged {
			if err := os.Remove(tmp.Name()); err != nil {
				errs = append(errs, fmt.Errorf("remove the file it replaced: %w", err))
			}
		}
		if err := fileSync(tmp); err != nil {
			errs = append(errs, fmt.Errorf("its sync: %w", err))
		}
		if err := tmp.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := syncDir(dir); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("write %s: the file is in place but %w", path, err)
		}
		return nil
	}, nil
}

// giveToDirOwner gives a file a root manager writes into a directory of
// another user to that user: config_dir is OpenSM's user's when [opensm]
// user is set (runas.go), and OpenSM reads opensm.conf (0600) and the
// partitions file there at every start and SIGHUP. Elsewhere, and from a
// manager that is not root, the file stays the writer's.
func giveToDirOwner(f *os.File, dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("stat the directory: %w", err)
	}
	if st.Uid == 0 {
		return nil
	}
	if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("give it to the directory's owner (uid %d): %w", st.Uid, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// RemoveLeftTemps removes the temporary files a writer of path killed
// mid-write left beside it: a file being written, or, after
// ReplaceFileSyncLate's exchange, the file it replaced, until its durable
// removes it. Only for a start, when nothing writes path.
func RemoveLeftTemps(path string) error {
	dir, base := splitDir(path)
	left, err := filepath.Glob(filepath.Join(dir, "."+base+".tmp-*"))
	if err != nil {
		return fmt.Errorf("find what a write of %s left: %w", path, err)
	}
	for _, f := range left {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s, left by a write of %s: %w", f, path, err)
		}
	}
	return nil
}

// Replacer replaces one file again and again as ReplaceFileSyncLate does,
// each time into a temporary file made ahead (Ready), off the path from a
// change to OpenSM's SIGHUP: creating a file is most of a small file's
// replacement (0.25 ms of 0.3 on ext4 without a journal, which looks at
// every inode freed in the last minutes before it takes one). The file made
// ahead is empty and hidden until a replacement has written it whole; a
// replacement uses it only while its name still names it (OpenSM's user
// owns the directory and could have put another file there), and creates
// one otherwise. Not safe for concurrent use.
type Replacer struct {
	path  string
	spare *os.File // made ahead, not written yet; nil: none
}

// NewReplacer returns a Replacer of the file at path, with no file made
// ahead yet.
func NewReplacer(path string) *Replacer { return &Replacer{path: path} }

// Replace is ReplaceFileSyncLate into the file made ahead, if any.
func (r *Replacer) Replace(data []byte, mode os.FileMode) (durable func() error, err error) {
	tmp := r.takeSpare()
	if tmp == nil {
		if tmp, err = createTemp(r.path); err != nil {
			return nil, fmt.Errorf("write %s: %w", r.path, err)
		}
	}
	return replaceWith(tmp, r.path, data, mode, true)
}

// Ready makes the temporary file of the next replacement, if none is made.
func (r *Replacer) Ready() error {
	if r.spare != nil {
		return nil
	}
	tmp, err := createTemp(r.path)
	if err != nil {
		return fmt.Errorf("make the next file of %s ahead: %w", r.path, err)
	}
	r.spare = tmp
	return nil
}

// takeSpare returns the file made ahead while its name still names it; one
// whose name names another file now is closed and left there.
func (r *Replacer) takeSpare() *os.File {
	f := r.spare
	r.spare = nil
	if f == nil {
		return nil
	}
	open, errOpen := f.Stat()
	named, errNamed := os.Lstat(f.Name())
	if errOpen != nil || errNamed != nil || !os.SameFile(open, named) {
		f.Close()
		return nil
	}
	return f
}

// Close closes and removes the file made ahead, if any.
func (r *Replacer) Close() error {
	f := r.spare
	r.spare = nil
	if f == nil {
		return nil
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the file of %s made ahead: %w", r.path, err)
	}
	return nil
}
