package smcontainer

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
)

// Labels on the containers this package creates. A container named [opensm]
// container is replaced only when it has roleLabel = roleOpenSM and
// managerLabel = this manager's container ID (checkName); any other is never
// removed.
const (
	roleLabel    = "org.alternative-fabric-manager.role"
	roleOpenSM   = "opensm"
	roleVersion  = "opensm-version-check"
	managerLabel = "org.alternative-fabric-manager.manager" // the manager container's ID
)

// engineTimeout bounds each call to the Docker engine that is not a wait.
const engineTimeout = 30 * time.Second

// Connect returns a client of the Docker engine that DOCKER_HOST names
// (/var/run/docker.sock when unset), once the engine has answered.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker engine: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		host := cli.DaemonHost()
		cli.Close()
		return nil, fmt.Errorf("cannot reach the Docker engine at %s (%v): the managed and docker drivers "+
			"need its socket; mount it into the manager's container (-v /var/run/docker.sock:/var/run/docker.sock) "+
			"or set DOCKER_HOST, or use [opensm] driver = process", host, err)
	}
	return cli, nil
}

// inspect returns the container of that name or ID, or nil when there is none.
func inspect(ctx context.Context, cli *client.Client, name string) (*container.InspectResponse, error) {
	ictx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	res, err := cli.ContainerInspect(ictx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	return &res.Container, nil
}

// inspectRequired is inspect for a container that must exist: why says why
// it must and what to do, for the error when it does not.
func inspectRequired(ctx context.Context, cli *client.Client, name, why string) (*container.InspectResponse, error) {
	ctr, err := inspect(ctx, cli, name)
	if err == nil && ctr == nil {
		err = fmt.Errorf("no container named %s: %s", name, why)
	}
	return ctr, err
}

// mountOf returns the mount of c under which path lies (the deepest one), or
// nil when path is in the container's own file system.
func mountOf(c *container.InspectResponse, path string) *container.MountPoint {
	var best *container.MountPoint
	for i := range c.Mounts {
		m := &c.Mounts[i]
		if within(path, m.Destination) && (best == nil || len(m.Destination) > len(best.Destination)) {
			best = m
		}
	}
	return best
}

// within says whether path is dir or lies under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// detectFlavour runs "<command> --version" in a throwaway container of image,
// to learn which OpenSM the image holds: the options opensm.conf may use depend
// on it. An image without that command is an error naming it.
func detectFlavour(ctx context.Context, cli *client.Client, image string, command []string) (fabric.Flavour, error) {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      image,
			Entrypoint: []string{command[0]},
			Cmd:        append(append([]string(nil), command[1:]...), "--version"),
			Tty:        true, // one raw stream to read back
			Labels:     map[string]string{roleLabel: roleVersion},
		},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return 0, fmt.Errorf("image %s: %w", image, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engineTimeout)
		defer cancel()
		_, _ = cli.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}()
	wait := cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return 0, fmt.Errorf("image %s has no %s (%v): set [opensm] image to an image with OpenSM installed, "+
			"such as this project's, or [opensm] command to where OpenSM is in it", image, command[0], err)
	}
	select {
	case <-wait.Result:
	case err := <-wait.Error:
		return 0, fmt.Errorf("image %s: wait for %s --version: %w", image, command[0], err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return 0, fmt.Errorf("image %s: read %s --version: %w", image, command[0], err)
	}
	defer logs.Close()
	out, err := io.ReadAll(io.LimitReader(logs, 64<<10))
	if err != nil {
		return 0, fmt.Errorf("image %s: read %s --version: %w", image, command[0], err)
	}
	f, version, ok := opensm.ParseVersion(out)
	if version == "" {
		return 0, fmt.Errorf("image %s: %s --version printed no OpenSM version (%q): set [opensm] image to an image "+
			"with OpenSM installed", image, command[0], firstLine(out))
	}
	if !ok {
		return f, fmt.Errorf("image %s: unknown OpenSM version %q", image, version)
	}
	return f, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(s)
}

// checkSharedDir proves that container name sees dir, a directory of the
// manager's, at the same path: a file the manager writes there must appear in
// the container. It works on a container that is not running too.
func checkSharedDir(ctx context.Context, cli *client.Client, name, dir, key string) error {
	marker, err := os.CreateTemp(dir, ".afm-mount-check-*")
	if err != nil {
		return fmt.Errorf("[opensm] %s %s: %w", key, dir, err)
	}
	path := marker.Name()
	marker.Close()
	defer os.Remove(path)
	sctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	_, err = cli.ContainerStatPath(sctx, name, client.ContainerStatPathOptions{Path: path})
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("container %s does not see [opensm] %s %s: bind-mount that directory into it at the same path "+
			"(-v %s:%s), the directory and not single files, so that the manager's atomic renames reach OpenSM",
			name, key, dir, dir, dir)
	}
	if err != nil {
		return fmt.Errorf("container %s: look for [opensm] %s %s in it: %w", name, key, dir, err)
	}
	return nil
}
