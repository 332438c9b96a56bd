package smcontainer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// These tests drive a real Docker engine (AFM_TEST_DOCKER_HOST, such as
// unix:///tmp/x/docker.sock) and the project's image (AFM_TEST_DOCKER_IMAGE),
// which make test starts and builds with scripts/docker-env.sh, and the real
// OpenSM of that image on a simulated fabric.

const defaultPartition = "Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n"

// rig is one test's engine, image, fabric and OpenSM files.
type rig struct {
	cli       *client.Client
	image     string
	fab       *fabricsim.Fabric
	configDir string // on the fabric's directory, which the containers mount
	confFile  string
	logFile   string
	prefix    string // of the names of this test's containers
}

// dockerForTests is what make test does for these tests.
const dockerForTests = "starts a Docker engine and builds the image"

func newRig(t *testing.T) *rig {
	t.Helper()
	t.Setenv("DOCKER_HOST", testenv.Require(t, "AFM_TEST_DOCKER_HOST", dockerForTests))
	image := testenv.Require(t, "AFM_TEST_DOCKER_IMAGE", dockerForTests)
	cli, err := Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	fab := fabricsim.StartT(t, fabricsim.Options{Hosts: 1})
	r := &rig{cli: cli, image: image, fab: fab, prefix: "afm-test-" + randomHex(4)}
	r.useConfigDir(t, filepath.Join(fab.Dir, "opensm"))
	t.Cleanup(func() { r.removeAll(t) })
	return r
}

// useConfigDir writes OpenSM's files into dir, which becomes the rig's
// config_dir.
func (r *rig) useConfigDir(t *testing.T, dir string) {
	t.Helper()
	r.configDir = dir
	r.confFile = filepath.Join(r.configDir, "opensm.conf")
	r.logFile = filepath.Join(r.configDir, "opensm.log")
	if err := os.MkdirAll(r.configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := opensm.RenderConf(opensm.ConfOptions{
		PartitionsFile:       filepath.Join(r.configDir, "partitions.conf"),
		LogFile:              r.logFile,
		PerModuleLoggingFile: filepath.Join(r.configDir, "per-module-logging.conf"),
		Passthrough:          []opensm.KeyValue{{Key: "guid", Value: r.fab.SMGUID.String()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string][]byte{
		r.confFile: conf,
		filepath.Join(r.configDir, "per-module-logging.conf"): opensm.PerModuleLoggingConf(),
		filepath.Join(r.configDir, "partitions.conf"):         []byte(defaultPartition),
	} {
		if err := opensm.WriteFileAtomic(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// mounts are what this test's containers need of the host: the fabric's
// directory (env file, OpenSM's files) and libumad2sim, at the same paths.
func (r *rig) mounts(t *testing.T) []mount.Mount {
	t.Helper()
	var umad string
	for _, kv := range r.fab.Env() {
		if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
			umad = filepath.Dir(v)
		}
	}
	if umad == "" {
		t.Fatal("the fabric's environment has no LD_PRELOAD")
	}
	return []mount.Mount{
		{Type: mount.TypeBind, Source: r.fab.Dir, Target: r.fab.Dir},
		{Type: mount.TypeBind, Source: umad, Target: umad, ReadOnly: true},
	}
}

// run starts a container of the image as name, with an init, on the host
// network, running entrypoint.
func (r *rig) run(t *testing.T, name string, mounts []mount.Mount, env []string, labels map[string]string, entrypoint ...string) string {
	t.Helper()
	ctx := t.Context()
	init := true
	created, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: r.image, Entrypoint: entrypoint, Env: env, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "host", Init: &init, Mounts: mounts},
	})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	if _, err := r.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container %s: %v", name, err)
	}
	return created.ID
}

// manager starts a stand-in for the manager's container: what matters to the
// managed driver is its PID namespace and its mounts.
func (r *rig) manager(t *testing.T) string {
	t.Helper()
	name := r.prefix + "-manager"
	r.run(t, name, r.mounts(t), nil, nil, "sleep", "infinity")
	return name
}

// removeAll removes every container of this test.
func (r *rig) removeAll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		t.Errorf("list containers: %v", err)
		return
	}
	for _, c := range list.Items {
		for _, n := range c.Names {
			if strings.HasPrefix(strings.TrimPrefix(n, "/"), r.prefix) {
				_, _ = r.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
	}
}

func (r *rig) managedConfig(managerName string) ManagedConfig {
	return ManagedConfig{Client: r.cli, Name: r.prefix + "-opensm", Manager: managerName, Command: []string{"opensm"},
		ConfFile: r.confFile, EnvFile: r.fab.EnvFile(), ConfigDir: r.configDir, LogFile: r.logFile,
		StatusFile: filepath.Join(r.configDir, "driver-status.json"),
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil))}
}

