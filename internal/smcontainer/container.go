package smcontainer

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// openSMContainer is one run of OpenSM in a container (an opensm.Instance),
// signalled through the Docker engine by its ID: a container that took its
// name since is never hit.
type openSMContainer struct {
	cli  *client.Client
	name string
	id   string
	pid  int // OpenSM's process ID on the host; 0 when unknown
	// done is closed once the container is gone (Docker removes it when it
	// stops), and exit says how it ended. Nil for a container the manager
	// does not own: its watcher reports its end.
	done chan struct{}
	exit string
}

func (c *openSMContainer) Done() <-chan struct{} { return c.done }
func (c *openSMContainer) Exit() string          { return c.exit }
func (c *openSMContainer) PID() int              { return c.pid }
func (c *openSMContainer) LogAttrs() []any       { return []any{"container", c.name, "id", short(c.id)} }
func (c *openSMContainer) String() string        { return "container " + short(c.id) }

// Signal sends sig through the engine; os.ErrProcessDone once the container
// has exited (the engine answers that it is not running, or is gone).
func (c *openSMContainer) Signal(ctx context.Context, sig syscall.Signal) error {
	kctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	_, err := c.cli.ContainerKill(kctx, c.id, client.ContainerKillOptions{Signal: signalName(sig)})
	if cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
		return fmt.Errorf("%w (%v)", os.ErrProcessDone, err)
	}
	return err
}

// Kill sends SIGKILL.
func (c *openSMContainer) Kill(ctx context.Context) error { return c.Signal(ctx, syscall.SIGKILL) }

// signalName is sig as the engine takes it: "SIGHUP", or its number.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return strconv.Itoa(int(sig))
}
