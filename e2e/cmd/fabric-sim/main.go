// Command fabric-sim starts and queries a simulated InfiniBand fabric (ibsim),
// for humans and demo scripts. The program that runs OpenSM is started
// separately, with DIR/env in its environment and DIR as working directory; see
// package e2e/fabricsim.
//
//	fabric-sim start DIR [--hosts N] [--switches M]  start ibsim in the background; print the env file and hosts
//	fabric-sim stop DIR                              stop ibsim
//	fabric-sim guids DIR                             "<port-guid> <name>" per host
//	fabric-sim pkeys DIR GUID [--switch]             non-zero P_Keys of the port (or of the switch port facing it)
//	fabric-sim sim DIR 'COMMAND'                     ibsim console command, e.g. 'Unlink "H2"'
//	fabric-sim run DIR PROGRAM [ARGS...]             any infiniband-diags program inside the fabric
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

const usage = `usage:
  fabric-sim start DIR [--hosts N] [--switches M]
  fabric-sim stop DIR
  fabric-sim guids DIR
  fabric-sim pkeys DIR GUID [--switch]
  fabric-sim sim DIR 'COMMAND'
  fabric-sim run DIR PROGRAM [ARGS...]
`

// errUsage makes main print the usage and exit with status 2.
var errUsage = errors.New("bad usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "fabric-sim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) < 2 {
		return errUsage
	}
	command, dir, rest := args[0], args[1], args[2:]
	switch command {
	case "start":
		return start(ctx, dir, rest, out)
	case "stop":
		if len(rest) != 0 {
			return errUsage
		}
		f, err := fabricsim.Open(dir)
		if err != nil {
			fmt.Fprintf(out, "nothing running in %s\n", dir)
			return nil
		}
		return f.Stop()
	case "guids":
		if len(rest) != 0 {
			return errUsage
		}
		f, err := fabricsim.Open(dir)
		if err != nil {
			return err
		}
		for _, h := range f.Hosts {
			fmt.Fprintf(out, "%s %s\n", h.PortGUID, h.Name)
		}
		return nil
	case "pkeys":
		return pkeys(ctx, dir, rest, out)
	case "sim":
		if len(rest) != 1 {
			return errUsage
		}
		f, err := fabricsim.Open(dir)
		if err != nil {
			return err
		}
		answer, err := f.Sim(ctx, rest[0])
		if answer != "" {
			fmt.Fprintln(out, answer)
		}
		return err
	case "run":
		if len(rest) == 0 {
			return errUsage
		}
		f, err := fabricsim.Open(dir)
		if err != nil {
			return err
		}
		output, err := f.Run(ctx, rest[0], rest[1:]...)
		out.Write(output)
		return err
	default:
		return errUsage
	}
}

func start(ctx context.Context, dir string, args []string, out io.Writer) error {
	flags := flag.NewFlagSet("start", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	hosts := flags.Int("hosts", 4, "host HCAs")
	switches := flags.Int("switches", 1, "switches")
	if err := flags.Parse(args); err != nil || flags.NArg() != 0 || *hosts < 1 || *switches < 1 {
		return errUsage
	}
	f, err := fabricsim.Start(ctx, dir, fabricsim.Options{Hosts: *hosts, Switches: *switches, Detach: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ibsim runs in %s (%d hosts, %d switches); no SM started.\n", f.Dir, len(f.Hosts), *switches)
	fmt.Fprintf(out, "env file: %s\n", f.EnvFile())
	fmt.Fprintf(out, "SM port GUID: %s\n", f.SMGUID)
	for _, h := range f.Hosts {
		fmt.Fprintf(out, "%s %s on %s port %d\n", h.PortGUID, h.Name, h.Switch, h.SwitchPort)
	}
	return nil
}

func pkeys(ctx context.Context, dir string, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	guid, err := fabric.ParseGUID(args[0])
	if err != nil {
		return err
	}
	flags := flag.NewFlagSet("pkeys", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	switchSide := flags.Bool("switch", false, "the switch port facing the host")
	if err := flags.Parse(args[1:]); err != nil || flags.NArg() != 0 {
		return errUsage
	}
	f, err := fabricsim.Open(dir)
	if err != nil {
		return err
	}
	var keys []uint16
	if *switchSide {
		keys, err = f.SwitchPKeys(ctx, guid)
	} else {
		keys, err = f.PKeys(ctx, guid)
	}
	if err != nil {
		return err
	}
	for _, k := range keys {
		fmt.Fprintf(out, "0x%04x\n", k)
	}
	return nil
}
