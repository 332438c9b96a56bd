package opensm

import (
	"fmt"
	"os"
	"path/filepath"
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
func WriteFileAtomic(path string, data []byte, mode os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err = tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	if err = syncDir(dir); err != nil {
		return fmt.Errorf("write %s: the file is in place but %w", path, err)
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
