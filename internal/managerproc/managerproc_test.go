package managerproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeManagerEnv makes this test binary a fake manager: a process whose start,
// serving and exit the tests choose (the real manager is driven through this
// package by the end-to-end tests). Its value is what the fake does.
const fakeManagerEnv = "AFM_FAKE_MANAGER"

func TestMain(m *testing.M) {
	if behaviour := os.Getenv(fakeManagerEnv); behaviour != "" {
		os.Exit(fakeManager(behaviour, os.Getenv("AFM_FAKE_MANAGER_ADDR")))
	}
	os.Exit(m.Run())
}

// fakeManager: "serve" serves HTTP on addr after 200 ms and exits 0 on
// SIGTERM; "exit" prints a line and exits 3; "stubborn" never serves and
// ignores SIGTERM.
func fakeManager(behaviour, addr string) int {
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	switch behaviour {
	case "serve":
		time.Sleep(200 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		<-terms
		return 0
	case "exit":
		fmt.Println("fake manager: bad configuration")
		return 3
	case "stubborn":
		fmt.Println("ignoring SIGTERM")
		for {
			<-terms
		}
	}
	return 2
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func options(t *testing.T, behaviour string) (Options, string) {
	addr := freeAddr(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Binary:  exe,
		Env:     append(os.Environ(), fakeManagerEnv+"="+behaviour, "AFM_FAKE_MANAGER_ADDR="+addr),
		Log:     filepath.Join(t.TempDir(), "manager.log"),
		Serving: Answers(&http.Client{Timeout: time.Second}, "http://"+addr+"/healthz"),
		Within:  20 * time.Second,
	}, addr
}

func TestStartWaitsUntilServingAndStopEndsIt(t *testing.T) {
	o, addr := options(t, "serve")
	p, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err != nil {
		t.Fatalf("Start returned before the manager served: %v", err)
	}
	if code := p.ExitCode(); code != -1 {
		t.Errorf("ExitCode of a running manager = %d, want -1", code)
	}
	if !p.Stop(20 * time.Second) {
		t.Error("Stop killed a manager that ends on SIGTERM")
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited not closed after Stop")
	}
	if code := p.ExitCode(); code != 0 {
		t.Errorf("ExitCode = %d, want 0", code)
	}
	if err := p.Kill(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Kill of an exited manager: %v, want os.ErrProcessDone", err)
	}
}

func TestStartFailsWhenTheManagerExits(t *testing.T) {
	o, _ := options(t, "exit")
	p, err := Start(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "exited at start") || !strings.Contains(err.Error(), o.Log) {
		t.Fatalf("Start = %v, %v; want an error saying it exited and naming the log", p, err)
	}
	if b, _ := os.ReadFile(o.Log); !strings.Contains(string(b), "bad configuration") {
		t.Errorf("the log holds %q, not the manager's output", b)
	}
}

func TestStartGivesUpAndKillsAManagerThatNeverServes(t *testing.T) {
	o, _ := options(t, "stubborn")
	o.Within = 300 * time.Millisecond
	var pid int
	serving := o.Serving
	o.Serving = func(ctx context.Context) error {
		if pid == 0 {
			pid = childOf(os.Getpid())
		}
		return serving(ctx)
	}
	_, err := Start(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "not serving after") {
		t.Fatalf("Start = %v; want not serving", err)
	}
	if pid == 0 {
		t.Fatal("found no child process")
	}
	// Start waited for the kill, so the process is gone (reaped) now.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the manager (pid %d) still exists after Start gave up: %v", pid, err)
	}
}

func TestStopKillsAManagerThatIgnoresSIGTERM(t *testing.T) {
	o, _ := options(t, "stubborn")
	// Serving once the fake says it ignores SIGTERM, so that the signal
	// cannot come before its handler.
	o.Serving = func(context.Context) error {
		if b, _ := os.ReadFile(o.Log); !strings.Contains(string(b), "ignoring SIGTERM") {
			return errors.New("not yet")
		}
		return nil
	}
	p, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Stop(500 * time.Millisecond) {
		t.Fatal("Stop says a manager that ignores SIGTERM exited of itself")
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited not closed after Stop")
	}
}

// childOf is a child process of pid, 0 if none.
func childOf(pid int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			var n int
			fmt.Sscan(c, &n)
			return n
		}
	}
	return 0
}
