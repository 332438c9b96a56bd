package fabricsim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Options shape the fabric. Zero values take the defaults.
type Options struct {
	Hosts    int // host HCAs; default 4
	Switches int // switches in a chain; default 1
	// SMs is the number of SM HCAs, each for one OpenSM (several managers);
	// default 1. The k-th is named SMName(k), its port GUID SMGUID for the
	// first and ExtraSMGUID(k) for the others; SMEnv(k) attaches a client to it.
	SMs int
	// Detach leaves ibsim running when this process exits (the fabric-sim
	// command does that; Stop from another process ends it). Without it ibsim
	// is killed by the kernel when this process dies, so a test that crashes
	// leaves nothing behind.
	Detach bool
	// Descriptions gives hosts, by name ("H2"), the NodeDescription their
	// HCA reports instead of their name: what a bare-metal tenant sets on
	// its host (up to 63 printable characters, no '"').
	Descriptions map[string]string
}

// SMEnv is the env file's lines for an OpenSM on the k-th SM HCA (from 1),
// and that HCA's port GUID.
func (f *Fabric) SMEnv(k int) ([]string, fabric.GUID) {
	env := make([]string, 0, len(f.env))
	for _, line := range f.env {
		if strings.HasPrefix(line, "SIM_HOST=") {
			line = "SIM_HOST=" + SMName(k)
		}
		env = append(env, line)
	}
	if k == 1 {
		return env, SMGUID
	}
	return env, ExtraSMGUID(k)
}

// Files the harness keeps in the fabric directory.
const (
	envFileName      = "env"       // KEY=VALUE lines, the clients' environment
	hostsFileName    = "hosts"     // "<port-guid> <name> <switch> <switch-port> <switch-guid>" per host
	netFileName      = "net"       // ibsim topology
	ibsimPIDFileName = "ibsim.pid" // so that another process can stop it
	ibsimLogFileName = "ibsim.log" // ibsim's output, console answers included
	ibsimCtlFileName = "ibsim.ctl" // FIFO feeding ibsim's console
	lidCacheFileName = "guid2lid"  // OpenSM's LID cache (OSM_CACHE_DIR is the fabric directory)
)

// Fabric is a running simulated fabric.
type Fabric struct {
	Dir    string // absolute; the working directory of every client
	SMGUID fabric.GUID
	Hosts  []Host

	env      []string // the lines of the env file
	ibsimPID int
	// exited is closed once the ibsim this process started (without Detach)
	// has been reaped; nil when the fabric was opened from its directory.
	exited chan struct{}
	// exitState is how that ibsim ended ("exit status 1", "signal:
	// killed"), set before exited is closed.
	exitState string
	ibsim     *os.Process

	simMu sync.Mutex // one console command at a time

	smpOnce sync.Once
	smp     *smpClient // reads P_Key tables; see smpClient
}

// Start builds the topology in dir (created if needed), starts ibsim there
// with a socket name of its own, and writes dir/env. Leftovers of an earlier
// fabric in dir are removed; a fabric still running there is an error.
func Start(ctx context.Context, dir string, o Options) (*Fabric, error) {
	if o.Hosts == 0 {
		o.Hosts = 4
	}
	if o.Switches == 0 {
		o.Switches = 1
	}
	umad2sim, err := checkPackages()
	if err != nil {
		return nil, err
	}
	ibsimPath, err := LookPath("ibsim")
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fabric directory: %w", err)
	}
	// The env file must also work as "set -a; . DIR/env" in a shell.
	if strings.ContainsAny(dir, " \t\n'\"$`\\") {
		return nil, fmt.Errorf("fabric directory %q: no blanks, quotes or shell characters, please", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fabric directory: %w", err)
	}
	if old, err := Open(dir); err == nil && old.IbsimRunning() {
		return nil, fmt.Errorf("a fabric is already running in %s (ibsim pid %d)", dir, old.ibsimPID)
	}
	removeLeftovers(dir)
	// OpenSM's cache of an earlier fabric would give PKeys wrong LIDs.
	for _, name := range []string{lidCacheFileName, "guid2mkey", "neighbors"} {
		os.Remove(filepath.Join(dir, name))
	}

	if o.SMs == 0 {
		o.SMs = 1
	}
	net, hosts, err := topologySMs(o.Hosts, o.Switches, o.SMs)
	if err == nil {
		net, err = describeHosts(net, o.Descriptions)
	}
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, netFileName), []byte(net), 0o644); err != nil {
		return nil, fmt.Errorf("write topology: %w", err)
	}
	if err := writeHosts(filepath.Join(dir, hostsFileName), hosts); err != nil {
		return nil, err
	}
	sock, err := freeSocketName()
	if err != nil {
		return nil, err
	}

	f := &Fabric{Dir: dir, SMGUID: SMGUID, Hosts: hosts}
	if err := f.startIbsim(ctx, ibsimPath, sock, o.Detach); err != nil {
		return nil, err
	}
	f.env = []string{
		"LD_PRELOAD=" + umad2sim,
		"IBSIM_SOCKNAME=" + sock,
		"SIM_HOST=SM", // clients attach to the SM's HCA unless they say otherwise
		"OSM_CACHE_DIR=" + dir,
		"OSM_TMP_DIR=" + dir,
		"FABRIC_DIR=" + dir,
		"FABRIC_SM_GUID=" + SMGUID.String(),
	}
	if err := os.WriteFile(f.EnvFile(), []byte(strings.Join(f.env, "\n")+"\n"), 0o644); err != nil {
		f.Stop()
		return nil, fmt.Errorf("write environment file: %w", err)
	}
	return f, nil
}

