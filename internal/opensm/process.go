package opensm

import (
	"context"
	"encoding/json"
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
	// StatusFile, if set, receives the driver's status (DriverStatus as JSON)
	// at every change, for --status, which runs in another process.
	StatusFile string
	Logger     *slog.Logger // nil: slog.Default()
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

// Process supervises OpenSM for the manager's whole life: Start starts it once,
// it is restarted whenever it exits, and it keeps running across the
// applier's terms and database outages until Stop (the manager stops) or
// StopTerm (with the HA lease, the manager must leave the fabric to another);
// a stopped term never starts it again (TermLatch). OpenSM dies with the manager
// (SIGKILL from the kernel, see start), runs in its own process group so that a
// Ctrl-C meant for the manager does not reach it, its output is filtered
// (see outputLogger), and it never runs where it could reach syslog, which
// would get its keys (syslog.go).
//
// Never send OpenSM SIGCONT: it treats it exactly like SIGHUP, so a shell's job
// control would trigger unplanned sweeps.
type Process struct {
	cfg ProcessConfig
	log *slog.Logger

	mu        sync.Mutex
	current   *instance // the OpenSM that runs now; nil between instances
	restarts  int
	state     DriverState
	since     time.Time // of state
	lastErr   string
	lastErrAt time.Time
	cancel    context.CancelFunc // ends the supervisor; nil when none runs
	done      chan struct{}      // closed when the last supervisor started has returned
	latch     TermLatch          // the terms whose stop ran: never started again
	changed   chan struct{}      // closed and replaced at every change of the fields above
	seq       uint64             // counts changes, so the status file is never older than a write before it

	fileMu  sync.Mutex
	fileSeq uint64 // the change the status file shows
}

// DriverState is what the supervisor is doing.
type DriverState string

const (
	DriverStopped    DriverState = "stopped"    // not started, or stopped by Stop
	DriverStarting   DriverState = "starting"   // OpenSM runs but has not logged its version line yet
	DriverRunning    DriverState = "running"    // OpenSM runs and may be signalled
	DriverRestarting DriverState = "restarting" // OpenSM exited; it is started again after a back-off
	DriverFailed     DriverState = "failed"     // OpenSM could not be started; retried after a back-off
)

// DriverStatus is the supervisor's state for operators (--status, /readyz).
type DriverStatus struct {
	State     DriverState `json:"state"`
	PID       int         `json:"pid,omitempty"` // of the OpenSM that runs now
	Restarts  int         `json:"restarts"`      // times OpenSM was started again after it exited
	Since     time.Time   `json:"since"`         // when State was entered
	LastError string      `json:"last_error,omitempty"`
	// LastErrorAt is when LastError happened; zero when none did.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// instance is one run of OpenSM.
type instance struct {
	proc  *os.Process
	ready bool          // its version line is in the log
	done  chan struct{} // closed once it has exited and been reaped
	exit  string        // how it ended, once done is closed
}

// NewProcess returns a Process that does nothing until Start is called.
func NewProcess(c ProcessConfig) *Process {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	done := make(chan struct{})
	close(done)
	return &Process{cfg: c, log: log, changed: make(chan struct{}), done: done,
		state: DriverStopped, since: time.Now().UTC()}
}

// update changes the supervisor's fields under p.mu, wakes WaitReady callers,
// and writes the status file.
func (p *Process) update(change func()) {
	p.mu.Lock()
	change()
	close(p.changed)
	p.changed = make(chan struct{})
	p.seq++
	seq, st := p.seq, p.statusLocked()
	p.mu.Unlock()
	p.writeStatus(seq, st)
}

// setState must be called inside update.
func (p *Process) setState(s DriverState) {
	if p.state != s {
		p.state, p.since = s, time.Now().UTC()
	}
}

// setError records a driver error, which the caller has logged; inside update.
func (p *Process) setError(err string) {
	p.lastErr, p.lastErrAt = err, time.Now().UTC()
}

// Start starts supervising OpenSM for a leadership term unless it is
// supervised already, and returns at once: OpenSM is started, and started
// again after a back-off (1 s, doubling up to 30 s) whenever it exits or
// cannot be started; every exit and every failed start is logged and shows in
// Status. Start fails when the configuration can never start OpenSM, and with
// ErrTermStopped once StopTerm ran for term or a later one, or Stop ran: a
// stop is a latch that no later Start of the same term undoes (see
// TermLatch). A newer term starts OpenSM again after StopTerm.
func (p *Process) Start(term int64) error {
	if len(p.cfg.Command) == 0 {
		return errors.New("opensm: no command configured")
	}
	if p.cfg.LogFile == "" {
		return errors.New("opensm: no log file configured (it shows when OpenSM is ready)")
	}
	var refused error
	p.update(func() {
		if refused = p.latch.Allows(term); refused != nil || p.cancel != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		prev, done := p.done, make(chan struct{})
		p.cancel, p.done = cancel, done
		p.setState(DriverStarting)
		// A Stop that gave up waiting may have left the previous OpenSM
		// exiting: the new one starts once it is gone.
		go func() {
			defer close(done)
			<-prev
			p.supervise(ctx)
		}()
	})
	return refused
}

// StopTerm stops OpenSM at the end of term (SIGTERM, and SIGKILL after 10 s)
// and the supervisor, and waits until OpenSM has exited or ctx ends. The stop
// is latched before anything else: from then on no Start for term or an
// earlier term starts OpenSM, even when the wait below gives up. Stopping what
// is stopped only latches.
func (p *Process) StopTerm(ctx context.Context, term int64) error {
	return p.stop(ctx, func(l *TermLatch) { l.Stop(term) })
}

// Stop stops OpenSM for good (the manager is shutting down): as StopTerm, and
// every later Start is refused.
func (p *Process) Stop(ctx context.Context) error {
	return p.stop(ctx, (*TermLatch).StopForGood)
}

func (p *Process) stop(ctx context.Context, latch func(*TermLatch)) error {
	p.mu.Lock()
	latch(&p.latch)
	cancel, done := p.cancel, p.done
	p.cancel = nil
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("opensm: stop: %w", ctx.Err())
	}
}

// supervise runs OpenSM until ctx ends, then stops it.
func (p *Process) supervise(ctx context.Context) {
	defer p.update(func() { p.setState(DriverStopped) })
	backoff := minBackoff
	for ctx.Err() == nil {
		inst, err := p.startOne(ctx)
		if err != nil {
			p.log.Error("OpenSM could not be started; retrying", "error", err, "retry_in", backoff)
			p.update(func() { p.setState(DriverFailed); p.setError(err.Error()) })
		} else {
			startedAt := time.Now()
			select {
			case <-inst.done:
			case <-ctx.Done():
				p.stopInstance(inst)
				p.log.Info("OpenSM stopped", "pid", inst.proc.Pid, "status", inst.exit)
				return
			}
			ran := time.Since(startedAt)
			if ran >= stableAfter {
				backoff = minBackoff
			}
			p.log.Error("OpenSM exited; restarting it", "pid", inst.proc.Pid, "status", inst.exit,
				"ran", ran.Round(time.Millisecond), "restart_in", backoff)
			p.update(func() {
				p.setState(DriverRestarting)
				p.setError(fmt.Sprintf("OpenSM (pid %d) exited after %s: %s", inst.proc.Pid, ran.Round(time.Millisecond), inst.exit))
			})
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
		if err == nil {
			p.update(func() { p.restarts++ })
		}
	}
}

// startOne starts one OpenSM and watches for its version line.
func (p *Process) startOne(ctx context.Context) (*instance, error) {
	// The version line of this instance comes after this position. The log
	// is appended to across restarts (accum_log_file TRUE).
	from, err := LogPosition(p.cfg.LogFile)
	if err != nil {
		return nil, fmt.Errorf("opensm: %w", err)
	}
	env, err := p.environment()
	if err != nil {
		return nil, err
	}
	inst, err := p.start(env)
	if err != nil {
		return nil, err
	}
	p.log.Info("OpenSM started", "pid", inst.proc.Pid)
	watchCtx, stopWatching := context.WithCancel(ctx)
	go func() {
		defer stopWatching()
		select {
		case <-inst.done:
		case <-watchCtx.Done():
		}
	}()
	go p.watchReady(watchCtx, inst, from)
	return inst, nil
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
		// In this thread only, which is never unlocked: see syslog.go.
		if err := isolateFromSyslog(); err != nil {
			started <- err
			return
		}
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
		p.update(func() { p.current = inst; p.setState(DriverStarting) })
		started <- nil

		err := cmd.Wait()
		stdout.Flush()
		stderr.Flush()
		inst.exit = exitStatus(cmd.ProcessState, err)
		p.update(func() {
			if p.current == inst {
				p.current = nil
			}
		})
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
			p.update(func() {
				inst.ready = true
				if p.current == inst {
					p.setState(DriverRunning)
				}
			})
			p.log.Info("OpenSM ready", "pid", inst.proc.Pid, "version", e.Message)
			return
		}
	}
}

