package opensm

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// The tests in this file run the real OpenSM on a simulated fabric.

// helperEnv makes the test binary act as a manager process (see
// runManagerHelper) instead of running tests.
const helperEnv = "OPENSM_TEST_HELPER"

func TestMain(m *testing.M) {
	testenv.Main(m, helperEnv, map[string]func(){"manager": runManagerHelper, "syslog": runSyslogHelper,
		"probe": runProbe})
}

const (
	defaultPartition = "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n"
	// saKey is in opensm.conf and must never reach the manager's log.
	saKey = "0x5ec7e7000000a001"
)

// h1Full65 makes H1 a full member of 0x0065.
func h1Full65() string {
	return defaultPartition + fmt.Sprintf("net65=0x0065 : %s=full ;\n", fabricsim.HostGUID(1))
}

// writeOpenSMFiles writes opensm.conf, the per-module logging file and the
// partitions file into the fabric directory, and returns the configuration
// of a Process running the real OpenSM on that fabric.
func writeOpenSMFiles(t *testing.T, fab *fabricsim.Fabric, partitions string) ProcessConfig {
	t.Helper()
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	conf := ConfOptions{
		PartitionsFile:       filepath.Join(fab.Dir, "partitions.conf"),
		LogFile:              filepath.Join(fab.Dir, "opensm.log"),
		PerModuleLoggingFile: filepath.Join(fab.Dir, "per-module-logging.conf"),
		Passthrough: []KeyValue{
			{"guid", fab.SMGUID.String()}, // the port on SIM_HOST, the SM's HCA
			{"sa_key", saKey},
		},
	}
	rendered, err := RenderConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	confFile := filepath.Join(fab.Dir, "opensm.conf")
	for path, content := range map[string][]byte{
		confFile:                  rendered,
		conf.PerModuleLoggingFile: PerModuleLoggingConf(),
		conf.PartitionsFile:       []byte(partitions),
	} {
		if err := WriteFileAtomic(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ProcessConfig{
		Command:  []string{opensm},
		ConfFile: confFile,
		EnvFile:  fab.EnvFile(),
		Dir:      fab.Dir,
		LogFile:  conf.LogFile,
	}
}

// startProcess starts p and returns the function that stops it (also called
// when the test ends).
func startProcess(t *testing.T, p *Supervisor) (stop func() error) {
	if err := p.Start(1); err != nil {
		t.Fatal(err)
	}
	stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return p.Stop(ctx)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, 30*time.Second, cond)
}

// TestProcessAppliesPartitionsOnSimulatedFabric drives one supervised OpenSM
// through the life the manager gives it. The steps run in order and share the
// fabric and the process; a failed step ends the test, since every later step
// starts from the state it leaves.
func TestProcessAppliesPartitionsOnSimulatedFabric(t *testing.T) {
	fab := fabricsim.StartT(t, fabricsim.Options{})
	s := &processScenario{fab: fab, cfg: writeOpenSMFiles(t, fab, defaultPartition)}
	s.cfg.Logger = slog.New(slog.NewTextHandler(&s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s.h1, s.h2 = fab.Host("H1").PortGUID, fab.Host("H2").PortGUID

	if !t.Run("refuses before start", s.refusesBeforeStart) {
		return
	}
	s.cfg.StatusFile = filepath.Join(t.TempDir(), "driver-status.json")
	s.p = NewProcess(s.cfg)
	startProcess(t, s.p) // stopped when the whole test ends, not after a step
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"starts once", s.startsOnce},
		{"adds and removes a partition", s.addsAndRemoves},
		{"rejects a file OpenSM cannot parse", s.rejectsBadFile},
		{"fails while MADs are dropped", s.failsOnDroppedMADs},
		{"restarts a killed OpenSM", s.restartsKilled},
		{"stops and starts again", s.stopsAndStartsAgain},
		{"logs the exit and no secret", s.logsExitWithoutSecrets},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			return
		}
	}
}

// processScenario is what the steps of
// TestProcessAppliesPartitionsOnSimulatedFabric share.
type processScenario struct {
	fab    *fabricsim.Fabric
	cfg    ProcessConfig
	logs   testenv.SyncBuffer
	p      *Supervisor
	h1, h2 fabric.GUID
}

