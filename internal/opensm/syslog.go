package opensm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OpenSM logs every option it loads, the keys included ("Loading Cached
// Option:sm_key = 0x..."), to syslog(3) as well as to its standard output;
// the manager filters the output (outputLogger), but syslog(3) goes straight
// to the socket /dev/log, into the journal or a log forwarder whose readers
// would then hold the keys that rewrite pkey tables. So OpenSM never runs
// where it can reach /dev/log:
//
//   - where the manager may make a mount namespace (CAP_SYS_ADMIN, no seccomp
//     filter against it), OpenSM gets one of its own with a private /dev: a
//     read-only tmpfs holding every entry of the real /dev bound in, but not
//     log. A /dev/log that appears later on the host does not appear there.
//   - elsewhere (the systemd unit, a container with its capabilities
//     dropped) OpenSM shares the manager's view, and is started only if
//     /dev/log cannot be reached from it: the unit hides it
//     (InaccessiblePaths=), and a container has none unless it is mounted in.
//     If it can be reached, OpenSM is not started, and the error says why.

// syslogSocket is where syslog(3) sends (glibc's _PATH_LOG).
const syslogSocket = "/dev/log"

// Seams for the tests of the unprivileged path (syslog_test.go): where
// syslog(3) would send, and the making of a mount namespace.
var (
	syslogPath        = syslogSocket
	newMountNamespace = func() error { return unix.Unshare(unix.CLONE_NEWNS) }
)

// errSyslogReachable is a start refused because OpenSM could reach syslog.
var errSyslogReachable = errors.New("OpenSM would reach syslog")

// isolateFromSyslog makes the calling thread, locked to it and never
// returned to the runtime's pool, a place from which OpenSM started by it
// cannot reach syslog: a mount namespace with a private /dev, or, when none
// can be made, the manager's own view if /dev/log is unreachable from it.
// nsErr says why no namespace was made (nil: the thread has one of its own,
// where runas.go hides the manager's files too).
func isolateFromSyslog() (nsErr, err error) {
	nsErr = newMountNamespace()
	if nsErr == nil {
		if err := privateDev(); err != nil {
			return nil, fmt.Errorf("opensm: give OpenSM a /dev without log: %w", err)
		}
		return nil, nil
	}
	if syslogReachable(syslogPath) {
		return nsErr, fmt.Errorf("%w at %s, where it logs its options with their keys, and the manager cannot give it a "+
			"/dev of its own (a mount namespace: %v); OpenSM is not started. Hide %s from the manager: the "+
			"systemd unit's InaccessiblePaths=%s, or no %s mounted into its container; or let it make a mount "+
			"namespace (CAP_SYS_ADMIN)", errSyslogReachable, syslogPath, nsErr, syslogPath, syslogPath, syslogPath)
	}
	return nsErr, nil
}

// syslogReachable says whether a syslog client could send to path: a
// datagram or stream socket someone listens on.
func syslogReachable(path string) bool {
	for _, network := range []string{"unixgram", "unix"} {
		if c, err := net.Dial(network, path); err == nil {
			c.Close()
			return true
		}
	}
	return false
}

// privateDev mounts, in the calling thread's new mount namespace, a tmpfs on
// /dev that holds every entry of the real /dev but log: directories (pts,
// shm, infiniband) and device nodes bound in, symbolic links copied. It is
// then made read-only, so that nothing creates a log there either.
func privateDev() error {
	// Mounts made here must not propagate back to the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave mount: %w", err)
	}
	entries, err := os.ReadDir("/dev")
	if err != nil {
		return err
	}
	// The real /dev stays reachable through this descriptor once the tmpfs
	// covers it: binds are made from /proc/self/fd/N/<entry>.
	real, err := unix.Open("/dev", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev: %w", err)
	}
	defer unix.Close(real)
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount a tmpfs on /dev: %w", err)
	}
	for _, e := range entries {
		if e.Name() == filepath.Base(syslogSocket) {
			continue
		}
		// A device removed since the listing (a hot-unplugged disk) is
		// not missed.
		if err := mirrorDevEntry(real, e); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := unix.Mount("", "/dev", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("make the private /dev read-only: %w", err)
	}
	return nil
}

// mirrorDevEntry puts e, an entry of the real /dev (open as real), into the
// private /dev.
func mirrorDevEntry(real int, e os.DirEntry) error {
	src := fmt.Sprintf("/proc/self/fd/%d/%s", real, e.Name())
	dst := filepath.Join("/dev", e.Name())
	switch {
	case e.Type()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case e.IsDir():
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
	default:
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind /dev/%s: %w", e.Name(), err)
	}
	return nil
}
