package topology

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeTestdata copies testdata/name to path, as OpenSM writes its dump, and
// returns what it wrote.
func writeTestdata(t *testing.T, name, path string) []byte {
	t.Helper()
	content := readTestdata(t, name)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return content
}

// settle makes the file's times old enough for the Dump to trust them, as
// they are for a dump OpenSM wrote at its last sweep.
func settle(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func mustLoad(t *testing.T, d *Dump) *Topology {
	t.Helper()
	top, err := d.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return top
}

func switchNames(top *Topology) string {
	var names []string
	for _, sw := range top.Switches() {
		names = append(names, sw.Description)
	}
	return strings.Join(names, ",")
}

// settledDump writes the simulated fabric's dump into a directory of its own,
// as OpenSM wrote it a minute ago, and returns a Dump of it, its path, its
// content and the time it was settled at.
func settledDump(t *testing.T) (d *Dump, path string, content []byte, at time.Time) {
	t.Helper()
	path = filepath.Join(t.TempDir(), FileName)
	content = writeTestdata(t, "good/ibsim-5-hosts-2-switches.lst", path)
	at = time.Now().Add(-time.Minute)
	settle(t, path, at)
	return NewDump(path), path, content, at
}

func TestDumpParsesOnlyWhenTheContentChanges(t *testing.T) {
	d, path, content, _ := settledDump(t)
	first := mustLoad(t, d)
	for range 5 {
		if got := mustLoad(t, d); got != first {
			t.Fatal("an unchanged dump gave another topology")
		}
	}
	if n := d.Parses(); n != 1 {
		t.Errorf("unchanged file parsed %d times, want 1", n)
	}

	// OpenSM rewrites the file in place at every SUBNET UP, with the same
	// content while the fabric is the same: read again, not parsed again.
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, d); got != first {
		t.Error("a rewrite with the same content gave another topology")
	}
	if n := d.Parses(); n != 1 {
		t.Errorf("rewritten with the same content: parsed %d times, want 1", n)
	}

	// Another content is parsed, and its topology returned.
	other := readTestdata(t, "good/edge-cases.lst")
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := Parse(strings.NewReader(string(other)))
	if err != nil {
		t.Fatal(err)
	}
	got := mustLoad(t, d)
	if d.Parses() != 2 || switchNames(got) != switchNames(want) {
		t.Errorf("changed content: parses %d, switches %q; want 2 and %q", d.Parses(), switchNames(got), switchNames(want))
	}
}

// A file replaced by another of the same size and the same modification time
// is still another file: it is read and parsed.
func TestDumpReplacedWithSameSizeAndTime(t *testing.T) {
	d, path, content, old := settledDump(t)
	if n := len(mustLoad(t, d).Switches()); n != 2 {
		t.Fatalf("%d switches, want 2", n)
	}
	// The same bytes with switch S2 renamed S9: same size.
	renamed := strings.ReplaceAll(string(content), "{S2}", "{S9}")
	if len(renamed) != len(content) || renamed == string(content) {
		t.Fatal("fixture: the rename must keep the size and change the content")
	}
	tmp := filepath.Join(filepath.Dir(path), "new")
	if err := os.WriteFile(tmp, []byte(renamed), 0o644); err != nil {
		t.Fatal(err)
	}
	settle(t, tmp, old)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if got := switchNames(mustLoad(t, d)); got != "S1,S9" {
		t.Errorf("after the replacement: switches %q, want S1,S9", got)
	}
	if n := d.Parses(); n != 2 {
		t.Errorf("parsed %d times, want 2", n)
	}
}

// A dump caught half written fails, and the complete one read next time
// parses: a failure is never kept past a change of the file.
func TestDumpCutShortThenComplete(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	d := NewDump(path)
	if _, err := d.Load(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing dump: %v, want ErrNotExist", err)
	}
	content := readTestdata(t, "good/ibsim-5-hosts-2-switches.lst")
	if err := os.WriteFile(path, content[:len(content)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("half-written dump: %v, want a parse error", err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(mustLoad(t, d).Switches()); n != 2 {
		t.Errorf("%d switches, want 2", n)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed dump: %v, want ErrNotExist", err)
	}
}

// A file written within the racy window is compared by content at the next
// read even if its identity looks the same: here the identity cannot be
// forged, so the test checks that a fresh file is re-read (not re-parsed) and
// that a later change is seen.
func TestDumpFreshFileIsReadAgain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	content := readTestdata(t, "good/ibsim-5-hosts-2-switches.lst")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDump(path)
	first := mustLoad(t, d)
	d.mu.Lock()
	trusted := d.id != (fileID{})
	d.mu.Unlock()
	if trusted {
		t.Error("a file written just now is trusted by its times")
	}
	if got := mustLoad(t, d); got != first || d.Parses() != 1 {
		t.Errorf("fresh unchanged file: same topology %v, parses %d; want true, 1", got == first, d.Parses())
	}
	d.now = func() time.Time { return time.Now().Add(time.Minute) } // a minute later
	mustLoad(t, d)
	d.mu.Lock()
	trusted = d.id != (fileID{})
	d.mu.Unlock()
	if !trusted {
		t.Error("a file last written a minute ago is not trusted by its times")
	}
	if got := mustLoad(t, d); got != first || d.Parses() != 1 {
		t.Errorf("trusted unchanged file: same topology %v, parses %d; want true, 1", got == first, d.Parses())
	}
}

// A fresh dump read again and again (an apply reads it just after OpenSM
// rewrote it) reuses one buffer: comparing the content allocates nothing of
// its size, and a content that then changes is still seen, and parsed from
// what is on disk.
func TestDumpRereadReusesItsBuffer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	content := readTestdata(t, "good/ibsim-5-hosts-2-switches.lst")
	big := []byte(strings.Repeat(string(content), 200)) // the same links many times: 100s of kB
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDump(path)
	d.now = func() time.Time { return time.Now().Add(-time.Hour) } // every read within the racy window
	first := mustLoad(t, d)
	mustLoad(t, d) // the spare buffer's first use
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const reads = 10
	for range reads {
		if got := mustLoad(t, d); got != first {
			t.Fatal("an unchanged content gave another topology")
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc >= uint64(len(big)) {
		t.Errorf("%d reads of an unchanged %d-byte dump allocated %d bytes; want less than one file", reads, len(big), alloc)
	}
	if d.Parses() != 1 {
		t.Errorf("parsed %d times; want 1", d.Parses())
	}
	other := readTestdata(t, "good/ibsim-5-hosts-2-switches.lst")
	other = []byte(strings.Replace(string(other), "S1", "SX", -1))
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, d); got == first || !strings.Contains(switchNames(got), "SX") {
		t.Errorf("after a change: switches %q; want the new content's", switchNames(got))
	}
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, d); strings.Contains(switchNames(got), "SX") || d.Parses() != 3 {
		t.Errorf("back to the first content: switches %q, parses %d; want the first content's, 3", switchNames(got), d.Parses())
	}
}