func (r *rig) inspect(t *testing.T, name string) *container.InspectResponse {
	t.Helper()
	c, err := inspect(t.Context(), r.cli, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor asks Docker about every 90 ms: a container's start is slow.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, 90*time.Second, cond)
}

// containerID is the ID of the container OpenSM runs in now, "" when none.
func containerID(sm *opensm.Supervisor) string {
	if c, ok := sm.Current().(*openSMContainer); ok {
		return c.id
	}
	return ""
}

// runDriver starts the driver for term 1; stop stops it for term 1 (and
// for good at the test's end).
func runDriver(t *testing.T, sm *opensm.Supervisor) (stop func() error) {
	if err := sm.Start(1); err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return sm.StopTerm(ctx, 1)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = sm.Stop(ctx)
	})
	return stop
}

// applyH1 puts H1 in partition 0x0065 through the driver, as the applier
// does, and checks H1's real pkey table.
func (r *rig) applyH1(t *testing.T, sm *opensm.Supervisor) {
	t.Helper()
	ctx := t.Context()
	if err := sm.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	partitions := defaultPartition + fmt.Sprintf("net65=0x0065 : %s=full ;\n", fabricsim.HostGUID(1))
	if err := opensm.WriteFileAtomic(filepath.Join(r.configDir, "partitions.conf"), []byte(partitions), 0o644); err != nil {
		t.Fatal(err)
	}
	// Position, SIGHUP, wait: as the applier does, through a tail of the log.
	tail, err := opensm.OpenTail(r.logFile, opensm.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	w, _, err := tail.WatchSweep()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := sm.Reload(ctx); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	res, err := w.Wait(ctx, time.Minute)
	if err != nil || res.Outcome != opensm.Applied {
		t.Fatalf("the sweep after SIGHUP through the engine: %+v, %v", res, err)
	}
	pkeys, err := r.fab.PKeys(ctx, fabricsim.HostGUID(1))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pkeys, 0x8065) {
		t.Fatalf("H1's pkeys %#04x lack 0x8065", pkeys)
	}
}

// startUpstream runs the OpenSM that prepare made ready, which must be the
// image's (Debian's upstream) OpenSM, and applies H1's partition through it.
func (r *rig) startUpstream(t *testing.T, prepare func() (*opensm.Supervisor, fabric.Flavour, error)) (sm *opensm.Supervisor, stop func() error) {
	t.Helper()
	sm, flavour, err := prepare()
	if err != nil {
		t.Fatal(err)
	}
	if flavour != fabric.Upstream {
		t.Errorf("flavour of the image's OpenSM = %v, want upstream (Debian's OpenSM)", flavour)
	}
	stop = runDriver(t, sm)
	r.applyH1(t, sm)
	return sm, stop
}

