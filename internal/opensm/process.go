package opensm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
)

// ProcessConfig says how to run OpenSM as the manager's child.
type ProcessConfig struct {
	Command  []string // executable and leading arguments, e.g. ["opensm"]
	ConfFile string   // passed as -F ConfFile (see RenderConf)
	// EnvFile, if set, holds KEY=VALUE lines added to OpenSM's environment
	// (blank lines and # comments allowed). It is read at every start.
	EnvFile string
	Dir     string // working directory: the configuration directory
	// LogFile is OpenSM's log_file. OpenSM is ready (safe to signal) once it
	// has written its version line there.
	LogFile string
	Logger  *slog.Logger // nil: slog.Default()
}

// Restart policy: wait minBackoff after the first exit, doubling up to
// maxBackoff while OpenSM keeps exiting; an instance that ran for stableAfter
// resets it.
const (
	minBackoff  = time.Second
	maxBackoff  = 30 * time.Second
	stableAfter = time.Minute
	// stopTimeout is how long OpenSM gets to exit after SIGTERM before SIGKILL.
	stopTimeout = 10 * time.Second
)

// versionLine is the first line OpenSM logs ("OpenSM 3.3.23"), right after it
// has blocked the signals it handles. Before that a SIGHUP kills it.
var versionLine = regexp.MustCompile(`^OpenSM [0-9]\S*$`)

// Process runs OpenSM and restarts it when it exits. OpenSM dies with the
// manager (SIGKILL from the kernel, see start), runs in its own process group so
// that a Ctrl-C meant for the manager does not reach it, and its output is
// filtered (see outputLogger).
//
// Never send OpenSM SIGCONT: it treats it exactly like SIGHUP, so a shell's job
// control would trigger unplanned sweeps.
type Process struct {
	cfg ProcessConfig
	log *slog.Logger

	mu       sync.Mutex
	current  *instance // the OpenSM that runs now; nil between instances
	restarts int
	running  bool          // Run has been called
	finished bool          // Run has returned
	changed  chan struct{} // closed and replaced at every change of the fields above
}

// instance is one run of OpenSM.
type instance struct {
	proc  *os.Process
	ready bool          // its version line is in the log
	done  chan struct{} // closed once it has exited and been reaped
	exit  string        // how it ended, once done is closed
}

// NewProcess returns a Process that does nothing until Run is called.
func NewProcess(c ProcessConfig) *Process {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Process{cfg: c, log: log, changed: make(chan struct{})}
}

// notify wakes WaitReady callers; p.mu must be held.
func (p *Process) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Run starts OpenSM and keeps it running until ctx is done, then stops it
// (SIGTERM, and SIGKILL after 10 s) and returns nil. When OpenSM exits on its
// own it is started again after a back-off (1 s, doubling up to 30 s), and the
// exit status is logged. Run returns an error, leaving nothing running, when
// OpenSM cannot be started (no such program, unreadable environment file), at
// first or at a restart: retrying would not help, and the caller should say so.
func (p *Process) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("opensm: Run called twice")
	}
	p.running = true
	p.mu.Unlock()
	defer func() { // from here on WaitReady fails instead of waiting
		p.mu.Lock()
		p.finished = true
		p.notify()
		p.mu.Unlock()
	}()
	if len(p.cfg.Command) == 0 {
		return errors.New("opensm: no command configured")
	}
	if p.cfg.LogFile == "" {
		return errors.New("opensm: no log file configured (it shows when OpenSM is ready)")
	}

	backoff := minBackoff
	for {
		// The version line of this instance comes after this position. The
		// log is appended to across restarts (accum_log_file TRUE).
		from, err := LogPosition(p.cfg.LogFile)
		if err != nil {
			return fmt.Errorf("opensm: %w", err)
		}
		env, err := p.environment()
		if err != nil {
			return err
		}
		inst, err := p.start(env)
		if err != nil {
			return err
		}
		startedAt := time.Now()
		p.log.Info("OpenSM started", "pid", inst.proc.Pid)
		watchCtx, stopWatching := context.WithCancel(ctx)
		go p.watchReady(watchCtx, inst, from)

		select {
		case <-inst.done:
			stopWatching()
		case <-ctx.Done():
			stopWatching()
			p.stop(inst)
			p.log.Info("OpenSM stopped", "pid", inst.proc.Pid, "status", inst.exit)
			return nil
		}

		ran := time.Since(startedAt)
		if ran >= stableAfter {
			backoff = minBackoff
		}
		p.log.Warn("OpenSM exited; restarting it", "pid", inst.proc.Pid, "status", inst.exit,
			"ran", ran.Round(time.Millisecond), "restart_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
		p.mu.Lock()
		p.restarts++
		p.notify()
		p.mu.Unlock()
	}
}

