package smcontainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// ManagedConfig says how to run OpenSM in a container of its own.
type ManagedConfig struct {
	Client *client.Client
	// Name is OpenSM's container ([opensm] container). A container of that name
	// that this package created is replaced; any other is refused.
	Name string
	// Manager is the manager's own container ([opensm] manager_container).
	Manager string
	// Image is what OpenSM's container runs; "" for the manager's image.
	Image   string
	Command []string // the OpenSM executable in the image and its leading arguments
	// ConfFile, EnvFile (KEY=VALUE lines for OpenSM's environment, read by
	// the manager at every start; "" for none), ConfigDir and LogFile are as
	// for opensm.ProcessConfig. ConfigDir and LogFile must be on a mount of
	// the manager's container: OpenSM's container gets those directories, and
	// only the others it needs (see Managed.mounts).
	ConfFile, EnvFile, ConfigDir, LogFile string
	// CacheDir is OpenSM's cache directory, as opensm.ProcessConfig's; it
	// must be on a mount of the manager (config_dir is).
	CacheDir string
	// User, if set, is whom OpenSM's container runs as (its numeric ids, as
	// the manager's container resolves them): config_dir, the cache and the
	// log are handed to it at every start, as by the process driver.
	User *opensm.RunAs
	// StatusFile, if set, receives the supervisor's status (opensm.Status as
	// JSON) at every change, for --status.
	StatusFile string
	Logger     *slog.Logger // nil: slog.Default()
}

// Managed runs OpenSM in a container of its own (an opensm.Runner): each
// Start creates and starts a new container, which Docker removes once it has
// stopped.
type Managed struct {
	cfg     ManagedConfig
	manager *container.InspectResponse
	image   string
	log     *slog.Logger
}

// PrepareManaged checks everything the managed runner relies on and returns
// the supervisor of the OpenSM it runs, which starts nothing until Start, and
// the flavour of the image's OpenSM. The supervisor starts OpenSM's container
// and keeps one running until Stop or StopTerm (see opensm.Supervisor); its
// stop sends SIGTERM through the engine, SIGKILL after 10 s, and Docker
// removes the container. It fails, with an error naming what is wrong and what to do, when
// the manager's container is missing or not running, the name of OpenSM's
// container is taken by a container this manager did not create, config_dir
// or the log file is not on a mount of the manager's container, or the image
// has no OpenSM.
func PrepareManaged(ctx context.Context, c ManagedConfig) (*opensm.Supervisor, fabric.Flavour, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.Command) == 0 {
		return nil, 0, errors.New("[opensm] command is empty")
	}
	mgr, err := inspectRequired(ctx, c.Client, c.Manager, fmt.Sprintf("with [opensm] driver = managed the manager "+
		"must run in a container of the name [opensm] manager_container says (docker run --name %s ...), whose PID "+
		"namespace OpenSM's container joins", c.Manager))
	if err != nil {
		return nil, 0, err
	}
	if mgr.State == nil || !mgr.State.Running {
		return nil, 0, fmt.Errorf("container %s ([opensm] manager_container) is not running: it must be the "+
			"container this manager runs in", c.Manager)
	}
	for _, p := range []struct{ key, path string }{
		{"config_dir", c.ConfigDir}, {"log_file", c.LogFile},
	} {
		if p.path != "" && mountOf(mgr, p.path) == nil {
			return nil, 0, fmt.Errorf("[opensm] %s %s is not on a volume or bind mount of container %s: OpenSM's "+
				"container, which gets that directory from the mount, would not see it; mount it (for example "+
				"-v afm_data:/var/lib/alternative-fabric-manager) or move it onto a mount", p.key, p.path, c.Manager)
		}
	}
	// The mount is the one this manager writes to: it runs in that container.
	if c.User != nil {
		if err := opensm.CheckHandOver(c.User); err != nil {
			return nil, 0, err
		}
	}
	if err := checkSharedDir(ctx, c.Client, c.Manager, c.ConfigDir, "config_dir"); err != nil {
		return nil, 0, fmt.Errorf("%w (is this manager running in container %s?)", err, c.Manager)
	}
	if _, err := checkName(ctx, c.Client, c.Name, mgr.ID); err != nil {
		return nil, 0, err
	}
	image := c.Image
	if image == "" {
		image = mgr.Image // the ID: exactly the manager's image, even if its tag moved since
	}
	flavour, err := detectFlavour(ctx, c.Client, image, c.Command)
	if err != nil {
		return nil, 0, err
	}
	m := &Managed{cfg: c, manager: mgr, image: image, log: c.Logger}
	return opensm.NewSupervisor(m, opensm.SupervisorConfig{LogFile: c.LogFile, StatusFile: c.StatusFile,
		Logger: c.Logger}), flavour, nil
}

