// Package managerproc runs the manager's binary as a child process, for what
// drives a manager from outside as an operator would: the end-to-end tests,
// the soak and the benchmark suite. Start returns once the manager serves;
// the process can then be signalled, killed or stopped, and its exit is
// observed once, by the package, so that any number of callers may wait for it.
package managerproc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Options say how to run one manager.
type Options struct {
	Binary string
	Args   []string // e.g. --config-file afm.conf
	// Env is the process's environment; nil inherits this process's.
	Env []string
	// Log receives the manager's output (stdout and stderr), appended.
	Log string
	// Serving says whether the manager serves yet; Start asks it every 50 ms.
	Serving func(ctx context.Context) error
	// Within is how long Start waits for Serving.
	Within time.Duration
}

// Process is one running (or exited) manager.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// Start runs the manager and waits until o.Serving says it serves. It fails
// if the manager exits first, or does not serve within o.Within; the process
// is then killed (nothing is left running), and the error names the log to read.
func Start(ctx context.Context, o Options) (*Process, error) {
	logFile, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("manager log: %w", err)
	}
	cmd := exec.Command(o.Binary, o.Args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = o.Env
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start manager: %w", err)
	}
	p := &Process{cmd: cmd, exited: make(chan struct{}), log: o.Log}
	go func() { cmd.Wait(); logFile.Close(); close(p.exited) }()
	if err := p.awaitServing(ctx, o.Serving, o.Within); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

func (p *Process) awaitServing(ctx context.Context, serving func(context.Context) error, within time.Duration) error {
	deadline := time.Now().Add(within)
	for serving(ctx) != nil {
		select {
		case <-p.exited:
			return fmt.Errorf("manager exited at start; see %s", p.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("manager not serving after %v; see %s", within, p.log)
		}
	}
	return nil
}

// Answers is a Serving that is satisfied by any answer of client at url (the
// manager's /healthz): the manager's API is up, whatever its health.
func Answers(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
}

// Pid is the manager's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the manager has exited and its log is closed.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitCode is the manager's exit status; -1 while it runs or if a signal
// ended it.
func (p *Process) ExitCode() int {
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Signal sends sig to the manager.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits until the manager has exited; it answers
// os.ErrProcessDone if the manager had already exited.
func (p *Process) Kill() error {
	err := p.cmd.Process.Kill()
	<-p.exited
	return err
}

// Stop ends the manager as its service manager would: SIGTERM, then SIGKILL
// if it has not exited within grace. It says whether the manager exited of
// itself.
func (p *Process) Stop(grace time.Duration) bool {
	select {
	case <-p.exited:
		return true
	default:
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}