// startIbsim starts ibsim and waits until its control socket exists.
func (f *Fabric) startIbsim(ctx context.Context, ibsimPath, sock string, detach bool) error {
	ctlPath := filepath.Join(f.Dir, ibsimCtlFileName)
	if err := syscall.Mkfifo(ctlPath, 0o600); err != nil {
		return fmt.Errorf("create ibsim console FIFO: %w", err)
	}
	// Opened read-write, so ibsim never sees end-of-file when a writer of a
	// console command closes it.
	ctl, err := os.OpenFile(ctlPath, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open ibsim console FIFO: %w", err)
	}
	defer ctl.Close()
	logFile, err := os.OpenFile(filepath.Join(f.Dir, ibsimLogFileName), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("ibsim log: %w", err)
	}
	defer logFile.Close()

	cmd := exec.Command(ibsimPath, "-s", netFileName) // -s: start the fabric at once
	cmd.Dir = f.Dir
	cmd.Env = append(os.Environ(), "IBSIM_SOCKNAME="+sock)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ctl, logFile, logFile
	// A session of its own: signals for the caller's terminal or process group
	// do not reach it, and it can be stopped on its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}

	if err := f.launchIbsim(cmd, detach); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(f.Dir, ibsimPIDFileName), []byte(strconv.Itoa(f.ibsimPID)+"\n"), 0o644); err != nil {
		f.Stop()
		return fmt.Errorf("write ibsim pid: %w", err)
	}
	return f.awaitIbsimSocket(ctx, sock)
}

// launchIbsim starts cmd, ibsim: detached, it outlives this process;
// otherwise it is killed when this process ends, and f.exited is closed when
// it exits.
func (f *Fabric) launchIbsim(cmd *exec.Cmd, detach bool) error {
	if detach {
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start ibsim: %w", err)
		}
		f.ibsimPID = cmd.Process.Pid
		cmd.Process.Release()
		return nil
	}
	// Pdeathsig fires when the thread that forked ibsim exits: that thread
	// stays locked to this goroutine, which waits for ibsim to end.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	f.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		f.exitState = cmd.ProcessState.String()
		close(f.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start ibsim: %w", err)
	}
	f.ibsim = cmd.Process
	f.ibsimPID = cmd.Process.Pid
	return nil
}

