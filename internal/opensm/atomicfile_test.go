package opensm

import (
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
