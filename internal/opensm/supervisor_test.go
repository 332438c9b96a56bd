package opensm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// An OpenSM that ignores SIGTERM is killed once its grace period is over, and
// the stop returns only once it is gone: a stopped term never leaves OpenSM on
// the fabric. The child is real; whether it runs is read from the kernel.
func TestSupervisorKillsAnOpenSMThatIgnoresSIGTERM(t *testing.T) {
	p, pid, logs := startScriptedOpenSM(t, "trap '' TERM")
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout+killTimeout)
	defer cancel()
	if err := p.StopTerm(ctx, 1); err != nil {
		t.Fatalf("StopTerm: %v", err)
	}
	if opensmtest.Alive(pid) {
		t.Errorf("OpenSM (pid %d) still runs after StopTerm returned", pid)
	}
	if st := p.Status(); st.State != StateStopped || st.PID != 0 {
		t.Errorf("Status() after the stop = %+v, want stopped with no PID", st)
	}
	if out := logs.String(); !strings.Contains(out, "OpenSM ignored SIGTERM; killing it") {
		t.Errorf("log does not say that OpenSM was killed:\n%s", out)
	}
}

// When the stop's time is up before OpenSM is gone, OpenSM is killed at once
// rather than after its grace period: with the HA lease, that time is the
// moment another manager may start its own OpenSM. One OpenSM ignores
// SIGTERM; the other handles it, as OpenSM does, but is stopped by SIGSTOP (a
// hung or frozen process): its handler cannot run until it is continued.
func TestSupervisorKillsAtOnceWhenTheStopsTimeIsUp(t *testing.T) {
	for _, tc := range []struct {
		name, trap string
		sigstop    bool
	}{
		{"ignores SIGTERM", "trap '' TERM", false},
		{"stopped by SIGSTOP", "trap 'exit 0' TERM", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, pid, logs := startScriptedOpenSM(t, tc.trap)
			if tc.sigstop {
				if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
			}
			// Far shorter than the grace period: the stop must not wait it out.
			ctx, cancel := context.WithTimeout(context.Background(), stopTimeout/10)
			defer cancel()
			if err := p.StopTerm(ctx, 1); err != nil {
				t.Fatalf("StopTerm: %v", err)
			}
			if opensmtest.Alive(pid) {
				t.Errorf("OpenSM (pid %d) still runs after StopTerm returned", pid)
			}
			if out := logs.String(); !strings.Contains(out, "the stop's time is up; killing it") {
				t.Errorf("log does not say that OpenSM was killed when the stop's time was up:\n%s", out)
			}
		})
	}
}

// startScriptedOpenSM starts, as the supervisor's OpenSM, a shell that runs
// trap, logs OpenSM's version line and waits for a sleeping child (so that
// the trap stays in force), and returns the supervisor, the shell's pid and
// the supervisor's log. The child is killed at the end of the test.
func startScriptedOpenSM(t *testing.T, trap string) (*Supervisor, int, *testenv.SyncBuffer) {
	t.Helper()
	dir := t.TempDir()
	logFile, pidFile, childFile, script := filepath.Join(dir, "opensm.log"), filepath.Join(dir, "pid"),
		filepath.Join(dir, "child"), filepath.Join(dir, "opensm")
	text := fmt.Sprintf("#!/bin/sh\n%s\necho $$ >%q\necho 'Dec 01 06:00:00 000001 [00000001] 0x03 -> OpenSM 3.3.23' >>%q\nsleep 3600 &\necho $! >%q\nwait\n",
		trap, pidFile, logFile, childFile)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if child, err := readPID(childFile); err == nil {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
	})
	logs := &testenv.SyncBuffer{}
	p := NewProcess(ProcessConfig{Command: []string{"/bin/sh", script}, LogFile: logFile,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	if err := p.Start(1); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	pid, err := readPID(pidFile)
	if err != nil || p.Status().PID != pid {
		t.Fatalf("pid file: %d, %v; status %+v", pid, err, p.Status())
	}
	return p, pid, logs
}

func readPID(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
