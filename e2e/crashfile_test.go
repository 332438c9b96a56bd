package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// TestNoOpenSMReadsAFileACrashLeftEmpty: with driver = process an apply
// syncs the partitions file during the sweep, so a crash (power loss) then
// may leave the file empty (its rename durable, its data not), which OpenSM
// reads as every port a full member of the default partition. Here the
// manager is killed and the file emptied, as such a crash could leave it,
// and the manager starts again: it puts the recorded state in place before
// OpenSM starts, so the file is never opened (by OpenSM's first sweep or
// anyone) before a whole one is renamed over it, as the directory's inotify
// events show. SQLite is enough: the start's order does not depend on the
// engine.
func TestNoOpenSMReadsAFileACrashLeftEmpty(t *testing.T) {
	m := startManager(t, storetest.NewDatabase(t, "sqlite"), 2)
	h1, h2 := m.fabric.Host("H1").PortGUID, m.fabric.Host("H2").PortGUID
	const netID = "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73"
	m.waitCompleted(m.accept("POST", "/cloudx/Network", fixture(t, "network_create_vlan.json")), nil)
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h1", netID, vendorClientID(h1))), nil)
	dir := filepath.Join(m.dir, "opensm")
	file := filepath.Join(dir, "partitions.conf")

	m.kill()
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	events := watchFile(t, dir, "partitions.conf")
	m.start()
	m.waitCompleted(m.accept("POST", "/cloudx/Port", portBody("port-h2", netID, vendorClientID(h2))), nil)
	if first := events(); len(first) == 0 || first[0] != "renamed over" {
		t.Errorf("the file's first events after the start: %q, want a rename over the empty file before any open", first)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, m.rendered()) {
		t.Errorf("the file after the start: %q, %v; want the rendered state", got, err)
	}
	if got := m.pkeys(h2); !slices.Contains(got, 0x8065) || slices.Contains(got, 0xffff) {
		t.Errorf("H2's pkey table %s: want 0x8065, never the default partition's full membership", hex(got))
	}
}

// watchFile takes down, from now, the opens of dir's file name and the
// renames over it (inotify on the directory); events returns what came so
// far, in order, and ends the watch.
func watchFile(t *testing.T, dir, name string) (events func() []string) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_OPEN|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return func() []string {
		defer unix.Close(fd)
		var seen []string
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return seen // EAGAIN: every event queued so far is read
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if string(bytes.TrimRight(nameBytes, "\x00")) != name {
					continue
				}
				if ev.Mask&unix.IN_MOVED_TO != 0 {
					seen = append(seen, "renamed over")
				} else {
					seen = append(seen, "opened")
				}
			}
		}
	}
}