// checkName returns the container of that name if this manager created it
// (nil when there is none), and refuses any other: one without our role label,
// and one that is the OpenSM of another manager's container (labelled with
// that container's ID). A label anyone could copy is not enough: only the
// manager container's own ID says the container is this manager's to replace.
func checkName(ctx context.Context, cli *client.Client, name, managerID string) (*container.InspectResponse, error) {
	existing, err := inspect(ctx, cli, name)
	if err != nil || existing == nil {
		return nil, err
	}
	if existing.Config == nil || existing.Config.Labels[roleLabel] != roleOpenSM {
		return nil, fmt.Errorf("a container named %s exists that the manager did not start (it has no label %s=%s): "+
			"remove it (docker rm -f %s) if it is an old OpenSM, or set [opensm] container to another name",
			name, roleLabel, roleOpenSM, name)
	}
	if owner := existing.Config.Labels[managerLabel]; owner != managerID {
		return nil, fmt.Errorf("a container named %s is the OpenSM of another manager container (%s %q), not of "+
			"this one (%s): the manager replaces only its own; if that manager is gone, remove it (docker rm -f %s), "+
			"or give each manager its own [opensm] container", name, managerLabel, short(owner), short(managerID), name)
	}
	return existing, nil
}

// Start replaces any earlier container of ours of that name with a new one and
// starts it.
func (m *Managed) Start(ctx context.Context) (opensm.Instance, error) {
	return m.launch(ctx)
}

// launch replaces any earlier container of ours of that name with a new one and
// starts it.
func (m *Managed) launch(ctx context.Context) (*openSMContainer, error) {
	if err := m.removeOld(ctx); err != nil {
		return nil, err
	}
	var env []string
	if m.cfg.EnvFile != "" {
		var err error
		if env, err = opensm.ReadEnvFile(m.cfg.EnvFile); err != nil {
			return nil, fmt.Errorf("opensm: %w", err)
		}
	}
	env, err := opensm.WithCacheDir(m.cfg.CacheDir, env)
	if err != nil {
		return nil, err
	}
	args := slices.Clone(m.cfg.Command[1:])
	if m.cfg.ConfFile != "" {
		args = append(args, "-F", m.cfg.ConfFile)
	}
	mounts, err := m.mounts(env)
	if err != nil {
		return nil, err
	}
	if u := m.cfg.User; u != nil {
		if err := opensm.HandOver(u, []string{m.cfg.ConfigDir, opensm.CacheDirOf(env)}, []string{m.cfg.LogFile}); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	created, err := m.cfg.Client.ContainerCreate(cctx, client.ContainerCreateOptions{
		Name: m.cfg.Name,
		Config: &container.Config{
			Image:      m.image,
			Entrypoint: []string{m.cfg.Command[0]},
			Cmd:        args,
			Env:        env,
			WorkingDir: m.cfg.ConfigDir,
			User:       m.containerUser(),
			Labels:     map[string]string{roleLabel: roleOpenSM, managerLabel: m.manager.ID},
		},
		HostConfig: m.hostConfig(mounts),
	})
	if err != nil {
		return nil, fmt.Errorf("opensm: create container %s: %w", m.cfg.Name, err)
	}
	// Waiting for removal is asked before the start, so that an OpenSM that
	// exits at once is not missed.
	waitCtx, stopWaiting := context.WithCancel(context.WithoutCancel(ctx))
	wait := m.cfg.Client.ContainerWait(waitCtx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
	if _, err := m.cfg.Client.ContainerStart(cctx, created.ID, client.ContainerStartOptions{}); err != nil {
		stopWaiting()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engineTimeout)
		defer cancel()
		_, _ = m.cfg.Client.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true})
		return nil, fmt.Errorf("opensm: start container %s: %w", m.cfg.Name, err)
	}
	inst := &openSMContainer{cli: m.cfg.Client, name: m.cfg.Name, id: created.ID, done: make(chan struct{})}
	if c, err := inspect(ctx, m.cfg.Client, created.ID); err == nil && c != nil && c.State != nil {
		inst.pid = c.State.Pid
	}
	go func() {
		defer stopWaiting()
		defer close(inst.done)
		select {
		case r := <-wait.Result:
			inst.exit = fmt.Sprintf("exit status %d", r.StatusCode)
			if r.Error != nil && r.Error.Message != "" {
				inst.exit += ": " + r.Error.Message
			}
		case err := <-wait.Error:
			inst.exit = "unknown (" + err.Error() + ")"
		}
	}()
	return inst, nil
}

