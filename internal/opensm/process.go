package opensm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
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
	// CacheDir, if set, is OpenSM's cache directory (OSM_CACHE_DIR: guid2lid,
	// guid2mkey), unless the environment file names its own. See WithCacheDir.
	CacheDir string
	// LogFile is OpenSM's log_file. OpenSM is ready (safe to signal) once it
	// has written its version line there.
	LogFile string
	// StatusFile, if set, receives the supervisor's Status as JSON at every
	// change, for --status, which runs in another process.
	StatusFile string
	Logger     *slog.Logger // nil: slog.Default()
}

// NewProcess returns a Supervisor of OpenSM run as the manager's child
// process, which does nothing until Start is called. OpenSM dies with the
// manager (SIGKILL from the kernel, see processRunner.start), runs in its own
// process group so that a Ctrl-C meant for the manager does not reach it, its
// output is filtered (see outputLogger), and it never runs where it could
// reach syslog, which would get its keys (syslog.go).
//
// Never send OpenSM SIGCONT: it treats it exactly like SIGHUP, so a shell's job
// control would trigger unplanned sweeps.
func NewProcess(c ProcessConfig) *Supervisor {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	s := NewSupervisor(&processRunner{cfg: c}, SupervisorConfig{LogFile: c.LogFile, StatusFile: c.StatusFile,
		Logger: c.Logger})
	if len(c.Command) == 0 {
		s.invalid = errors.New("opensm: no command configured")
	}
	return s
}

// processRunner starts OpenSM as the manager's child.
type processRunner struct {
	cfg ProcessConfig // its Logger is set
}

// process is one run of OpenSM as the manager's child.
type process struct {
	proc *os.Process
	done chan struct{} // closed once it has exited and been reaped
	exit string        // how it ended, once done is closed
}

func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Exit() string          { return p.exit }
func (p *process) PID() int              { return p.proc.Pid }
func (p *process) LogAttrs() []any       { return []any{"pid", p.proc.Pid} }
func (p *process) String() string        { return fmt.Sprintf("pid %d", p.proc.Pid) }

// Signal signals through a pidfd: a reaped OpenSM's PID reused by another
// process is never hit.
func (p *process) Signal(_ context.Context, sig syscall.Signal) error { return p.proc.Signal(sig) }
func (p *process) Kill(context.Context) error                         { return p.proc.Kill() }

// Start starts one OpenSM with the environment file's variables.
func (r *processRunner) Start(context.Context) (Instance, error) {
	env, err := r.environment()
	if err != nil {
		return nil, err
	}
	return r.start(env)
}

func (r *processRunner) environment() ([]string, error) {
	var extra []string
	if r.cfg.EnvFile != "" {
		var err error
		if extra, err = ReadEnvFile(r.cfg.EnvFile); err != nil {
			return nil, fmt.Errorf("opensm: %w", err)
		}
	}
	extra, err := WithCacheDir(r.cfg.CacheDir, extra)
	if err != nil {
		return nil, err
	}
	return append(os.Environ(), extra...), nil // later entries win
}

// start starts one OpenSM.
//
// SysProcAttr.Pdeathsig kills the child when the OS thread that forked it
// exits, not when the process does: Go may retire the thread of a goroutine
// that returned, which would kill a healthy OpenSM. So the goroutine that forks
// OpenSM locks itself to its thread and stays there, blocked in Wait, until
// OpenSM has exited. It never unlocks: the runtime then ends that thread, which
// no longer matters.
func (r *processRunner) start(env []string) (*process, error) {
	args := slices.Clone(r.cfg.Command[1:])
	if r.cfg.ConfFile != "" {
		args = append(args, "-F", r.cfg.ConfFile)
	}
	inst := &process{done: make(chan struct{})}
	stdout := &outputLogger{log: r.cfg.Logger, stream: "stdout"}
	stderr := &outputLogger{log: r.cfg.Logger, stream: "stderr"}
	started := make(chan error, 1)

	go func() {
		runtime.LockOSThread()
		// In this thread only, which is never unlocked: see syslog.go.
		if err := isolateFromSyslog(); err != nil {
			started <- err
			return
		}
		cmd := exec.Command(r.cfg.Command[0], args...)
		cmd.Dir = r.cfg.Dir
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
		started <- nil

		err := cmd.Wait()
		stdout.Flush()
		stderr.Flush()
		inst.exit = exitStatus(cmd.ProcessState, err)
		close(inst.done)
	}()

	if err := <-started; err != nil {
		return nil, fmt.Errorf("opensm: start %s: %w", r.cfg.Command[0], err)
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
