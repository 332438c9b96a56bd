package opensm

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenSM is C that parses every tenant's SA and SMP traffic. Run as the
// manager's user it could read the manager's configuration (the API token,
// the pkeys passwords, the database's password) and write the database. So
// with [opensm] user set, the process driver starts it:
//
//   - as that user (its uid, its primary group and its supplementary groups,
//     such as the one the umad devices are given to), with every capability
//     dropped by the change of user;
//   - with an environment of its own: PATH and the locale, [opensm]
//     env_file's lines and OSM_CACHE_DIR, nothing else of the manager's;
//   - owning config_dir (and its cache and log), which the manager writes
//     into as root;
//   - in its own mount namespace (the one that already hides /dev/log), where
//     the directories of the manager's configuration file and of its SQLite
//     database are empty read-only tmpfs, OpenSM's own directories bound back
//     in. Where no namespace can be made, it starts only if the user cannot
//     read those files by their modes.

// RunAs is the user OpenSM runs as.
type RunAs struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups
}

// LookupUser resolves [opensm] user.
func LookupUser(name string) (*RunAs, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("opensm: user %q: %w (the package creates afm-opensm; or useradd --system it)", name, err)
	}
	r := &RunAs{Name: name}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("opensm: user %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("opensm: user %q: gid %q: %w", name, u.Gid, err)
	}
	r.UID, r.GID = uint32(uid), uint32(gid)
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("opensm: user %q: groups: %w", name, err)
	}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("opensm: user %q: group %q: %w", name, id, err)
		}
		if uint32(g) != r.GID {
			r.Groups = append(r.Groups, uint32(g))
		}
	}
	return r, nil
}

// switches says whether starting OpenSM as u changes its user: nil, or the
// manager's own uid, does not.
func (u *RunAs) switches() bool { return u != nil && int(u.UID) != os.Geteuid() }

// capsToSwitch are what starting OpenSM as another user takes: the change of
// uid and groups, signals to another user's process (SIGHUP applies a
// change), and handing config_dir to it.
var capsToSwitch = []struct {
	bit  int
	name string
}{{unix.CAP_SETUID, "CAP_SETUID"}, {unix.CAP_SETGID, "CAP_SETGID"}, {unix.CAP_KILL, "CAP_KILL"},
	{unix.CAP_CHOWN, "CAP_CHOWN"}}

// effectiveCaps reads the calling thread's effective capabilities; a seam
// for the test of a manager that lacks them.
var effectiveCaps = func() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, err
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32, nil
}

// CheckHandOver says why the manager could not hand OpenSM's files to u
// (the managed driver, whose engine switches the user): it needs CAP_CHOWN,
// and CAP_DAC_OVERRIDE to write into them once they are u's.
func CheckHandOver(u *RunAs) error {
	caps, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("opensm: user %s: read the manager's capabilities: %w", u.Name, err)
	}
	if caps&(1<<unix.CAP_CHOWN) == 0 || caps&(1<<unix.CAP_DAC_OVERRIDE) == 0 {
		return fmt.Errorf("opensm: [opensm] user = %s, but the manager cannot hand config_dir to it: it lacks "+
			"CAP_CHOWN or CAP_DAC_OVERRIDE (add them to its container), or leave [opensm] user unset", u.Name)
	}
	return nil
}

// checkSwitch says why the manager could not start OpenSM as u, so that a
// manager that cannot fails at its start, not at OpenSM's first restart.
func checkSwitch(u *RunAs) error {
	if !u.switches() {
		return nil
	}
	caps, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("opensm: user %s: read the manager's capabilities: %w", u.Name, err)
	}
	var missing []string
	for _, c := range capsToSwitch {
		if caps&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("opensm: [opensm] user = %s, but the manager (uid %d) cannot start OpenSM as another "+
			"user: it lacks %s. Run the manager as root with them (the systemd unit grants them), or leave "+
			"[opensm] user unset to run OpenSM as the manager's user", u.Name, os.Geteuid(), strings.Join(missing, ", "))
	}
	return nil
}

// checkHidden refuses a config_dir (OpenSM's, owned by its user) that holds
// or is one of the files OpenSM must not read: handing it over would hand
// them over.
func checkHidden(dir string, hide []string) error {
	for _, h := range hide {
		if within(filepath.Dir(h), dir) {
			return fmt.Errorf("opensm: [opensm] config_dir %s holds %s, which OpenSM's user must not read: "+
				"give OpenSM a directory of its own", dir, h)
		}
	}
	return nil
}

// within says whether path is dir or under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// hiddenDirs are the directories to cover in OpenSM's namespace: those of
// the hidden files, an outer one standing for those under it.
func hiddenDirs(hide []string) ([]string, error) {
	var dirs []string
	for _, h := range hide {
		d := filepath.Dir(h)
		if d == "/" {
			return nil, fmt.Errorf("opensm: cannot hide %s from OpenSM: it is in /", h)
		}
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b string) int { return len(a) - len(b) })
	var out []string
	for _, d := range dirs {
		if !slices.ContainsFunc(out, func(o string) bool { return within(d, o) }) {
			out = append(out, d)
		}
	}
	return out, nil
}

// hideDirs covers each of dirs, in the calling thread's mount namespace
// (made private by privateDev), with an empty read-only tmpfs; the
// directories of keep under one (OpenSM's config_dir, its cache, its log's
// directory) are bound back at their place.
func hideDirs(dirs, keep []string) error {
	for _, d := range dirs {
		var under []string
		for _, k := range keep {
			if within(k, d) && !slices.Contains(under, k) {
				under = append(under, k)
			}
		}
		if err := hideDir(d, under); err != nil {
			return fmt.Errorf("opensm: hide %s from OpenSM: %w", d, err)
		}
	}
	return nil
}

func hideDir(dir string, keep []string) error {
	fds := make(map[string]int, len(keep))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, k := range keep {
		fd, err := unix.Open(k, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", k, err)
		}
		fds[k] = fd
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount a tmpfs: %w", err)
	}
	for k, fd := range fds {
		if err := os.MkdirAll(k, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), k, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s back: %w", k, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, ""); err != nil {
		return fmt.Errorf("make the tmpfs read-only: %w", err)
	}
	return nil
}