// groupAdd are the supplementary groups of OpenSM's user, such as the one
// its devices are given to.
func (m *Managed) groupAdd() []string {
	var groups []string
	if u := m.cfg.User; u != nil {
		for _, g := range u.Groups {
			groups = append(groups, fmt.Sprint(g))
		}
	}
	return groups
}

// containerUser is OpenSM's container's user ("uid:gid"), "" for the
// image's.
func (m *Managed) containerUser() string {
	if u := m.cfg.User; u != nil {
		return fmt.Sprintf("%d:%d", u.UID, u.GID)
	}
	return ""
}

// hostConfig is OpenSM's container's: in the manager's PID namespace, on the
// host network, with mounts, and with no privilege.
func (m *Managed) hostConfig(mounts []mount.Mount) *container.HostConfig {
	hc := m.manager.HostConfig
	return &container.HostConfig{
		NetworkMode: "host",
		// In the manager's PID namespace: when its init (the manager, or
		// docker run --init's) exits, the kernel kills OpenSM too.
		PidMode:    container.PidMode("container:" + m.manager.ID),
		Mounts:     mounts,
		AutoRemove: true,
		// OpenSM prints the keys it loaded: keep no log of its output.
		LogConfig: container.LogConfig{Type: "none"},
		// OpenSM needs no capability: root owns the InfiniBand devices and
		// its files. Never the manager's privilege either (every device and
		// capability of the host): a privileged manager's OpenSM gets the
		// InfiniBand devices alone (see devices).
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		GroupAdd:    m.groupAdd(),
		Resources: container.Resources{
			Devices:           m.devices(),
			DeviceCgroupRules: hc.DeviceCgroupRules,
			Ulimits:           hc.Ulimits,
		},
	}
}

// mounts are what OpenSM's container gets of the manager container's mounts:
// only the directories OpenSM uses, each bound by itself at the same path, and
// nothing else of the manager's (its configuration with the API's secrets,
// the database, the Docker socket). They are config_dir and the log file's
// directory, and the directories OpenSM's environment (env, from env_file)
// names: OSM_CACHE_DIR (its per-port state, the M_Keys it set; by default
// /var/cache/opensm) and OSM_TMP_DIR read-write, the libraries of LD_PRELOAD
// (the simulated fabric's libumad2sim) read-only. A directory on no mount of
// the manager is left to OpenSM's own container, as it would be to the
// manager's.
func (m *Managed) mounts(env []string) ([]mount.Mount, error) {
	type need struct {
		path     string
		readOnly bool
		required bool
	}
	needs := []need{{path: m.cfg.ConfigDir, required: true}, {path: filepath.Dir(m.cfg.LogFile), required: true}}
	cache := "/var/cache/opensm"
	for _, kv := range env {
		key, value, _ := strings.Cut(kv, "=")
		switch key {
		case "OSM_CACHE_DIR":
			cache = value
		case "OSM_TMP_DIR":
			needs = append(needs, need{path: value})
		case "LD_PRELOAD":
			for _, lib := range strings.FieldsFunc(value, func(r rune) bool { return r == ' ' || r == ':' }) {
				needs = append(needs, need{path: filepath.Dir(lib), readOnly: true})
			}
		}
	}
	needs = append(needs, need{path: cache})
	// Outer directories first, so that one inside another already bound
	// read-write (or bound read-only inside a read-only one) is not bound twice.
	slices.SortStableFunc(needs, func(a, b need) int { return len(a.path) - len(b.path) })
	var out []mount.Mount
	for _, n := range needs {
		if !filepath.IsAbs(n.path) {
			continue
		}
		n.path = filepath.Clean(n.path)
		if slices.ContainsFunc(out, func(o mount.Mount) bool { return within(n.path, o.Target) && (!o.ReadOnly || n.readOnly) }) {
			continue
		}
		mt, err := m.bindOf(n.path, n.readOnly, n.required)
		if err != nil {
			return nil, err
		}
		if mt != nil {
			out = append(out, *mt)
		}
	}
	return out, nil
}

