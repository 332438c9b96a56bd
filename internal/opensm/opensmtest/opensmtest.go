// Package opensmtest gives tests of the OpenSM supervisor's callers a real child
// process to supervise where the real OpenSM and a simulated fabric are more
// than the test needs: the stand-in logs OpenSM's version line, as OpenSM
// does once it may be signalled, counts its starts, and runs until it is
// signalled. Whether it runs is read from the kernel (/proc), never from the
// supervisor's own account, so a test sees an OpenSM the supervisor forgot.
package opensmtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// StandIn is a stand-in OpenSM in its own directory.
type StandIn struct {
	Command []string // what [opensm] command would be
	LogFile string   // its log: the version line at every start
	starts  string
}

// NewStandIn writes the stand-in's script into a temporary directory.
func NewStandIn(t testing.TB) *StandIn {
	t.Helper()
	dir := t.TempDir()
	s := &StandIn{LogFile: filepath.Join(dir, "opensm.log"), starts: filepath.Join(dir, "starts")}
	script := filepath.Join(dir, "opensm")
	// exec: the supervisor's SIGTERM and SIGKILL reach the sleep itself.
	text := fmt.Sprintf("#!/bin/sh\necho $$ >>%q\necho 'Dec 01 06:00:00 000001 [00000001] 0x03 -> OpenSM 3.3.23' >>%q\nexec sleep 3600\n",
		s.starts, s.LogFile)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.LogFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.Command = []string{"/bin/sh", script}
	return s
}

// Starts returns the process IDs of every stand-in started so far, in order.
func (s *StandIn) Starts(t testing.TB) []int {
	t.Helper()
	b, err := os.ReadFile(s.starts)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err != nil {
			t.Fatalf("starts file: %v", err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// Running returns the stand-ins that run now (a zombie does not).
func (s *StandIn) Running(t testing.TB) []int {
	t.Helper()
	var running []int
	for _, pid := range s.Starts(t) {
		if Alive(pid) {
			running = append(running, pid)
		}
	}
	return running
}

// Alive says whether pid runs; a zombie (dead, not yet reaped) does not.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && !bytes.HasPrefix(stat[i+1:], []byte(" Z"))
}

// Append appends text to the OpenSM log at path, creating it, as OpenSM
// writes its log: at the end, whatever was written or cut before. A fake
// OpenSM, which writes outside the test's goroutine, reports the error.
func Append(path, text string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(text)
	return err
}

// AppendLog is Append in the test's goroutine: it fails the test on error.
func AppendLog(t testing.TB, path, text string) {
	t.Helper()
	if err := Append(path, text); err != nil {
		t.Fatal(err)
	}
}