// awaitIbsimSocket waits, up to 10 seconds, until ibsim listens on sock; it
// stops the fabric when ibsim exits or the time is up.
func (f *Fabric) awaitIbsimSocket(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		up, err := socketListening(sock)
		if err != nil {
			f.Stop()
			return err
		}
		if up {
			return nil
		}
		if !f.IbsimRunning() {
			f.Stop()
			return fmt.Errorf("ibsim exited at start; see %s", filepath.Join(f.Dir, ibsimLogFileName))
		}
		select {
		case <-ctx.Done():
			f.Stop()
			return fmt.Errorf("ibsim did not open its socket: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freeSocketName picks an abstract socket name no other fabric on this machine
// uses: each fabric is reached through its own name.
func freeSocketName() (string, error) {
	for range 100 {
		name := fmt.Sprintf("fabsim%dx%d", os.Getpid(), rand.IntN(1_000_000))
		used, err := socketListening(name)
		if err != nil {
			return "", err
		}
		if !used {
			return name, nil
		}
	}
	return "", errors.New("no free ibsim socket name")
}

// socketListening says whether ibsim's control socket for name exists.
func socketListening(name string) (bool, error) {
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return false, fmt.Errorf("list unix sockets: %w", err)
	}
	return strings.Contains(string(data), "@"+name+":ctl@"), nil
}

// Open returns the fabric started in dir, possibly by another process (the
// fabric-sim command). Stop then stops ibsim by its PID.
func Open(dir string) (*Fabric, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fabric directory: %w", err)
	}
	f := &Fabric{Dir: dir, SMGUID: SMGUID}
	if f.env, err = readLines(f.EnvFile()); err != nil {
		return nil, fmt.Errorf("no fabric in %s: %w", dir, err)
	}
	if f.Hosts, err = readHosts(filepath.Join(dir, hostsFileName)); err != nil {
		return nil, err
	}
	pid, err := os.ReadFile(filepath.Join(dir, ibsimPIDFileName))
	if err != nil {
		return nil, fmt.Errorf("no fabric in %s: %w", dir, err)
	}
	if f.ibsimPID, err = strconv.Atoi(strings.TrimSpace(string(pid))); err != nil {
		return nil, fmt.Errorf("%s: %w", ibsimPIDFileName, err)
	}
	return f, nil
}

// EnvFile is the path of the file of KEY=VALUE lines every client of the
// fabric needs in its environment: LD_PRELOAD, IBSIM_SOCKNAME, SIM_HOST=SM,
// OSM_CACHE_DIR, OSM_TMP_DIR (and FABRIC_DIR, FABRIC_SM_GUID for scripts).
func (f *Fabric) EnvFile() string { return filepath.Join(f.Dir, envFileName) }

// Env returns the lines of EnvFile, ready to append to os.Environ().
func (f *Fabric) Env() []string { return append([]string(nil), f.env...) }

// Host returns the host named name ("H1"). It panics when there is none: that
// is a mistake in the test.
func (f *Fabric) Host(name string) Host {
	for _, h := range f.Hosts {
		if h.Name == name {
			return h
		}
	}
	panic(fmt.Sprintf("fabricsim: no host %q in this fabric (%d hosts)", name, len(f.Hosts)))
}

// IbsimRunning says whether this fabric's ibsim still runs.
func (f *Fabric) IbsimRunning() bool {
	if f.exited != nil {
		select {
		case <-f.exited:
			return false
		default:
			return true
		}
	}
	return processAlive(f.ibsimPID, "ibsim", f.Dir)
}

// ibsimExiting says whether the ibsim Stop signalled has not exited yet.
// Its working directory is gone from /proc early in its exit, before it is a
// zombie: IbsimRunning, which checks it against a PID reused since the PID
// file was written, would call it gone while it still runs. Its name stays.
func (f *Fabric) ibsimExiting() bool {
	if f.exited != nil {
		return f.IbsimRunning()
	}
	return processAlive(f.ibsimPID, "ibsim", "")
}

// Stop stops ibsim (SIGTERM, SIGKILL after 10 s) and removes what clients left
// behind (libumad2sim's sys-<pid> directories of clients that are gone) and
// the env file. Clients of the fabric, such as OpenSM, are not stopped: stop
// them first. Stop may be called more than once.
func (f *Fabric) Stop() error {
	f.smpClient().detach()
	err := f.stopIbsim()
	removeLeftovers(f.Dir)
	return err
}

func (f *Fabric) stopIbsim() error {
	if !f.IbsimRunning() {
		return nil
	}
	signal := func(s syscall.Signal) {
		if f.ibsim != nil {
			f.ibsim.Signal(s)
		} else {
			syscall.Kill(f.ibsimPID, s)
		}
	}
	signal(syscall.SIGTERM)
	if f.waitIbsimGone(10 * time.Second) {
		return nil
	}
	signal(syscall.SIGKILL)
	if f.waitIbsimGone(5 * time.Second) {
		return fmt.Errorf("ibsim (pid %d) ignored SIGTERM and was killed", f.ibsimPID)
	}
	return fmt.Errorf("ibsim (pid %d) survived SIGKILL", f.ibsimPID)
}

func (f *Fabric) waitIbsimGone(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for f.ibsimExiting() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// removeLeftovers removes the files of a stopped fabric, and the sys-<pid>
// directories libumad2sim leaves behind when a client is killed. The
// directory of a client that still runs is kept.
func removeLeftovers(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "sys-*"))
	for _, m := range matches {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(m), "sys-"))
		if err == nil && processAlive(pid, "", "") {
			continue
		}
		os.RemoveAll(m)
	}
	for _, name := range []string{envFileName, ibsimCtlFileName, ibsimPIDFileName} {
		os.Remove(filepath.Join(dir, name))
	}
}

// processAlive says whether pid runs (a zombie does not count), and, when comm
// and cwd are given, runs that program in that directory: a PID from a file may
// have been reused.
func processAlive(pid int, comm, cwd string) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ...": comm may contain spaces and parentheses.
	if i := strings.LastIndexByte(string(stat), ')'); i < 0 || strings.HasPrefix(string(stat[i+1:]), " Z") {
		return false
	}
	if comm != "" {
		got, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(got)) != comm {
			return false
		}
	}
	if cwd != "" {
		got, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil || got != cwd {
			return false
		}
	}
	return true
}

func writeHosts(path string, hosts []Host) error {
	var b strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&b, "%s %s %s %d %s\n", h.PortGUID, h.Name, h.Switch, h.SwitchPort, h.SwitchGUID)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write hosts: %w", err)
	}
	return nil
}

func readHosts(path string) ([]Host, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	var hosts []Host
	for _, l := range lines {
		var h Host
		var guid, swGUID string
		if _, err := fmt.Sscanf(l, "%s %s %s %d %s", &guid, &h.Name, &h.Switch, &h.SwitchPort, &swGUID); err != nil {
			return nil, fmt.Errorf("%s: line %q: %w", path, l, err)
		}
		if h.PortGUID, err = fabric.ParseGUID(guid); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.SwitchGUID, err = fabric.ParseGUID(swGUID); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// readLines returns the non-blank lines of a file.
func readLines(path string) ([]string, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var lines []string
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return lines, nil
}
