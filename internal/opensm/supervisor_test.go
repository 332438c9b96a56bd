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
	dir := t.TempDir()
	logFile, pidFile, script := filepath.Join(dir, "opensm.log"), filepath.Join(dir, "pid"), filepath.Join(dir, "opensm")
	// exec keeps the ignored SIGTERM: sleep inherits it.
	text := fmt.Sprintf("#!/bin/sh\ntrap '' TERM\necho $$ >%q\necho 'Dec 01 06:00:00 000001 [00000001] 0x03 -> OpenSM 3.3.23' >>%q\nexec sleep 3600\n",
		pidFile, logFile)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	p := NewProcess(ProcessConfig{Command: []string{"/bin/sh", script}, LogFile: logFile,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	if err := p.Start(1); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p.Status().PID != pid {
		t.Fatalf("pid file %q, status %+v", b, p.Status())
	}

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
		{"ignores SIGTERM", "trap '' TERM\n", false},
		{"stopped by SIGSTOP", "trap 'exit 0' TERM\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			logFile, pidFile, script := filepath.Join(dir, "opensm.log"), filepath.Join(dir, "pid"), filepath.Join(dir, "opensm")
			// The shell waits for sleep, so that its trap stays in force; the
			// sleep is killed at the end.
			childFile := filepath.Join(dir, "child")
			text := fmt.Sprintf("#!/bin/sh\n%secho $$ >%q\necho 'Dec 01 06:00:00 000001 [00000001] 0x03 -> OpenSM 3.3.23' >>%q\nsleep 3600 &\necho $! >%q\nwait\n",
				tc.trap, pidFile, logFile, childFile)
			t.Cleanup(func() {
				if b, err := os.ReadFile(childFile); err == nil {
					if child, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
						_ = syscall.Kill(child, syscall.SIGKILL)
					}
				}
			})
			if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(logFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var logs testenv.SyncBuffer
			p := NewProcess(ProcessConfig{Command: []string{"/bin/sh", script}, LogFile: logFile,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			t.Cleanup(func() { _ = p.Stop(context.Background()) })
			if err := p.Start(1); err != nil {
				t.Fatal(err)
			}
			if err := p.WaitReady(t.Context()); err != nil {
				t.Fatal(err)
			}
			pid := p.Status().PID
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