func TestManagedRunsOpenSMInTheManagersPIDNamespace(t *testing.T) {
	r := newRig(t)
	mgr := r.manager(t)
	cfg := r.managedConfig(mgr)
	m, stop := r.startUpstream(t, func() (*opensm.Supervisor, fabric.Flavour, error) {
		return PrepareManaged(t.Context(), cfg)
	})

	first := containerID(m)
	c := r.inspect(t, cfg.Name)
	mgrID := r.inspect(t, mgr).ID
	if c == nil || c.ID != first {
		t.Fatalf("container %s is not the running OpenSM %s", cfg.Name, short(first))
	}
	if got := string(c.HostConfig.PidMode); got != "container:"+mgrID {
		t.Errorf("PidMode = %q, want the manager's PID namespace", got)
	}
	if c.HostConfig.LogConfig.Type != "none" {
		t.Errorf("log driver = %q, want none (OpenSM's output holds its keys)", c.HostConfig.LogConfig.Type)
	}
	if !c.HostConfig.AutoRemove || c.HostConfig.NetworkMode != "host" {
		t.Errorf("AutoRemove %v, network %q; want auto-remove on the host network", c.HostConfig.AutoRemove, c.HostConfig.NetworkMode)
	}

	// OpenSM killed: started again, in a new container, and signalled again.
	if _, err := r.cli.ContainerKill(t.Context(), first, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a restarted OpenSM", func() bool { return m.Restarts() == 1 && containerID(m) != "" && containerID(m) != first })
	r.applyH1(t, m)

	// The manager's container removed: OpenSM dies with its PID namespace and
	// Docker removes its container.
	if _, err := r.cli.ContainerRemove(t.Context(), mgr, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OpenSM's container gone with the manager's", func() bool { return r.inspect(t, cfg.Name) == nil })
	// The driver cannot start OpenSM again, the PID namespace being gone: it
	// says so, and keeps trying.
	waitFor(t, "the failed restart in the driver's status", func() bool {
		st := m.Status()
		return st.State == opensm.StateFailed && strings.Contains(st.LastError, cfg.Name)
	})
	if err := m.WaitReady(t.Context()); err == nil {
		t.Error("WaitReady succeeded with no OpenSM")
	}
	if err := stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestManagedStopRemovesOpenSM(t *testing.T) {
	r := newRig(t)
	cfg := r.managedConfig(r.manager(t))
	m, _, err := PrepareManaged(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runDriver(t, m)
	if err := m.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.State != opensm.StateRunning || st.PID == 0 {
		t.Errorf("status of a ready OpenSM = %+v, want running with its PID", st)
	}
	if err := stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if c := r.inspect(t, cfg.Name); c != nil {
		t.Errorf("container %s is still there (%s) after Stop returned", cfg.Name, c.State.Status)
	}
	if err := m.WaitReady(t.Context()); err == nil {
		t.Error("WaitReady succeeded after Stop")
	}
	if st := m.Status(); st.State != opensm.StateStopped {
		t.Errorf("state after Stop = %s, want stopped", st.State)
	}
	// The stopped term's late Start (the applier racing the lease's stop)
	// is refused, and creates no container.
	if err := m.Start(1); !errors.Is(err, opensm.ErrTermStopped) {
		t.Errorf("Start(1) after StopTerm(1) = %v, want opensm.ErrTermStopped", err)
	}
	if c := r.inspect(t, cfg.Name); c != nil || m.Status().State != opensm.StateStopped {
		t.Errorf("after a refused Start: container %v, state %s; want none, stopped", c != nil, m.Status().State)
	}
	// Started again, as HA does for a new term after it stopped OpenSM.
	if err := m.Start(2); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitReady(t.Context()); err != nil {
		t.Fatalf("WaitReady after a second Start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.StopTerm(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if c := r.inspect(t, cfg.Name); c != nil {
		t.Errorf("container %s is still there (%s) after StopTerm returned", cfg.Name, c.State.Status)
	}
}

// TestManagedRefusesBadSetups: each is an error at start-up that names the
// thing, and nothing is left started.
func TestManagedRefusesBadSetups(t *testing.T) {
	r := newRig(t)
	mgr := r.manager(t)
	foreign := r.prefix + "-foreign"
	r.run(t, foreign, nil, nil, nil, "sleep", "infinity")
	// Labelled as an OpenSM of this package, but of another manager's
	// container: not this manager's to remove.
	others := r.prefix + "-others"
	otherID := strings.Repeat("0123456789abcdef", 4)
	r.run(t, others, nil, nil, map[string]string{roleLabel: roleOpenSM, managerLabel: otherID}, "sleep", "infinity")
	stray := t.TempDir() // on no mount of the manager's container

	for _, tc := range []struct {
		name   string
		change func(c *ManagedConfig)
		want   []string
	}{
		{"no manager container", func(c *ManagedConfig) { c.Manager = r.prefix + "-nobody" },
			[]string{"no container named " + r.prefix + "-nobody", "manager_container"}},
		{"name taken by a container that is not ours", func(c *ManagedConfig) { c.Name = foreign },
			[]string{"a container named " + foreign + " exists that the manager did not start", "docker rm -f " + foreign}},
		{"name taken by another manager's OpenSM", func(c *ManagedConfig) { c.Name = others },
			[]string{"a container named " + others + " is the OpenSM of another manager container", short(otherID),
				"docker rm -f " + others}},
		{"image without opensm", func(c *ManagedConfig) { c.Image = "debian:bookworm-slim" },
			[]string{"image debian:bookworm-slim has no opensm", "[opensm] image"}},
		{"config_dir not mounted", func(c *ManagedConfig) { c.ConfigDir, c.LogFile = stray, filepath.Join(stray, "opensm.log") },
			[]string{"[opensm] config_dir " + stray + " is not on a volume or bind mount of container " + mgr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := r.managedConfig(mgr)
			tc.change(&cfg)
			_, _, err := PrepareManaged(t.Context(), cfg)
			if err == nil {
				t.Fatal("PrepareManaged succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			r.checkNothingStarted(t, cfg.Name, foreign, others)
		})
	}
	for _, name := range []string{foreign, others} {
		if c := r.inspect(t, name); c == nil || !c.State.Running {
			t.Errorf("container %s, which is not ours, was touched", name)
		}
	}
}

// checkNothingStarted fails if an OpenSM container of this package exists,
// other than those in keep.
func (r *rig) checkNothingStarted(t *testing.T, name string, keep ...string) {
	t.Helper()
	list, err := r.cli.ContainerList(t.Context(), client.ContainerListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		role := c.Labels[roleLabel]
		if slices.ContainsFunc(keep, func(k string) bool { return slices.Contains(c.Names, "/"+k) }) {
			continue
		}
		if role != "" || slices.Contains(c.Names, "/"+name) {
			t.Errorf("container %v (role %q) was left behind", c.Names, role)
		}
	}
}

func TestConnectNamesTheMissingSocket(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "docker.sock"))
	_, err := Connect(t.Context())
	if err == nil {
		t.Fatal("Connect succeeded without an engine")
	}
	for _, w := range []string{"cannot reach the Docker engine at unix://", "-v /var/run/docker.sock:/var/run/docker.sock", "DOCKER_HOST"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// external starts OpenSM the way an operator would for driver = docker: its
// own container, config_dir's directory mounted at the same path.
func (r *rig) external(t *testing.T) string {
	t.Helper()
	name := r.prefix + "-external"
	env, err := opensm.ReadEnvFile(r.fab.EnvFile())
	if err != nil {
		t.Fatal(err)
	}
	r.run(t, name, r.mounts(t), env, nil, "opensm", "-F", r.confFile)
	return name
}

func (r *rig) externalConfig(name string) ExternalConfig {
	return ExternalConfig{Client: r.cli, Name: name, ConfigDir: r.configDir, LogFile: r.logFile,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), PollInterval: 100 * time.Millisecond}
}

func TestExternalSignalsOpenSMItDoesNotOwn(t *testing.T) {
	r := newRig(t)
	name := r.external(t)
	e, stop := r.startUpstream(t, func() (*opensm.Supervisor, fabric.Flavour, error) {
		return PrepareExternal(t.Context(), r.externalConfig(name), []string{"opensm"})
	})

	// Someone restarts it: a restart, and the driver signals the new one.
	timeout := 10
	if _, err := r.cli.ContainerRestart(t.Context(), name, client.ContainerRestartOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restart seen", func() bool { return e.Restarts() == 1 })
	r.applyH1(t, e)

	// Stopped by someone else: the driver says so, and its WaitReady fails.
	if _, err := r.cli.ContainerStop(t.Context(), name, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stopped container in the driver's status", func() bool {
		st := e.Status()
		return st.State == opensm.StateFailed && strings.Contains(st.LastError, "is not running")
	})
	if err := e.Reload(t.Context()); err == nil {
		t.Error("Reload succeeded with the container stopped")
	}
	if _, err := r.cli.ContainerStart(t.Context(), name, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	// Until the driver's next look at the container, WaitReady still fails at
	// once (the applier tries again later).
	waitFor(t, "the container seen running again", func() bool { return e.Status().State != opensm.StateFailed })
	if e.Restarts() != 2 {
		t.Errorf("Restarts = %d after the container's third start, want 2", e.Restarts())
	}
	r.applyH1(t, e)

	if err := stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if c := r.inspect(t, name); c == nil || !c.State.Running {
		t.Error("the driver stopped the container it only signals")
	}
}

func TestExternalRefusesBadSetups(t *testing.T) {
	r := newRig(t)
	partitions := filepath.Join(r.configDir, "partitions.conf")
	fileOnly := r.prefix + "-file-only"
	r.run(t, fileOnly, []mount.Mount{{Type: mount.TypeBind, Source: partitions, Target: partitions}}, nil, nil, "sleep", "infinity")
	unmounted := r.prefix + "-unmounted"
	r.run(t, unmounted, nil, nil, nil, "sleep", "infinity")

	for _, tc := range []struct{ name, container, want string }{
		{"missing", r.prefix + "-nobody", "no container named " + r.prefix + "-nobody"},
		{"partitions.conf mounted as a file", fileOnly, "bind-mounts the file " + partitions + ": mount the directory " + r.configDir},
		{"config_dir not mounted", unmounted, "container " + unmounted + " does not see [opensm] config_dir " + r.configDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := PrepareExternal(t.Context(), r.externalConfig(tc.container), []string{"opensm"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("PrepareExternal: %v; want an error saying %q", err, tc.want)
			}
		})
	}
	entries, err := os.ReadDir(r.configDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".afm-mount-check") {
			t.Errorf("the mount check left %s behind", e.Name())
		}
	}
}

// OpenSM's container gets of the manager's container only what OpenSM uses:
// config_dir (not the rest of the mount it is on, which holds the database),
// the fabric's directories its environment names, the InfiniBand devices; not
// the manager's configuration with its secrets, another volume, a control
// socket (whatever its name), its /dev/log (OpenSM would send syslog its
// keys), nor the manager's privilege. What the container
// sees is asked of the engine, inside OpenSM's running container.
func TestManagedGivesOpenSMOnlyWhatItNeeds(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	// The manager's data mount: config_dir and the SQLite database side by side.
	data := t.TempDir()
	r.useConfigDir(t, filepath.Join(data, "opensm"))
	database := filepath.Join(data, "afm.db")
	secrets := t.TempDir()
	socket := filepath.Join(t.TempDir(), "engine.sock") // a control socket by any other name
	for _, f := range []string{database, filepath.Join(secrets, "afm.conf"), socket} {
		if err := os.WriteFile(f, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A syslog socket mounted into the manager's container (as some
	// deployments do): OpenSM would send it its keys.
	devLog := filepath.Join(t.TempDir(), "log")
	syslogd, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: devLog, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer syslogd.Close()
	volume := r.prefix + "-db"
	mounts := append(r.mounts(t),
		mount.Mount{Type: mount.TypeBind, Source: devLog, Target: "/dev/log"},
		mount.Mount{Type: mount.TypeBind, Source: data, Target: data},
		mount.Mount{Type: mount.TypeBind, Source: secrets, Target: "/etc/alternative-fabric-manager", ReadOnly: true},
		mount.Mount{Type: mount.TypeBind, Source: socket, Target: "/run/engine.sock"},
		mount.Mount{Type: mount.TypeVolume, Source: volume, Target: "/var/lib/afm-db"})
	t.Cleanup(func() {
		_, _ = r.cli.VolumeRemove(context.Background(), volume, client.VolumeRemoveOptions{Force: true})
	})
	mgr := r.prefix + "-manager"
	init := true
	created, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   mgr,
		Config: &container.Config{Image: r.image, Entrypoint: []string{"sleep", "infinity"}},
		// Not privileged: this engine's host cannot grant every capability
		// (a privileged manager is checked by privilegeOf's test).
		HostConfig: &container.HostConfig{NetworkMode: "host", Init: &init, Mounts: mounts, CapAdd: []string{"SYS_ADMIN"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}

	m, _, err := PrepareManaged(ctx, r.managedConfig(mgr))
	if err != nil {
		t.Fatal(err)
	}
	runDriver(t, m)
	r.applyH1(t, m) // OpenSM works with what it got
	c := r.inspect(t, containerID(m))
	if c == nil {
		t.Fatal("no OpenSM container")
	}
	if c.HostConfig.Privileged || len(c.HostConfig.CapAdd) > 0 || !slices.Contains(c.HostConfig.CapDrop, "ALL") {
		t.Errorf("OpenSM's container: privileged %v, cap-add %v, cap-drop %v; want neither the manager's privilege "+
			"nor a capability", c.HostConfig.Privileged, c.HostConfig.CapAdd, c.HostConfig.CapDrop)
	}
	var targets []string
	for _, mp := range c.Mounts {
		targets = append(targets, mp.Destination)
	}
	if !slices.Contains(targets, r.configDir) {
		t.Errorf("OpenSM's mounts %q lack config_dir %s", targets, r.configDir)
	}
	for _, p := range []string{data, "/etc/alternative-fabric-manager", "/run/engine.sock", "/var/lib/afm-db", "/dev/log"} {
		if slices.Contains(targets, p) {
			t.Errorf("OpenSM's container mounts the manager's %s (mounts %q)", p, targets)
		}
	}
	for _, p := range []string{database, "/etc/alternative-fabric-manager/afm.conf", "/run/engine.sock", "/dev/log"} {
		_, err := r.cli.ContainerStatPath(ctx, c.ID, client.ContainerStatPathOptions{Path: p})
		if err == nil {
			t.Errorf("OpenSM's container sees %s", p)
		} else if !cerrdefs.IsNotFound(err) {
			t.Errorf("stat %s in OpenSM's container: %v", p, err)
		}
	}
}
