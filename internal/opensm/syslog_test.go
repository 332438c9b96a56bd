package opensm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"log/syslog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// The real OpenSM on a simulated fabric, supervised by the manager in a mount
// namespace of its own whose /dev/log is a socket the test reads: what OpenSM
// sends to syslog(3) would arrive there, as it would reach the journal. Not a
// datagram may hold a key, nor OpenSM's option lines; a syslog client of the
// manager's own does reach the socket, so the socket is the one syslog uses.
func TestOpenSMCannotReachSyslog(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root: a mount namespace for the test's /dev/log")
	}
	fab := fabricsim.StartT(t, fabricsim.Options{Hosts: 1})
	cfg := writeOpenSMFiles(t, fab, defaultPartition)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=syslog",
		"OPENSM_TEST_COMMAND="+cfg.Command[0], "OPENSM_TEST_CONF="+cfg.ConfFile, "OPENSM_TEST_ENV="+cfg.EnvFile,
		"OPENSM_TEST_DIR="+cfg.Dir, "OPENSM_TEST_LOG="+cfg.LogFile)
	// The helper's own mount namespace: its /dev is the test's, not the host's.
	helper.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	var stderr testenv.SyncBuffer
	helper.Stderr = &stderr
	out, err := helper.Output()
	if err != nil {
		t.Fatalf("helper: %v; its log:\n%s", err, stderr.String())
	}
	var received []string
	if err := json.Unmarshal(out, &received); err != nil {
		t.Fatalf("helper said %q: %v; its log:\n%s", out, err, stderr.String())
	}
	marker := false
	for _, d := range received {
		marker = marker || strings.Contains(d, syslogMarker)
		for _, secret := range []string{saKey, "sa_key", "Loading Cached Option"} {
			if strings.Contains(d, secret) {
				t.Errorf("syslog received %q (holds %q)", d, secret)
			}
		}
	}
	if !marker {
		t.Errorf("the test's syslog socket did not receive a client's message; it received %q", received)
	}
	if out := stderr.String(); !strings.Contains(out, "OpenSM ready") {
		t.Errorf("OpenSM did not run in the helper; its log:\n%s", out)
	}
}

const syslogMarker = "afm-syslog-test-marker"

// runSyslogHelper is a manager in a mount namespace of its own (see
// TestOpenSMCannotReachSyslog): it makes its /dev/log a socket it reads, runs
// OpenSM through its first sweep and a SIGHUP's, and prints every datagram
// the socket received as a JSON list.
func runSyslogHelper() {
	fail := func(what string, err error) {
		fmt.Fprintln(os.Stderr, what+":", err)
		os.Exit(3)
	}
	if err := testDevWithSyslog(); err != nil {
		fail("the test's /dev", err)
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: syslogSocket, Net: "unixgram"})
	if err != nil {
		fail("listen on /dev/log", err)
	}
	var mu sync.Mutex
	var received []string
	end := make(chan struct{})
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			d := string(buf[:n])
			mu.Lock()
			received = append(received, d)
			mu.Unlock()
			if strings.Contains(d, syslogMarker+" end") {
				close(end)
			}
		}
	}()
	client, err := syslog.Dial("", "", syslog.LOG_INFO|syslog.LOG_DAEMON, "afm-test")
	if err != nil {
		fail("syslog client", err)
	}
	_ = client.Info(syslogMarker + " start")

	cfg := ProcessConfig{Command: []string{os.Getenv("OPENSM_TEST_COMMAND")}, ConfFile: os.Getenv("OPENSM_TEST_CONF"),
		EnvFile: os.Getenv("OPENSM_TEST_ENV"), Dir: os.Getenv("OPENSM_TEST_DIR"), LogFile: os.Getenv("OPENSM_TEST_LOG")}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	p := NewProcess(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Start(1); err != nil {
		fail("Start", err)
	}
	if err := p.WaitReady(ctx); err != nil {
		fail("WaitReady", err)
	}
	if res, err := waitSweep(ctx, cfg.LogFile, Position{}, 30*time.Second); err != nil || res.Outcome != Applied {
		fail("first sweep", fmt.Errorf("%+v, %v", res, err))
	}
	from, err := LogPosition(cfg.LogFile)
	if err != nil {
		fail("log position", err)
	}
	if err := p.Reload(ctx); err != nil { // OpenSM reads opensm.conf again
		fail("Reload", err)
	}
	if res, err := waitSweep(ctx, cfg.LogFile, from, 30*time.Second); err != nil || res.Outcome != Applied {
		fail("sweep after SIGHUP", fmt.Errorf("%+v, %v", res, err))
	}
	if err := p.Stop(ctx); err != nil {
		fail("Stop", err)
	}
	// Datagrams queue in order: once this one is read, so is all OpenSM sent.
	_ = client.Info(syslogMarker + " end")
	select {
	case <-end:
	case <-ctx.Done():
		fail("the end marker", ctx.Err())
	}
	mu.Lock()
	b, _ := json.Marshal(received)
	mu.Unlock()
	os.Stdout.Write(b)
	os.Exit(0)
}

// testDevWithSyslog mounts, in the helper's mount namespace, a writable /dev
// holding the real one's entries but log, for the helper to bind its own.
func testDevWithSyslog() error {
	entries, err := os.ReadDir("/dev")
	if err != nil {
		return err
	}
	real, err := unix.Open("/dev", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(real)
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID, "mode=0755"); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "log" {
			continue
		}
		if err := mirrorDevEntry(real, e); err != nil {
			return err
		}
	}
	return nil
}

// Where the manager cannot make a mount namespace (the systemd unit, a
// container without capabilities), OpenSM shares its view: it is not started
// while a syslog socket listens at /dev/log, the driver says why, and it
// starts once the socket is gone. (The namespace's refusal and the socket's
// path are the test's: it cannot take its own privilege away.)
func TestProcessRefusesToStartWhereSyslogIsReachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "log")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	savedPath, savedNS := syslogPath, newMountNamespace
	syslogPath, newMountNamespace = sock, func() error { return unix.EPERM }
	sm := opensmtest.NewStandIn(t)
	p := NewProcess(ProcessConfig{Command: sm.Command, LogFile: sm.LogFile})
	t.Cleanup(func() {
		_ = p.Stop(context.Background())
		syslogPath, newMountNamespace = savedPath, savedNS
	})
	if err := p.Start(1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused start in the driver's status", func() bool { return p.Status().State == StateFailed })
	st := p.Status()
	for _, want := range []string{"OpenSM would reach syslog at " + sock, "InaccessiblePaths=", "CAP_SYS_ADMIN"} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("driver's error %q does not say %q", st.LastError, want)
		}
	}
	if err := p.WaitReady(t.Context()); err == nil {
		t.Error("WaitReady succeeded")
	}
	if starts := sm.Starts(t); len(starts) > 0 {
		t.Fatalf("OpenSM %v started where syslog is reachable", starts)
	}
	// The socket gone (the unit's InaccessiblePaths=), the next retry starts it.
	l.Close()
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OpenSM started once syslog is unreachable", func() bool { return p.Status().State == StateRunning })
	if len(sm.Running(t)) != 1 {
		t.Errorf("running %v, want one OpenSM", sm.Running(t))
	}
}
