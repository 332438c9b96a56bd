package opensm

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestOutputLoggerDropsKeysAndGradesErrors(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	stdout := &outputLogger{log: log, stream: "stdout"}
	stderr := &outputLogger{log: log, stream: "stderr"}

	// What OpenSM prints at start, cut at awkward places.
	for _, chunk := range []string{
		"-------------------------------------------------\nOpenSM 3.3.23\n Loading Cached Option:sa_",
		"key = 0x5eC7e7000000a001\n Loading Cached Option:m_key_lookup = TRUE\n",
		" Loading Cached Option:guid = 0x0002c90300a00001\n\nEntering MASTER state\n",
		// A key in upper case, as UFM's opensm.conf has them (an imported key).
		" Loading Cached Option:m_key = 0x00C0FFEE5EC7E7A3\n",
		// OpenSM quotes a value it cannot read.
		"-E- Parsing error in field sa_key, expected numeric input received: 0x5ec7e7000000a0zz\n",
		" Loading Cached Option:SM_KEY = 0x5ec7e7000000a002", // no newline: Flush logs it
	} {
		stdout.Write([]byte(chunk))
	}
	stdout.Flush()
	stderr.Write([]byte("PARSE ERROR: line 2: bad PortGUID\nsome notice\n"))

	got := buf.String()
	for _, secret := range []string{"5eC7e7000000a001", "5ec7e7000000a002", "C0FFEE5EC7E7A3", "5ec7e7000000a0zz", "m_key_lookup", "_key", "KEY"} {
		if strings.Contains(got, secret) {
			t.Errorf("log contains %q:\n%s", secret, got)
		}
	}
	wantLines := []string{
		`level=DEBUG msg="opensm output" stream=stdout line="OpenSM 3.3.23"`,
		`level=DEBUG msg="opensm output" stream=stdout line="Loading Cached Option:guid = 0x0002c90300a00001"`,
		`level=DEBUG msg="opensm output" stream=stdout line="Entering MASTER state"`,
		`level=WARN msg="opensm output" stream=stderr line="PARSE ERROR: line 2: bad PortGUID"`,
		`level=DEBUG msg="opensm output" stream=stderr line="some notice"`,
	}
	for _, want := range wantLines {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n"); n != len(wantLines) {
		t.Errorf("%d records, want %d (separator and blank lines are dropped):\n%s", n, len(wantLines), got)
	}
}
