package opensm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	// User, if set and not the manager's own, is whom OpenSM runs as, in a
	// namespace where Hide's files are out of its reach (runas.go).
	User *RunAs
	// Hide are the files OpenSM's user must not read: the manager's
	// configuration file and its SQLite database.
	Hide   []string
	Logger *slog.Logger // nil: slog.Default()
}

// Check says why OpenSM could never be started as c says, so that the
// manager refuses to start rather than fail at OpenSM's first (re)start.
func (c ProcessConfig) Check() error {
	if len(c.Command) == 0 {
		return errors.New("opensm: no command configured")
	}
	if !c.User.switches() {
		return nil
	}
	if err := checkSwitch(c.User); err != nil {
		return err
	}
	return checkHidden(c.Dir, c.Hide)
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
	if err := c.Check(); err != nil {
		s.invalid = err
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

// Start starts one OpenSM with the environment file's variables, as its
// user when one is set, in its directories handed to that user.
func (r *processRunner) Start(context.Context) (Instance, error) {
	env, err := r.environment()
	if err != nil {
		return nil, err
	}
	if u := r.cfg.User; u.switches() {
		if err := HandOver(u, r.ownDirs(env), []string{r.cfg.LogFile}); err != nil {
			return nil, err
		}
	}
	return r.start(env)
}

// ownDirs are OpenSM's own directories: config_dir and its cache.
func (r *processRunner) ownDirs(env []string) []string {
	dirs := []string{r.cfg.Dir}
	if c := CacheDirOf(env); !within(c, r.cfg.Dir) {
		dirs = append(dirs, c)
	}
	return dirs
}

// keptEnv are the manager's variables OpenSM gets: where to find programs,
// and the locale. Nothing else of the manager's environment, which may hold
// whatever its service manager or container was given, reaches OpenSM.
var keptEnv = []string{"PATH", "TZ", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"}

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
	var env []string
	for _, k := range keptEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...), nil // later entries win
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
		if err := r.confine(env); err != nil {
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
		if u := r.cfg.User; u.switches() {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
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

// confine makes the calling thread, locked and never returned to the
// runtime's pool, a place to start OpenSM from: one where it cannot reach
// syslog (syslog.go) and, with a user of its own, cannot reach the
// manager's files (runas.go), and where it inherits none of the manager's
// ambient capabilities (the systemd unit gives the manager some, per thread).
func (r *processRunner) confine(env []string) error {
	nsErr, err := isolateFromSyslog()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("opensm: drop the ambient capabilities OpenSM would inherit: %w", err)
	}
	u := r.cfg.User
	if !u.switches() {
		return nil
	}
	if nsErr != nil {
		if err := checkUnreadable(u, r.cfg.Hide, nsErr); err != nil {
			return err
		}
		return checkSearchable(u, r.cfg.Dir)
	}
	dirs, err := hiddenDirs(r.cfg.Hide)
	if err != nil {
		return err
	}
	if err := hideDirs(dirs, append(r.ownDirs(env), filepath.Dir(r.cfg.LogFile))); err != nil {
		return err
	}
	return checkSearchable(u, r.cfg.Dir)
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
