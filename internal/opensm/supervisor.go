package opensm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// Runner starts instances of OpenSM: as the manager's child process
// (NewProcess) or in a Docker container (package smcontainer). It only starts;
// the Supervisor decides when, waits, signals and kills.
type Runner interface {
	// Start starts one OpenSM. ctx bounds the start, not the instance's life.
	Start(ctx context.Context) (Instance, error)
}

// Instance is one run of OpenSM, started by a Runner.
type Instance interface {
	// Done is closed once the instance has exited (a container: and is
	// gone); Exit then says how it ended ("exit status 1", "signal: killed").
	Done() <-chan struct{}
	Exit() string
	// Signal sends sig (SIGHUP, SIGTERM); os.ErrProcessDone when the
	// instance has exited already.
	Signal(ctx context.Context, sig syscall.Signal) error
	// Kill ends the instance at once (SIGKILL).
	Kill(ctx context.Context) error
	// PID is OpenSM's process ID on the host; 0 when unknown.
	PID() int
	// LogAttrs name the instance in log lines ("pid", 42 or "container", ...);
	// String names it in an error ("pid 42").
	LogAttrs() []any
	fmt.Stringer
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
	// killTimeout bounds the wait for an instance to be gone after SIGKILL:
	// a container's removal goes through the Docker engine, which may hang.
	killTimeout = 30 * time.Second
)

// versionLine is the first line OpenSM logs ("OpenSM 3.3.23"), right after it
// has blocked the signals it handles. Before that a SIGHUP kills it.
var versionLine = regexp.MustCompile(`^OpenSM [0-9]\S*$`)

// IsVersionLine says whether a log entry's message is OpenSM's version line,
// the first it logs once a SIGHUP no longer kills it.
func IsVersionLine(message string) bool { return versionLine.MatchString(message) }

// Supervisor keeps OpenSM running for the manager's whole life, whatever runs
// it (Runner): Start starts it once, it is restarted whenever it exits, and it
// keeps running across the applier's terms and database outages until Stop
// (the manager stops) or StopTerm (with the HA lease, the manager must leave
// the fabric to another); a stopped term never starts it again (TermLatch).
// It is the one owner of what runs OpenSM: the applier starts, waits for and
// signals it, the lease stops it, and the health checks, the metrics and
// --status (through the status file) read its Status.
type Supervisor struct {
	runner  Runner  // nil when watcher is set
	watcher Watcher // nil when runner is set
	cfg     SupervisorConfig
	log     *slog.Logger
	invalid error // why Start can never start OpenSM; nil when it can

	mu        sync.Mutex
	current   Instance // the OpenSM that runs now; nil between instances
	ready     bool     // current has logged its version line
	restarts  int
	state     State
	since     time.Time // of state
	lastErr   string
	lastErrAt time.Time
	cancel    context.CancelFunc // ends the supervision; nil when none runs
	done      chan struct{}      // closed when the last supervision started has returned
	hurry     *hurry             // the running supervision's: kill OpenSM now, no grace period
	latch     TermLatch          // the terms whose stop ran: never started again
	changed   chan struct{}      // closed and replaced at every change of the fields above
	seq       uint64             // counts changes, so the status file is never older than a write before it

	fileMu  sync.Mutex
	fileSeq uint64 // the change the status file shows
}

// SupervisorConfig is what a Supervisor needs besides its Runner.
type SupervisorConfig struct {
	// LogFile is OpenSM's log_file. OpenSM is ready (safe to signal) once it
	// has written its version line there.
	LogFile string
	// StatusFile, if set, receives the Status as JSON at every change, for
	// --status, which runs in another process.
	StatusFile string
	Logger     *slog.Logger // nil: slog.Default()
}

// State is what the supervisor is doing.
type State string

const (
	StateStopped    State = "stopped"    // not started, or stopped by Stop
	StateStarting   State = "starting"   // OpenSM runs but has not logged its version line yet
	StateRunning    State = "running"    // OpenSM runs and may be signalled
	StateRestarting State = "restarting" // OpenSM exited; it is started again after a back-off
	StateFailed     State = "failed"     // OpenSM could not be started; retried after a back-off
)

