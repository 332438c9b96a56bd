package manager

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
)

// The files the manager writes hold OpenSM's keys (the SQLite database and
// opensm.conf) or say how OpenSM runs (config_dir): they are the manager's
// user's alone, whatever the umask.

// privateDir creates dir 0700, or makes an existing one 0700.
func privateDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		log.Warn("making the directory private to the manager's user", "dir", dir, "was", fi.Mode().Perm().String())
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// privateSQLite creates the SQLite database file 0600 before the driver does
// (it would use 0644), and makes an existing one and its journal files 0600.
func privateSQLite(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create the database file: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}
