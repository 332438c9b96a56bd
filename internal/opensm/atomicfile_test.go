package opensm

import (
	"golang.org/x/sys/unix"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomicCreatesWithMode(t *testing.T) {
	for _, mode := range []os.FileMode{0o600, 0o644} {
		path := filepath.Join(t.TempDir(), "opensm.conf")
		if err := WriteFileAtomic(path, []byte("sa_key 0x1\n"), mode); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != "sa_key 0x1\n" {
			t.Fatalf("content %q, %v", got, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("mode %v, want %v", fi.Mode().Perm(), mode)
		}
		assertOnlyFiles(t, filepath.Dir(path), "opensm.conf")
	}
}

// A reader that opened the old file keeps reading the old file whole: the new
// one is another inode, renamed over the name.
func TestWriteFileAtomicReplacesWithoutTouchingOpenReaders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "partitions.conf")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()

	if err := WriteFileAtomic(path, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := io.ReadAll(reader)
	if err != nil || string(old) != "old\n" {
		t.Errorf("open reader got %q, %v; want the old content", old, err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new\n" {
		t.Errorf("file holds %q, %v; want the new content", got, err)
	}
	assertOnlyFiles(t, dir, "partitions.conf")
}

func TestWriteFileAtomicFailureLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	// A directory in the way: the rename fails.
	if err := os.Mkdir(filepath.Join(dir, "partitions.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "partitions.conf"), []byte("x"), 0o644); err == nil {
		t.Fatal("no error renaming over a directory")
	}
	assertOnlyFiles(t, dir, "partitions.conf")

	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Error("no error writing into a missing directory")
	}
}

func assertOnlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("directory holds %q, want %q", got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("directory holds %q, want %q", got, names)
		}
	}
}

// ReplaceFile puts the whole new file in place before the directory's sync:
// a reader sees it as soon as ReplaceFile returns, before durable is called.
func TestReplaceFileIsInPlaceBeforeTheDirectorySync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "partitions.conf")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	durable, err := ReplaceFile(path, []byte("new\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "new\n" {
		t.Errorf("before the directory's sync the file holds %q, %v; want the new content", got, err)
	}
	assertOnlyFiles(t, dir, "partitions.conf")
	if err := durable(); err != nil {
		t.Errorf("durable: %v", err)
	}
	// The directory gone before its sync: the error says the file was placed.
	path = filepath.Join(t.TempDir(), "sub", "partitions.conf")
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if durable, err = ReplaceFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	if err := durable(); err == nil {
		t.Error("durable of a removed directory: no error")
	}
}

// The file's sync runs before the rename in ReplaceFile and WriteFileAtomic
// (at the sync, path still holds the old file: a crash then leaves the old
// file whole), and after it, in durable, in ReplaceFileSyncLate (path holds
// the new file, which a crash before durable returns may leave empty).
func TestTheFileSyncBesideTheRename(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace func(path string, data []byte) (func() error, error)
		atSync  string // what path holds when the file is synced
		beforeD bool   // the file is synced before durable is called
	}{
		{"ReplaceFile", func(p string, d []byte) (func() error, error) { return ReplaceFile(p, d, 0o644) }, "old\n", true},
		{"WriteFileAtomic", func(p string, d []byte) (func() error, error) {
			return func() error { return nil }, WriteFileAtomic(p, d, 0o644)
		}, "old\n", true},
		{"ReplaceFileSyncLate", func(p string, d []byte) (func() error, error) { return ReplaceFileSyncLate(p, d, 0o600) },
			"new\n", false},
		{"ReplaceFileSyncLate, no file yet", func(p string, d []byte) (func() error, error) {
			if err := os.Remove(p); err != nil {
				return nil, err
			}
			return ReplaceFileSyncLate(p, d, 0o600)
		}, "new\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "partitions.conf")
			if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var seen []string
			fileSync = func(f *os.File) error {
				got, err := os.ReadFile(path)
				if err != nil {
					t.Error(err)
				}
				seen = append(seen, string(got))
				return f.Sync()
			}
			defer func() { fileSync = (*os.File).Sync }()
			durable, err := tc.replace(path, []byte("new\n"))
			if err != nil {
				t.Fatal(err)
			}
			if synced := len(seen) == 1; synced != tc.beforeD {
				t.Errorf("synced before durable: %v, want %v", synced, tc.beforeD)
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != "new\n" {
				t.Errorf("before durable the file holds %q, %v; want the new content", got, err)
			}
			if err := durable(); err != nil {
				t.Fatal(err)
			}
			if len(seen) != 1 || seen[0] != tc.atSync {
				t.Errorf("the file's syncs saw %q at the path, want one seeing %q", seen, tc.atSync)
			}
			assertOnlyFiles(t, filepath.Dir(path), "partitions.conf")
		})
	}
}

// ReplaceFileSyncLate's durable reports the file's sync failing, and closes
// the file all the same.
func TestReplaceFileSyncLateReportsTheFileSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "partitions.conf")
	var synced *os.File
	fileSync = func(f *os.File) error { synced = f; return os.ErrClosed }
	defer func() { fileSync = (*os.File).Sync }()
	durable, err := ReplaceFileSyncLate(path, []byte("new\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := durable(); err == nil {
		t.Error("durable: no error when the file's sync failed")
	}
	if err := synced.Close(); err == nil {
		t.Error("the file is still open after durable")
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "new\n" {
		t.Errorf("file holds %q, %v", got, err)
	}
}

// ReplaceFileSyncLate exchanges the new file with the old one, which a
// reader that opened it keeps reading whole, and which durable removes.
func TestReplaceFileSyncLateExchangesAndRemovesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "partitions.conf")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	durable, err := ReplaceFileSyncLate(path, []byte("new\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Where the file system cannot exchange, the fallback renames: the old
	// file is gone at once, and only the new one is there.
	if want := map[bool]int{true: 2, false: 1}[canExchange(t)]; len(entries) != want {
		t.Fatalf("%d entries after the write, want %d (the file system exchanges: %v)", len(entries), want, want == 2)
	}
	for _, e := range entries {
		if e.Name() == "partitions.conf" {
			continue
		}
		if got, err := os.ReadFile(filepath.Join(dir, e.Name())); err != nil || string(got) != "old\n" {
			t.Errorf("%s holds %q, %v; want the old file", e.Name(), got, err)
		}
	}
	if err := durable(); err != nil {
		t.Fatal(err)
	}
	old, err := io.ReadAll(reader)
	if err != nil || string(old) != "old\n" {
		t.Errorf("open reader got %q, %v; want the old content", old, err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "new\n" {
		t.Errorf("file holds %q, %v; want the new content", got, err)
	}
	assertOnlyFiles(t, dir, "partitions.conf")
}

// canExchange says whether the file system of a test's temporary directory
// exchanges two names (renameat2's RENAME_EXCHANGE), tried on files of its
// own.
func canExchange(t *testing.T) bool {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE) == nil
}