// bindOf binds path, a directory the manager sees on one of its mounts, at
// the same path: the host's directory under that mount's source, so that
// OpenSM gets that directory and not the rest of the mount (a volume holding
// config_dir holds the SQLite database too). nil when path is on no mount and
// not required; a missing directory OpenSM writes to is made first.
func (m *Managed) bindOf(path string, readOnly, required bool) (*mount.Mount, error) {
	mp := mountOf(m.manager, path)
	if mp == nil || (mp.Type != mount.TypeBind && mp.Type != mount.TypeVolume) {
		if required {
			return nil, fmt.Errorf("opensm: %s is not on a volume or bind mount of container %s", path, m.cfg.Manager)
		}
		return nil, nil // tmpfs and the like are the manager's own; OpenSM uses its container's
	}
	if mp.Source == "" {
		return nil, fmt.Errorf("opensm: %s is on mount %s of container %s, whose host path the engine does not "+
			"tell (a volume driver other than local): OpenSM's container gets only the directories it needs, bound "+
			"from the host; put it on a local volume or a bind mount", path, mp.Destination, m.cfg.Manager)
	}
	if !readOnly {
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, fmt.Errorf("opensm: %w", err)
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, nil // nothing there to give OpenSM
	}
	rel, err := filepath.Rel(mp.Destination, path)
	if err != nil {
		return nil, fmt.Errorf("opensm: %s on mount %s: %w", path, mp.Destination, err)
	}
	return &mount.Mount{Type: mount.TypeBind, Source: filepath.Join(mp.Source, rel), Target: path,
		ReadOnly: readOnly || !mp.RW}, nil
}

// devices are the manager container's devices, and, when that container is
// privileged (it then sees every device of the host), the InfiniBand devices
// it sees (umad, issm, uverbs): what OpenSM opens, without the privilege.
func (m *Managed) devices() []container.DeviceMapping {
	devices := slices.Clone(m.manager.HostConfig.Devices)
	if !m.manager.HostConfig.Privileged {
		return devices
	}
	entries, err := os.ReadDir(infinibandDevices)
	if err != nil {
		m.log.Warn("OpenSM's container gets no InfiniBand device", "dir", infinibandDevices, "error", err)
		return devices
	}
	for _, e := range entries {
		if e.Type()&os.ModeCharDevice != 0 {
			p := filepath.Join(infinibandDevices, e.Name())
			devices = append(devices, container.DeviceMapping{PathOnHost: p, PathInContainer: p, CgroupPermissions: "rwm"})
		}
	}
	return devices
}

// infinibandDevices is where the InfiniBand devices are, in the manager's
// container as on the host.
const infinibandDevices = "/dev/infiniband"

// removeOld removes a container of this manager left with OpenSM's name (by a
// manager that was killed before Docker removed it, for example), by the ID it
// was inspected with: a container that took the name meanwhile is not
// touched. One that is not ours is refused, as at start-up.
func (m *Managed) removeOld(ctx context.Context) error {
	old, err := checkName(ctx, m.cfg.Client, m.cfg.Name, m.manager.ID)
	if err != nil || old == nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	_, err = m.cfg.Client.ContainerRemove(rctx, old.ID, client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("opensm: remove the old container %s (%s): %w", m.cfg.Name, short(old.ID), err)
	}
	if err == nil {
		m.log.Info("removed an old OpenSM container", "container", m.cfg.Name, "id", short(old.ID))
	}
	// A removal already under way (conflict) ends soon; wait for the name to be free.
	for i := 0; i < 100; i++ {
		c, err := inspect(ctx, m.cfg.Client, m.cfg.Name)
		if err != nil || c == nil {
			return err
		}
		if c.ID != old.ID {
			_, err := checkName(ctx, m.cfg.Client, m.cfg.Name, m.manager.ID)
			if err == nil {
				err = fmt.Errorf("opensm: another container %s (%s) took the name meanwhile", m.cfg.Name, short(c.ID))
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("opensm: the old container %s is still there after 10 s", m.cfg.Name)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