// Status is the supervisor's state for operators (--status, /readyz).
type Status struct {
	State     State     `json:"state"`
	PID       int       `json:"pid,omitempty"` // of the OpenSM that runs now
	Restarts  int       `json:"restarts"`      // times OpenSM was started again after it exited
	Since     time.Time `json:"since"`         // when State was entered
	LastError string    `json:"last_error,omitempty"`
	// LastErrorAt is when LastError happened; zero when none did.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// NewSupervisor returns a Supervisor of what r runs, which does nothing until
// Start is called.
func NewSupervisor(r Runner, c SupervisorConfig) *Supervisor {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	done := make(chan struct{})
	close(done)
	s := &Supervisor{runner: r, cfg: c, log: log, changed: make(chan struct{}), done: done,
		state: StateStopped, since: time.Now().UTC()}
	if c.LogFile == "" {
		s.invalid = errors.New("opensm: no log file configured (it shows when OpenSM is ready)")
	}
	return s
}

// update changes the supervisor's fields under s.mu, wakes WaitReady callers,
// and writes the status file.
func (s *Supervisor) update(change func()) {
	s.mu.Lock()
	change()
	close(s.changed)
	s.changed = make(chan struct{})
	s.seq++
	seq, st := s.seq, s.statusLocked()
	s.mu.Unlock()
	s.writeStatus(seq, st)
}

// setState must be called inside update.
func (s *Supervisor) setState(st State) {
	if s.state != st {
		s.state, s.since = st, time.Now().UTC()
	}
}

// setError records an error, which the caller has logged; inside update.
func (s *Supervisor) setError(err string) {
	s.lastErr, s.lastErrAt = err, time.Now().UTC()
}

// Start starts supervising OpenSM for a leadership term unless it is
// supervised already, and returns at once: OpenSM is started, and started
// again after a back-off (1 s, doubling up to 30 s) whenever it exits or
// cannot be started; every exit and every failed start is logged and shows in
// Status. Start fails when the configuration can never start OpenSM, and with
// ErrTermStopped once StopTerm ran for term or a later one, or Stop ran: a
// stop is a latch that no later Start of the same term undoes (see
// TermLatch). A newer term starts OpenSM again after StopTerm.
func (s *Supervisor) Start(term int64) error {
	if s.invalid != nil {
		return s.invalid
	}
	var refused error
	s.update(func() {
		if refused = s.latch.Allows(term); refused != nil || s.cancel != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		prev, done, h := s.done, make(chan struct{}), &hurry{now: make(chan struct{})}
		s.cancel, s.done, s.hurry = cancel, done, h
		s.setState(StateStarting)
		// A Stop that gave up waiting may have left the previous OpenSM
		// exiting: the new one starts once it is gone.
		go func() {
			defer close(done)
			<-prev
			if s.watcher != nil {
				s.watch(ctx)
				return
			}
			s.supervise(ctx, h)
		}()
	})
	return refused
}

// StopTerm stops OpenSM at the end of term (SIGTERM, and SIGKILL after 10 s,
// or as soon as ctx ends) and the supervision, and waits until OpenSM has
// exited (an error when even SIGKILL did not end it). The stop
// is latched before anything else: from then on no Start for term or an
// earlier term starts OpenSM, even when the wait below gives up. Stopping what
// is stopped only latches.
func (s *Supervisor) StopTerm(ctx context.Context, term int64) error {
	return s.stop(ctx, func(l *TermLatch) { l.Stop(term) })
}

// Stop stops OpenSM for good (the manager is shutting down): as StopTerm, and
// every later Start is refused.
func (s *Supervisor) Stop(ctx context.Context) error {
	return s.stop(ctx, (*TermLatch).StopForGood)
}

func (s *Supervisor) stop(ctx context.Context, latch func(*TermLatch)) error {
	s.mu.Lock()
	latch(&s.latch)
	cancel, done, h := s.cancel, s.done, s.hurry
	s.cancel = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	// The caller's time is up: with the HA lease, another manager may start
	// its OpenSM from then on. An OpenSM still here (one that ignores SIGTERM,
	// or is stopped by SIGSTOP and cannot act on it) is killed at once, not
	// after its grace period.
	if h != nil {
		h.kill()
	}
	select {
	case <-done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("opensm: stop: %w, and OpenSM is not gone after SIGKILL", ctx.Err())
	}
}

// hurry tells a supervision's stop to kill OpenSM at once.
type hurry struct {
	once sync.Once
	now  chan struct{} // closed by kill
}

func (h *hurry) kill() { h.once.Do(func() { close(h.now) }) }

// supervise runs OpenSM until ctx ends, then stops it (at once once h says
// so).
func (s *Supervisor) supervise(ctx context.Context, h *hurry) {
	defer s.update(func() { s.setState(StateStopped) })
	backoff := minBackoff
	for ctx.Err() == nil {
		inst, err := s.startOne(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return // the start was cut short by the stop
		case err != nil:
			s.log.Error("OpenSM could not be started; retrying", "error", err, "retry_in", backoff)
			s.update(func() { s.setState(StateFailed); s.setError(err.Error()) })
		default:
			startedAt := time.Now()
			select {
			case <-inst.Done():
			case <-ctx.Done():
				s.stopInstance(inst, h)
				s.log.Info("OpenSM stopped", append(inst.LogAttrs(), "status", inst.Exit())...)
				return
			}
			ran := time.Since(startedAt)
			if ran >= stableAfter {
				backoff = minBackoff
			}
			s.exited(inst, ran, backoff)
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
			s.update(func() { s.restarts++ })
		}
	}
}

// exited records that inst exited on its own after running for ran.
func (s *Supervisor) exited(inst Instance, ran, restartIn time.Duration) {
	s.log.Error("OpenSM exited; restarting it", append(inst.LogAttrs(), "status", inst.Exit(),
		"ran", ran.Round(time.Millisecond), "restart_in", restartIn)...)
	s.update(func() {
		if s.current == inst {
			s.current, s.ready = nil, false
		}
		s.setState(StateRestarting)
		s.setError(fmt.Sprintf("OpenSM (%s) exited after %s: %s", inst, ran.Round(time.Millisecond), inst.Exit()))
	})
}

// startOne starts one OpenSM, makes it the current instance, and watches for
// its version line.
func (s *Supervisor) startOne(ctx context.Context) (Instance, error) {
	// The version line of this instance comes after this position. The log
	// is appended to across restarts (accum_log_file TRUE).
	from, err := LogPosition(s.cfg.LogFile)
	if err != nil {
		return nil, fmt.Errorf("opensm: %w", err)
	}
	inst, err := s.runner.Start(ctx)
	if err != nil {
		return nil, err
	}
	s.update(func() { s.current, s.ready = inst, false; s.setState(StateStarting) })
	s.log.Info("OpenSM started", inst.LogAttrs()...)
	watchCtx, stopWatching := context.WithCancel(ctx)
	go func() {
		defer stopWatching()
		select {
		case <-inst.Done():
		case <-watchCtx.Done():
		}
	}()
	go s.watchReady(watchCtx, inst, from)
	return inst, nil
}

// watchReady marks inst ready once its version line is in the log.
func (s *Supervisor) watchReady(ctx context.Context, inst Instance, from Position) {
	follower := FollowLog(s.cfg.LogFile, from)
	defer follower.Close()
	for {
		e, err := follower.Next(ctx)
		if errors.Is(err, ErrLogReset) {
			continue // a log truncated at start still gets the version line
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("cannot follow OpenSM's log to see it start", "file", s.cfg.LogFile, "error", err)
			}
			return
		}
		if IsVersionLine(e.Message) {
			s.update(func() {
				if s.current == inst {
					s.ready = true
					s.setState(StateRunning)
				}
			})
			s.log.Info("OpenSM ready", append(inst.LogAttrs(), "version", e.Message)...)
			return
		}
	}
}

