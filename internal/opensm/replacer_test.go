package opensm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Replacer puts each new file at path from the file it made ahead (Ready),
// written whole before it takes the name, while that file's name still names
// it; otherwise it makes a new one, and leaves whatever another writer put
// at the name where it is. Close removes the file made ahead.
func TestReplacer(t *testing.T) {
	tests := []struct {
		name string
		// meanwhile runs between Ready and Replace, on the file made ahead.
		meanwhile func(t *testing.T, spare string)
		usesSpare bool
		left      string // what stays at the spare's name after Replace and its durable; "": nothing
	}{
		{"made ahead", func(*testing.T, string) {}, true, ""},
		{"removed meanwhile", func(t *testing.T, spare string) {
			if err := os.Remove(spare); err != nil {
				t.Fatal(err)
			}
		}, false, ""},
		{"replaced meanwhile (OpenSM's user owns the directory)", func(t *testing.T, spare string) {
			other := spare + ".other"
			if err := os.WriteFile(other, []byte("theirs\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, spare); err != nil {
				t.Fatal(err)
			}
		}, false, "theirs\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "partitions.conf")
			if err := WriteFileAtomic(path, []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := NewReplacer(path)
			if err := r.Ready(); err != nil {
				t.Fatal(err)
			}
			spare := r.spare.Name()
			held, err := os.Open(spare) // its inode is not freed (and reused) meanwhile
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			spareFile, err := held.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if got := spareFile.Mode().Perm(); got != 0o600 || spareFile.Size() != 0 {
				t.Errorf("the file made ahead: mode %v, %d bytes; want 0600, empty", got, spareFile.Size())
			}
			tt.meanwhile(t, spare)
			durable, err := r.Replace([]byte("new\n"), 0o644)
			if err != nil {
				t.Fatal(err)
			}
			placed, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != "new\n" || placed.Mode().Perm() != 0o644 {
				t.Errorf("path holds %q (mode %v), %v; want the new file, 0644", got, placed.Mode().Perm(), err)
			}
			if os.SameFile(placed, spareFile) != tt.usesSpare {
				t.Errorf("the new file is the one made ahead: %v, want %v", !tt.usesSpare, tt.usesSpare)
			}
			if err := durable(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(spare)
			if tt.left == "" && !os.IsNotExist(err) || tt.left != "" && string(got) != tt.left {
				t.Errorf("at the spare's name after the replacement: %q, %v; want %q", got, err, tt.left)
			}
			if tt.left != "" {
				os.Remove(spare)
			}
			assertOnlyFiles(t, dir, "partitions.conf")
			if err := r.Ready(); err != nil { // the next one, removed at the end
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			assertOnlyFiles(t, dir, "partitions.conf")
		})
	}
}

// The file made ahead has the name RemoveLeftTemps removes at a start, after
// a kill left it.
func TestReplacerFileMadeAheadIsALeftTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "partitions.conf")
	r := NewReplacer(path)
	if err := r.Ready(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(r.spare.Name()), ".partitions.conf.tmp-") {
		t.Errorf("made ahead as %s", r.spare.Name())
	}
	r.spare.Close() // killed
	if err := RemoveLeftTemps(path); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("left %v, %v", entries, err)
	}
}