func (p *Process) environment() ([]string, error) {
	env := os.Environ()
	if p.cfg.EnvFile == "" {
		return env, nil
	}
	extra, err := ReadEnvFile(p.cfg.EnvFile)
	if err != nil {
		return nil, fmt.Errorf("opensm: %w", err)
	}
	return append(env, extra...), nil // later entries win
}

// start starts one OpenSM and makes it the current instance.
//
// SysProcAttr.Pdeathsig kills the child when the OS thread that forked it
// exits, not when the process does: Go may retire the thread of a goroutine
// that returned, which would kill a healthy OpenSM. So the goroutine that forks
// OpenSM locks itself to its thread and stays there, blocked in Wait, until
// OpenSM has exited. It never unlocks: the runtime then ends that thread, which
// no longer matters.
func (p *Process) start(env []string) (*instance, error) {
	args := slices.Clone(p.cfg.Command[1:])
	if p.cfg.ConfFile != "" {
		args = append(args, "-F", p.cfg.ConfFile)
	}
	inst := &instance{done: make(chan struct{})}
	stdout := &outputLogger{log: p.log, stream: "stdout"}
	stderr := &outputLogger{log: p.log, stream: "stderr"}
	started := make(chan error, 1)

	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(p.cfg.Command[0], args...)
		cmd.Dir = p.cfg.Dir
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.WaitDelay = 5 * time.Second // do not hang on a pipe some grandchild kept open
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		inst.proc = cmd.Process
		p.mu.Lock()
		p.current = inst
		p.notify()
		p.mu.Unlock()
		started <- nil

		err := cmd.Wait()
		stdout.Flush()
		stderr.Flush()
		inst.exit = exitStatus(cmd.ProcessState, err)
		p.mu.Lock()
		if p.current == inst {
			p.current = nil
			p.notify()
		}
		p.mu.Unlock()
		close(inst.done)
	}()

	if err := <-started; err != nil {
		return nil, fmt.Errorf("opensm: start %s: %w", p.cfg.Command[0], err)
	}
	return inst, nil
}

func exitStatus(state *os.ProcessState, waitErr error) string {
	if state != nil {
		return state.String() // "exit status 1", "signal: killed"
	}
	if waitErr != nil {
		return waitErr.Error()
	}
	return "unknown"
}

// watchReady marks inst ready once its version line is in the log.
func (p *Process) watchReady(ctx context.Context, inst *instance, from Position) {
	follower := FollowLog(p.cfg.LogFile, from)
	defer follower.Close()
	for {
		e, err := follower.Next(ctx)
		if errors.Is(err, ErrLogReset) {
			continue // a log truncated at start still gets the version line
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("cannot follow OpenSM's log to see it start", "file", p.cfg.LogFile, "error", err)
			}
			return
		}
		if versionLine.MatchString(e.Message) {
			p.mu.Lock()
			inst.ready = true
			p.notify()
			p.mu.Unlock()
			p.log.Info("OpenSM ready", "pid", inst.proc.Pid, "version", e.Message)
			return
		}
	}
}

// stop sends SIGTERM, waits, and kills OpenSM if it does not exit in time.
func (p *Process) stop(inst *instance) {
	if err := inst.proc.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.log.Warn("cannot send SIGTERM to OpenSM", "pid", inst.proc.Pid, "error", err)
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-inst.done:
		return
	case <-t.C:
	}
	p.log.Warn("OpenSM ignored SIGTERM; killing it", "pid", inst.proc.Pid, "after", stopTimeout)
	if err := inst.proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.log.Error("cannot kill OpenSM", "pid", inst.proc.Pid, "error", err)
	}
	<-inst.done
}

// WaitReady waits until the current OpenSM has logged its version line, after
// which it is safe to signal. It returns an error once Run has returned.
func (p *Process) WaitReady(ctx context.Context) error {
	for {
		p.mu.Lock()
		if p.current != nil && p.current.ready {
			p.mu.Unlock()
			return nil
		}
		if p.finished {
			p.mu.Unlock()
			return errors.New("opensm: stopped")
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Reload sends SIGHUP, which makes OpenSM start a heavy sweep (re-reading
// opensm.conf, the per-module logging file and, as master, the partitions
// file). It refuses when OpenSM is not running or still starting: a SIGHUP
// before OpenSM has set up its signal handling kills it.
func (p *Process) Reload(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.current == nil:
		return errors.New("opensm: not running; no SIGHUP sent")
	case !p.current.ready:
		return errors.New("opensm: still starting; no SIGHUP sent (it could kill OpenSM)")
	}
	// os.Process signals through a pidfd: a reaped OpenSM's PID reused by
	// another process is never hit.
	if err := p.current.proc.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("opensm: SIGHUP to %d: %w", p.current.proc.Pid, err)
	}
	return nil
}

// Running says whether an OpenSM runs now.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current != nil
}

// PID returns the current OpenSM's process id, 0 when none runs.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current == nil {
		return 0
	}
	return p.current.proc.Pid
}

// Restarts counts how many times Run has started OpenSM again after it exited.
func (p *Process) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}