// stopInstance sends SIGTERM, waits, and kills OpenSM if it does not exit in
// time; the instance is no longer current once it returns.
func (s *Supervisor) stopInstance(inst Instance, h *hurry) {
	defer s.update(func() {
		if s.current == inst {
			s.current, s.ready = nil, false
		}
	})
	ctx := context.Background()
	if err := inst.Signal(ctx, syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.log.Warn("cannot send SIGTERM to OpenSM", append(inst.LogAttrs(), "error", err)...)
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-inst.Done():
		return
	case <-t.C:
		s.log.Warn("OpenSM ignored SIGTERM; killing it", append(inst.LogAttrs(), "after", stopTimeout)...)
	case <-h.now:
		s.log.Warn("OpenSM is not gone and the stop's time is up; killing it", inst.LogAttrs()...)
	}
	if err := inst.Kill(ctx); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.log.Error("cannot kill OpenSM", append(inst.LogAttrs(), "error", err)...)
	}
	select {
	case <-inst.Done():
	case <-time.After(killTimeout):
		s.log.Error("OpenSM is not gone after SIGKILL", append(inst.LogAttrs(), "after", killTimeout)...)
	}
}

// WaitReady waits until the current OpenSM has logged its version line, after
// which it is safe to signal. It fails at once when OpenSM is not supervised
// (never started, or stopped) or its last start failed: waiting would not help.
func (s *Supervisor) WaitReady(ctx context.Context) error {
	return AwaitReady(ctx, func() (Readiness, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return Readiness{Ready: s.current != nil && s.ready, Supervised: s.cancel != nil,
			Failed: s.state == StateFailed, LastError: s.lastErr}, s.changed
	})
}