// stopInstance sends SIGTERM, waits, and kills OpenSM if it does not exit in time.
func (p *Process) stopInstance(inst *instance) {
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
// which it is safe to signal. It fails at once when OpenSM is not supervised
// (never started, or stopped) or its last start failed: waiting would not help.
func (p *Process) WaitReady(ctx context.Context) error {
	for {
		p.mu.Lock()
		switch {
		case p.current != nil && p.current.ready:
			p.mu.Unlock()
			return nil
		case p.cancel == nil:
			p.mu.Unlock()
			return errors.New("opensm: not started")
		case p.state == DriverFailed:
			err := p.lastErr
			p.mu.Unlock()
			return fmt.Errorf("opensm: not running: %s", err)
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

// Status reports what the supervisor does, and its last error.
func (p *Process) Status() DriverStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statusLocked()
}

func (p *Process) statusLocked() DriverStatus {
	st := DriverStatus{State: p.state, Restarts: p.restarts, Since: p.since, LastError: p.lastErr, LastErrorAt: p.lastErrAt}
	if p.current != nil {
		st.PID = p.current.proc.Pid
	}
	return st
}

// writeStatus writes st, the status after change seq, to the status file,
// unless a later change's status is there already.
func (p *Process) writeStatus(seq uint64, st DriverStatus) {
	if p.cfg.StatusFile == "" {
		return
	}
	p.fileMu.Lock()
	defer p.fileMu.Unlock()
	if seq <= p.fileSeq {
		return
	}
	p.fileSeq = seq
	b, _ := json.Marshal(st)
	if err := WriteFileAtomic(p.cfg.StatusFile, append(b, '\n'), 0o644); err != nil {
		p.log.Warn("write OpenSM's driver status", "file", p.cfg.StatusFile, "error", err)
	}
}

// ReadDriverStatus reads a status file written by a Process.
func ReadDriverStatus(path string) (DriverStatus, error) {
	var st DriverStatus
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// Restarts counts how many times the supervisor has started OpenSM again after it exited.
func (p *Process) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}
