package opensm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// HandOver gives OpenSM's user its directories (config_dir, its cache) and
// its log, at every start (the process driver's and the managed one's): an older manager left them root's, and files the
// manager wrote since are given at their writing (WriteFileAtomic). Only
// what is not the user's already is changed. Entries are reached through
// descriptors opened without following symbolic links, one level down in
// each directory and two in config_dir (its cache), so that a link OpenSM
// planted in its own directory never has the manager chown anything else.
func HandOver(u *RunAs, dirs []string, files []string) error {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if err := chownTree(u, d); err != nil {
			return fmt.Errorf("opensm: give %s to user %s: %w", d, u.Name, err)
		}
	}
	for _, f := range files {
		err := unix.Fchownat(unix.AT_FDCWD, f, int(u.UID), int(u.GID), unix.AT_SYMLINK_NOFOLLOW)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("opensm: give %s to user %s: %w", f, u.Name, err)
		}
	}
	return nil
}

// chownTree chowns dir and what it holds, two levels down, through
// descriptors: dir itself is the manager's setting.
func chownTree(u *RunAs, dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return chownAt(u, fd, 2)
}

// chownAt chowns the directory open as fd and its entries, depth levels
// down.
func chownAt(u *RunAs, fd int, depth int) error {
	if err := chownFd(u, fd); err != nil {
		return err
	}
	if depth == 0 {
		return nil
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), "dir")
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := chownEntry(u, fd, name, depth); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func chownEntry(u *RunAs, dirfd int, name string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ignoreGone(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return ignoreGone(err)
		}
		defer unix.Close(sub)
		return chownAt(u, sub, depth-1)
	}
	if st.Uid == u.UID && st.Gid == u.GID {
		return nil
	}
	return ignoreGone(unix.Fchownat(dirfd, name, int(u.UID), int(u.GID), unix.AT_SYMLINK_NOFOLLOW))
}

func chownFd(u *RunAs, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Uid == u.UID && st.Gid == u.GID {
		return nil
	}
	return unix.Fchown(fd, int(u.UID), int(u.GID))
}

// ignoreGone: an entry removed since the listing (OpenSM rewrites its dumps)
// is not an error.
func ignoreGone(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// errReadable is a start refused because OpenSM's user could read a file it
// must not and no mount namespace could hide it.
var errReadable = errors.New("OpenSM's user could read")

// checkUnreadable refuses to start OpenSM as u where no mount namespace hides
// the manager's files: each must be out of u's reach by the modes of the file
// and of the directories above it.
func checkUnreadable(u *RunAs, hide []string, nsErr error) error {
	for _, h := range hide {
		if reachable(u, h) {
			return fmt.Errorf("%w %s (the manager's configuration or database), and the manager cannot hide it in "+
				"a mount namespace (%v); OpenSM is not started. Make it unreadable to user %s (chmod o-rwx, a "+
				"group %s is not in), or let the manager make a mount namespace (CAP_SYS_ADMIN)",
				errReadable, h, nsErr, u.Name, u.Name)
		}
	}
	return nil
}

// checkSearchable refuses to start OpenSM as u where it could not enter
// config_dir: a directory above it closed to others (a state directory
// 0700), which OpenSM's chdir would report only as "permission denied".
func checkSearchable(u *RunAs, dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil {
			return fmt.Errorf("opensm: config_dir: %w", err)
		}
		if !allows(u, &st, 0o1) {
			return fmt.Errorf("opensm: user %s cannot reach [opensm] config_dir %s: %s (mode %#o, owner uid %d) "+
				"is closed to it; let others search it (chmod o+x: 0711) or move config_dir",
				u.Name, dir, d, st.Mode&0o7777, st.Uid)
		}
		if d == "/" {
			return nil
		}
	}
}

// reachable says whether u may read or write path by its mode and its
// directories' search bits (root's override aside: u is not root).
func reachable(u *RunAs, path string) bool {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return false // nothing to read
	}
	if !allows(u, &st, 0o4) && !allows(u, &st, 0o2) {
		return false
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if err := syscall.Stat(d, &st); err != nil || !allows(u, &st, 0o1) {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// allows says whether st's mode grants u the access bits want (4 read, 2
// write, 1 search), as the kernel chooses the owner's, group's or others'.
func allows(u *RunAs, st *syscall.Stat_t, want uint32) bool {
	switch {
	case st.Uid == u.UID:
		return st.Mode>>6&want != 0
	case st.Gid == u.GID || slices.Contains(u.Groups, st.Gid):
		return st.Mode>>3&want != 0
	default:
		return st.Mode&want != 0
	}
}