// Reload sends SIGHUP, which makes OpenSM start a heavy sweep (re-reading
// opensm.conf, the per-module logging file and, as master, the partitions
// file). It refuses when OpenSM is not running or still starting: a SIGHUP
// before OpenSM has set up its signal handling kills it.
func (s *Supervisor) Reload(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	inst, ready := s.current, s.ready
	s.mu.Unlock()
	switch {
	case inst == nil:
		return errors.New("opensm: not running; no SIGHUP sent")
	case !ready:
		return errors.New("opensm: still starting; no SIGHUP sent (it could kill OpenSM)")
	}
	// The instance signals only itself: a reaped OpenSM's PID reused by
	// another process, or a container of the same name, is never hit.
	if err := inst.Signal(ctx, syscall.SIGHUP); err != nil {
		return fmt.Errorf("opensm: SIGHUP to %s: %w", inst, err)
	}
	return nil
}

// Current returns the OpenSM that runs now, nil between instances.
func (s *Supervisor) Current() Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Status reports what the supervisor does, and its last error.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *Supervisor) statusLocked() Status {
	st := Status{State: s.state, Restarts: s.restarts, Since: s.since, LastError: s.lastErr, LastErrorAt: s.lastErrAt}
	if s.current != nil {
		st.PID = s.current.PID()
	}
	return st
}

// Restarts counts how many times the supervisor has started OpenSM again after it exited.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// writeStatus writes st, the status after change seq, to the status file,
// unless a later change's status is there already.
func (s *Supervisor) writeStatus(seq uint64, st Status) {
	if s.cfg.StatusFile == "" {
		return
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if seq <= s.fileSeq {
		return
	}
	s.fileSeq = seq
	b, _ := json.Marshal(st)
	if err := WriteFileAtomic(s.cfg.StatusFile, append(b, '\n'), 0o644); err != nil {
		s.log.Warn("write OpenSM's supervisor status", "file", s.cfg.StatusFile, "error", err)
	}
}

// ReadStatus reads a status file written by a Supervisor.
func ReadStatus(path string) (Status, error) {
	var st Status
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}
