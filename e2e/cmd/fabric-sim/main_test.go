package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, args, &out)
	return out.String(), err
}

// start leaves ibsim running after the command returns; stop, in another
// invocation, finds it through the directory.
func TestStartQueryStop(t *testing.T) {
	dir := t.TempDir()
	out, err := runCLI(t, "start", dir, "--hosts", "3", "--switches", "2")
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "ibsim.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	t.Cleanup(func() { runCLI(t, "stop", dir) }) // if the test fails half-way
	for _, want := range []string{"env file: " + filepath.Join(dir, "env"), "0x0002c90300000201 H2 on S2 port 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("start output lacks %q:\n%s", want, out)
		}
	}

	out, err = runCLI(t, "guids", dir)
	want := "0x0002c90300000101 H1\n0x0002c90300000201 H2\n0x0002c90300000301 H3\n"
	if err != nil || out != want {
		t.Errorf("guids: %q, %v; want %q", out, err, want)
	}
	if out, err := runCLI(t, "sim", dir, "help"); err != nil || !strings.Contains(out, "ReLink") {
		t.Errorf("sim help: %q, %v", out, err)
	}
	if out, err := runCLI(t, "run", dir, "smpquery", "-D", "nodeinfo", "0"); err != nil || !strings.Contains(out, "0x0002c90300a00001") {
		t.Errorf("run smpquery: %q, %v", out, err)
	}
	// No SM has run, so there are no LIDs to address a port by.
	if _, err := runCLI(t, "pkeys", dir, "0x0002c90300000101"); err == nil || !strings.Contains(err.Error(), "guid2lid") {
		t.Errorf("pkeys without an SM: %v, want an error about the LID cache", err)
	}

	if out, err := runCLI(t, "stop", dir); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "env")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("env file still there after stop: %v", err)
	}
	if alive(pid) {
		t.Errorf("ibsim %d still runs after stop", pid)
	}
	if out, err := runCLI(t, "stop", dir); err != nil || !strings.Contains(out, "nothing running") {
		t.Errorf("second stop: %q, %v", out, err)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"start"},
		{"frobnicate", "dir"},
		{"start", "dir", "--hosts", "0"},
		{"start", "dir", "extra"},
		{"sim", "dir"},
		{"pkeys", "dir"},
		{"pkeys", "dir", "0x1", "--sideways"},
	} {
		if _, err := runCLI(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want the usage", args, err)
		}
	}
}

// alive says whether pid runs; a zombie does not count.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && !bytes.HasPrefix(stat[i+1:], []byte(" Z"))
}