// apply does what the manager does: file in place, position, SIGHUP, wait.
func (s *processScenario) apply(t *testing.T, partitions string, timeout time.Duration) SweepResult {
	t.Helper()
	if err := WriteFileAtomic(filepath.Join(s.fab.Dir, "partitions.conf"), []byte(partitions), 0o644); err != nil {
		t.Fatal(err)
	}
	from, err := LogPosition(s.cfg.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.p.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := waitSweep(t.Context(), s.cfg.LogFile, from, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// applyExpect applies partitions and fails the step unless the sweep's
// outcome is want.
func (s *processScenario) applyExpect(t *testing.T, partitions string, timeout time.Duration, want Outcome) SweepResult {
	t.Helper()
	res := s.apply(t, partitions, timeout)
	if res.Outcome != want {
		t.Fatalf("outcome %q (%s; pkey errors %q), want %q", res.Outcome, res.Detail, res.PKeyErrors, want)
	}
	return res
}

func (s *processScenario) pkeys(t *testing.T, port fabric.GUID) []uint16 {
	t.Helper()
	keys, err := s.fab.PKeys(t.Context(), port)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// wantH1Member fails the step unless H1's P_Key table holds 0x8065, full
// membership of the test's partition.
func (s *processScenario) wantH1Member(t *testing.T, when string) {
	t.Helper()
	if keys := s.pkeys(t, s.h1); !slices.Contains(keys, 0x8065) {
		t.Errorf("H1 P_Keys %#04x %s, want 0x8065 among them", keys, when)
	}
}

// wantH1Only fails the step unless H1's P_Key table is exactly [want].
func (s *processScenario) wantH1Only(t *testing.T, want uint16, when string) {
	t.Helper()
	if keys := s.pkeys(t, s.h1); !slices.Equal(keys, []uint16{want}) {
		t.Errorf("H1 P_Keys %#04x %s, want [%#04x]", keys, when, want)
	}
}

func (s *processScenario) refusesBeforeStart(t *testing.T) {
	p := NewProcess(s.cfg)
	if err := p.Reload(t.Context()); err == nil {
		t.Error("Reload before Start sent a signal to nothing")
	}
	if err := p.WaitReady(t.Context()); err == nil {
		t.Error("WaitReady before Start did not fail")
	}
}

func (s *processScenario) startsOnce(t *testing.T) {
	if err := s.p.Start(1); err != nil { // a second Start while it runs changes nothing
		t.Fatal(err)
	}
	if err := s.p.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	first := s.p.Status()
	if first.State != StateRunning || first.PID == 0 || first.LastError != "" {
		t.Fatalf("ready but Status() = %+v", first)
	}
	waitFor(t, "the status file to say running", func() bool {
		st, err := ReadStatus(s.cfg.StatusFile)
		return err == nil && st.State == StateRunning && st.PID == first.PID
	})
}

// addsAndRemoves makes H1 a full member of 0x0065 (H2 not a member), then
// takes the partition away again.
func (s *processScenario) addsAndRemoves(t *testing.T) {
	s.applyExpect(t, h1Full65(), 10*time.Second, Applied)
	s.wantH1Member(t, "after adding 0x0065")
	if keys, err := s.fab.SwitchPKeys(t.Context(), s.h1); err != nil || !slices.Contains(keys, 0x8065) {
		t.Errorf("switch port facing H1: %#04x, %v; want 0x8065 among them", keys, err)
	}
	if keys := s.pkeys(t, s.h2); slices.Contains(keys, 0x8065) || slices.Contains(keys, 0x0065) {
		t.Errorf("H2 P_Keys %#04x, want no 0x0065", keys)
	}

	s.applyExpect(t, defaultPartition, 10*time.Second, Applied)
	s.wantH1Only(t, 0x7fff, "after removal")
}

// rejectsBadFile: OpenSM falls back to everyone full in 0x7fff.
func (s *processScenario) rejectsBadFile(t *testing.T) {
	res := s.applyExpect(t, defaultPartition+"net65=0x0065 : ALL_VCAS=full ;\n", 10*time.Second, Rejected)
	if !strings.Contains(res.Detail, "bad PortGUID") {
		t.Errorf("rejection detail %q does not name the parse error", res.Detail)
	}
	s.wantH1Only(t, 0xffff, "after a rejected file (OpenSM's fallback)")
}

// failsOnDroppedMADs: ibsim drops every P_KeyTable MAD to H1, so the sweep
// fails, and OpenSM's retry (at its next sweep tick, 10 s) comes after this
// short timeout. Once the MADs flow again, the same file applies.
func (s *processScenario) failsOnDroppedMADs(t *testing.T) {
	if _, err := s.fab.Sim(t.Context(), `Error "H1"[1] 100 22`); err != nil {
		t.Fatal(err)
	}
	res := s.applyExpect(t, h1Full65(), 2*time.Second, Failed)
	if len(res.PKeyErrors) == 0 || !strings.Contains(strings.Join(res.PKeyErrors, "\n"), "P_KeyTable") {
		t.Errorf("failed sweep's PKeyErrors %q do not name P_KeyTable", res.PKeyErrors)
	}
	if _, err := s.fab.Sim(t.Context(), `Error "H1"[1] 0`); err != nil {
		t.Fatal(err)
	}
	s.applyExpect(t, h1Full65(), 10*time.Second, Applied)
	s.wantH1Member(t, "after healing")
}

// restartsKilled: the supervisor starts another OpenSM, which serves the next
// apply; the exit is the driver's last error.
func (s *processScenario) restartsKilled(t *testing.T) {
	killed := s.p.Status().PID
	if err := syscall.Kill(killed, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OpenSM to be restarted", func() bool {
		pid := s.p.Status().PID
		return s.p.Restarts() == 1 && pid != 0 && pid != killed
	})
	if st := s.p.Status(); !strings.Contains(st.LastError, "signal: killed") || st.LastErrorAt.IsZero() || st.Restarts != 1 {
		t.Errorf("after OpenSM was killed: Status() = %+v, want its exit as the last error", st)
	}
	if err := s.p.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.applyExpect(t, defaultPartition, 10*time.Second, Applied)
	s.wantH1Only(t, 0x7fff, "after restart")
}

// stopsAndStartsAgain: a stopped driver refuses work; started again by a newer
// term (a manager that leads again), a new OpenSM serves an apply.
func (s *processScenario) stopsAndStartsAgain(t *testing.T) {
	last := s.p.Status().PID
	if err := s.p.StopTerm(t.Context(), 1); err != nil {
		t.Fatalf("StopTerm: %v", err)
	}
	if st := s.p.Status(); st.State != StateStopped || st.PID != 0 || opensmtest.Alive(last) {
		t.Errorf("after Stop: Status() = %+v, OpenSM %d alive = %v", st, last, opensmtest.Alive(last))
	}
	waitFor(t, "the status file to say stopped", func() bool {
		st, err := ReadStatus(s.cfg.StatusFile)
		return err == nil && st.State == StateStopped
	})
	if err := s.p.Reload(t.Context()); err == nil {
		t.Error("Reload after Stop did not refuse")
	}
	if err := s.p.WaitReady(t.Context()); err == nil {
		t.Error("WaitReady after Stop did not fail")
	}

	if err := s.p.Start(2); err != nil {
		t.Fatal(err)
	}
	if err := s.p.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if pid := s.p.Status().PID; pid == 0 || pid == last {
		t.Errorf("started again: pid %d (the stopped one was %d)", pid, last)
	}
	s.applyExpect(t, h1Full65(), 10*time.Second, Applied)
	s.wantH1Member(t, "after starting again")
}

func (s *processScenario) logsExitWithoutSecrets(t *testing.T) {
	out := s.logs.String()
	for _, want := range []string{"OpenSM exited; restarting it", "signal: killed", `stream=stdout line="OpenSM 3.3.23"`} {
		if !strings.Contains(out, want) {
			t.Errorf("manager log lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{saKey, "sa_key"} {
		if strings.Contains(out, secret) {
			t.Errorf("manager log contains %q", secret)
		}
	}
}

func TestProcessRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  ProcessConfig
	}{
		{"no command", ProcessConfig{LogFile: filepath.Join(dir, "log")}},
		{"no log file", ProcessConfig{Command: []string{"opensm"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewProcess(tt.cfg)
			if err := p.Start(1); err == nil {
				t.Fatal("Start returned nil")
			}
			if err := p.WaitReady(t.Context()); err == nil {
				t.Error("WaitReady after Start failed did not fail")
			}
		})
	}
}

// A start that fails is retried, logged when it happens and reported as the
// driver's state; WaitReady fails instead of waiting; Stop ends the retries.
func TestProcessReportsFailedStarts(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, want string
		cfg        ProcessConfig
	}{
		{"no such program", "no-opensm", ProcessConfig{Command: []string{filepath.Join(dir, "no-opensm")}, LogFile: filepath.Join(dir, "log")}},
		{"missing environment file", "env", ProcessConfig{Command: []string{"true"}, LogFile: filepath.Join(dir, "log"), EnvFile: filepath.Join(dir, "env")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testenv.SyncBuffer
			tt.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			tt.cfg.StatusFile = filepath.Join(t.TempDir(), "status.json")
			p := NewProcess(tt.cfg)
			startProcess(t, p)
			waitFor(t, "the failed start to be reported", func() bool { return p.Status().State == StateFailed })
			st := p.Status()
			if !strings.Contains(st.LastError, tt.want) || st.LastErrorAt.IsZero() {
				t.Errorf("Status() = %+v, want a last error naming %q", st, tt.want)
			}
			if err := p.WaitReady(t.Context()); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WaitReady: %v, want an error naming %q", err, tt.want)
			}
			if out := logs.String(); !strings.Contains(out, "OpenSM could not be started") || !strings.Contains(out, tt.want) {
				t.Errorf("log lacks the failed start:\n%s", out)
			}
			waitFor(t, "the status file to report the failed start", func() bool {
				got, err := ReadStatus(tt.cfg.StatusFile)
				return err == nil && got.State == StateFailed && strings.Contains(got.LastError, tt.want)
			})
		})
	}
}

// The manager is killed (SIGKILL, no clean-up): the kernel must kill its OpenSM.
func TestOpenSMDiesWithManager(t *testing.T) {
	fab := fabricsim.StartT(t, fabricsim.Options{Hosts: 1})
	cfg := writeOpenSMFiles(t, fab, defaultPartition)

	manager := exec.Command(os.Args[0], "-test.run=^$")
	manager.Env = append(os.Environ(),
		helperEnv+"=manager",
		"OPENSM_TEST_COMMAND="+cfg.Command[0],
		"OPENSM_TEST_CONF="+cfg.ConfFile,
		"OPENSM_TEST_ENV="+cfg.EnvFile,
		"OPENSM_TEST_DIR="+cfg.Dir,
		"OPENSM_TEST_LOG="+cfg.LogFile,
	)
	var stderr testenv.SyncBuffer
	manager.Stderr = &stderr
	stdout, err := manager.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := manager.Start(); err != nil {
		t.Fatal(err)
	}
	var opensmPID int
	t.Cleanup(func() {
		manager.Process.Kill()
		manager.Wait()
		if opensmtest.Alive(opensmPID) { // the test failed; do not leave it behind
			syscall.Kill(opensmPID, syscall.SIGKILL)
		}
	})

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ready ")))
		if err != nil {
			t.Fatalf("manager said %q; its log:\n%s", line, stderr.String())
		}
		opensmPID = pid
	case <-time.After(30 * time.Second):
		t.Fatalf("manager did not report a ready OpenSM; its log:\n%s", stderr.String())
	}
	if !opensmtest.Alive(opensmPID) {
		t.Fatalf("OpenSM %d is not running", opensmPID)
	}

	if err := manager.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	manager.Wait()
	waitFor(t, fmt.Sprintf("OpenSM %d to die with its manager", opensmPID), func() bool { return !opensmtest.Alive(opensmPID) })
}

// runManagerHelper is a manager in a process of its own: it runs OpenSM, says
// "ready <pid>" on stdout once the subnet is up, and waits to be killed.
func runManagerHelper() {
	p := NewProcess(ProcessConfig{
		Command:  []string{os.Getenv("OPENSM_TEST_COMMAND")},
		ConfFile: os.Getenv("OPENSM_TEST_CONF"),
		EnvFile:  os.Getenv("OPENSM_TEST_ENV"),
		Dir:      os.Getenv("OPENSM_TEST_DIR"),
		LogFile:  os.Getenv("OPENSM_TEST_LOG"),
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err := p.Start(1); err != nil {
		fmt.Fprintln(os.Stderr, "Start:", err)
		os.Exit(3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "WaitReady:", err)
		os.Exit(4)
	}
	// Wait for the end of the first sweep: OpenSM is quiet then. (Killed while
	// it writes to stdout, it would die of SIGPIPE, which proves nothing.)
	res, err := waitSweep(ctx, os.Getenv("OPENSM_TEST_LOG"), Position{}, 20*time.Second)
	if err != nil || res.Outcome != Applied {
		fmt.Fprintln(os.Stderr, "first sweep:", res, err)
		os.Exit(4)
	}
	fmt.Printf("ready %d\n", p.Status().PID)
	time.Sleep(2 * time.Minute) // the test kills us long before
	os.Exit(5)
}
