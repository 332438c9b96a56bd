package opensm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// positionToken marks, in the fixtures, where the manager took its position.
const positionToken = "<<<position>>>"

// loadFixture returns a testdata log without its position token, and the
// token's offset. A token alone on its line goes with its newline.
func loadFixture(t testing.TB, name string) (log []byte, offset int64) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(positionToken))
	if i < 0 {
		t.Fatalf("%s has no %s token", name, positionToken)
	}
	end := i + len(positionToken)
	if (i == 0 || data[i-1] == '\n') && end < len(data) && data[end] == '\n' {
		end++
	}
	return append(data[:i:i], data[end:]...), int64(i)
}

// writeFixture writes the fixture to a temporary file and returns its path and
// the position the token marks.
func writeFixture(t *testing.T, name string) (string, Position) {
	t.Helper()
	log, offset := loadFixture(t, name)
	path := filepath.Join(t.TempDir(), "opensm.log")
	if err := os.WriteFile(path, log, 0o644); err != nil {
		t.Fatal(err)
	}
	pos, err := LogPosition(path)
	if err != nil {
		t.Fatal(err)
	}
	pos.Offset = offset
	return path, pos
}
