package smcontainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// ExternalConfig says which OpenSM container to signal.
type ExternalConfig struct {
	Client *client.Client
	Name   string // [opensm] container
	// ConfigDir must be bind-mounted into the container at the same path;
	// LogFile is OpenSM's log there.
	ConfigDir, LogFile string
	StatusFile         string       // as in ManagedConfig
	Logger             *slog.Logger // nil: slog.Default()
	// PollInterval is how often Run asks the engine about the container; 0
	// for a second.
	PollInterval time.Duration
}

// settle is how long after its start a container that has not been seen to log
// its version line is taken as safe to signal: the manager may have started
// following the log after that line.
const settle = 3 * time.Second

// External watches an OpenSM container that someone else runs (an
// opensm.Watcher): the manager signals it but never starts, stops or restarts
// it.
type External struct {
	cfg ExternalConfig
	log *slog.Logger
}

// PrepareExternal checks that the container exists and sees config_dir (a file
// written there shows up in it) and returns its supervisor and, when it can tell,
// the flavour of the container's OpenSM (from opensm --version in its image;
// Upstream, the stricter, otherwise).
func PrepareExternal(ctx context.Context, c ExternalConfig, command []string) (*opensm.Supervisor, fabric.Flavour, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	ctr, err := inspectRequired(ctx, c.Client, c.Name, fmt.Sprintf("with [opensm] driver = docker, OpenSM runs in a "+
		"container that you start, with [opensm] config_dir %s bind-mounted at the same path, reading %s; start it, "+
		"or set [opensm] container to its name", c.ConfigDir, filepath.Join(c.ConfigDir, "opensm.conf")))
	if err != nil {
		return nil, 0, err
	}
	for _, file := range []string{"partitions.conf", "opensm.conf"} {
		path := filepath.Join(c.ConfigDir, file)
		if m := mountOf(ctr, path); m != nil && m.Destination == path {
			return nil, 0, fmt.Errorf("container %s bind-mounts the file %s: mount the directory %s instead, "+
				"or OpenSM keeps reading the old file after the manager replaces it (an atomic rename)",
				c.Name, path, c.ConfigDir)
		}
	}
	if err := checkSharedDir(ctx, c.Client, c.Name, c.ConfigDir, "config_dir"); err != nil {
		return nil, 0, err
	}
	flavour, err := detectFlavour(ctx, c.Client, ctr.Image, command)
	if err != nil {
		c.Logger.Warn("cannot tell which OpenSM the container runs; writing opensm.conf for upstream OpenSM",
			"container", c.Name, "error", err)
		flavour = fabric.Upstream
	}
	e := &External{cfg: c, log: c.Logger}
	return opensm.NewWatch(e, opensm.SupervisorConfig{LogFile: c.LogFile, StatusFile: c.StatusFile,
		Logger: c.Logger}), flavour, nil
}

// Watch watches the container until ctx ends (the supervisor's Stop or
// StopTerm), and neither starts nor stops it. OpenSM is ready while its
// container runs and it has logged its version line since it started (or
// started more than a few seconds ago). A new start of the container counts as
// a restart; a container that is not running is the supervisor's last error
// until it runs again.
func (e *External) Watch(ctx context.Context, seen opensm.Sightings) {
	from, err := opensm.LogPosition(e.cfg.LogFile)
	if err != nil {
		e.log.Warn("OpenSM's log", "error", err) // followed from its start
	}
	versions := make(chan struct{}, 1)
	go e.followVersions(ctx, from, versions)

	var started string // State.StartedAt of the instance seen last
	var current *openSMContainer
	var ready, sawVersion bool
	var startedAt time.Time
	tick := time.NewTicker(e.cfg.PollInterval)
	defer tick.Stop()
	var lastProblem string
	problem := func(err error) {
		current, ready = nil, false
		if err.Error() != lastProblem { // once per problem, not at every poll
			lastProblem = err.Error()
			seen.Lost(err)
		}
	}
	for {
		ctr, err := inspect(ctx, e.cfg.Client, e.cfg.Name)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			problem(err)
		case ctr == nil:
			problem(fmt.Errorf("no container named %s: the manager does not start it (driver = docker)", e.cfg.Name))
		case ctr.State == nil || !ctr.State.Running:
			problem(fmt.Errorf("container %s is not running: the manager does not start it (driver = docker)", e.cfg.Name))
		default:
			lastProblem = ""
			if ctr.State.StartedAt != started || current == nil {
				restarted := started != "" && ctr.State.StartedAt != started
				if ctr.State.StartedAt != started {
					started, sawVersion, ready = ctr.State.StartedAt, false, false
					startedAt, _ = time.Parse(time.RFC3339Nano, ctr.State.StartedAt)
				}
				current = &openSMContainer{cli: e.cfg.Client, name: e.cfg.Name, id: ctr.ID, pid: ctr.State.Pid}
				seen.Running(current, restarted)
			}
			if !ready && (sawVersion || time.Since(startedAt) >= settle) {
				ready = true
				seen.Ready(current)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-versions:
			sawVersion = true
		case <-tick.C:
		}
	}
}

// followVersions signals versions at every version line OpenSM logs.
func (e *External) followVersions(ctx context.Context, from opensm.Position, versions chan<- struct{}) {
	follower := opensm.FollowLog(e.cfg.LogFile, from)
	defer func() { follower.Close() }()
	for {
		entry, err := follower.Next(ctx)
		if errors.Is(err, opensm.ErrLogReset) {
			continue // a reset log is read again from its start
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.log.Warn("cannot follow OpenSM's log", "file", e.cfg.LogFile, "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			follower.Close()
			follower = opensm.FollowLog(e.cfg.LogFile, opensm.Position{})
		}
		if opensm.IsVersionLine(entry.Message) {
			select {
			case versions <- struct{}{}:
			default:
			}
		}
	}
}
