package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/status"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// --fabric NAME: the fabric an operator's command acts on. Every fabric has
// its own keys, expected switches, enforcement errors, freeze, adopted
// partitions, template and OpenSM files, so a command that reads or changes
// one of them must be told whose; without the flag it is the default
// fabric's, which is all a configuration of one fabric has.

// exitUsage is the exit status of a wrong command line, as the flag package
// exits on one: a --fabric the configuration does not have is one.
const exitUsage = 2

const fabricHelp = "the fabric the command acts on: default ([opensm]) or a [fabric:NAME] section's NAME; " +
	"--status without it shows every fabric"

// fabricChoice is the value of --fabric: the name, and whether it was given.
type fabricChoice struct {
	name  string
	given bool
}

// fabricFlag defines --fabric on fs.
func fabricFlag(fs *flag.FlagSet) *fabricChoice {
	c := &fabricChoice{name: config.DefaultFabric}
	fs.Var(c, "fabric", fabricHelp)
	return c
}

func (c *fabricChoice) String() string {
	if c == nil {
		return config.DefaultFabric
	}
	return c.name
}

func (c *fabricChoice) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("a fabric's name, not nothing")
	}
	c.name, c.given = s, true
	return nil
}

// fabricUse refuses --fabric given to what acts on no one fabric: the
// manager itself and --migrate (every fabric), --healthcheck (the process'
// /readyz, which reports every fabric) and --import-neutron (which routes
// each network by its physnet).
func fabricUse(c *fabricChoice, fabricless bool) error {
	if c.given && fabricless {
		return usageError{"--fabric goes with the operator's commands (--status, " +
			"--confirm-switches, --show-keys, ...); the manager, --migrate, --healthcheck and --import-neutron act on every fabric"}
	}
	return nil
}

// usageError is a command line the configuration refuses, such as a --fabric
// it does not have: exit status exitUsage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// operatorFabric is one fabric as an operator's command sees it: its name,
// and its configuration.
type operatorFabric struct {
	name string
	// section is the section that configures it, for messages.
	section string
	// cfg is the fabric's settings beside the file's process-wide ones.
	cfg config.FabricConfig
}

// selectFabric returns the fabric named name, or a usageError naming the
// configured ones.
func selectFabric(cfg *config.Config, name string) (operatorFabric, error) {
	var names []string
	for _, f := range allFabrics(cfg) {
		if f.name == name {
			return f, nil
		}
		names = append(names, f.name)
	}
	return operatorFabric{}, usageError{fmt.Sprintf("--fabric %s: the configuration has no such fabric; it has %s",
		name, strings.Join(names, ", "))}
}

// allFabrics returns every configured fabric, the default first.
func allFabrics(cfg *config.Config) []operatorFabric {
	var out []operatorFabric
	for _, f := range cfg.Fabrics {
		out = append(out, operatorFabric{name: f.Name, section: f.Section(), cfg: cfg.FabricConfig(f)})
	}
	return out
}

// status is the fabric as --status reads it.
func (f operatorFabric) status() status.Fabric {
	return status.Fabric{Name: f.name, Section: f.section, Config: f.cfg}
}

// view is the fabric's view of db: what it reads and changes is this
// fabric's alone.
func (f operatorFabric) view(db *store.DB) (*store.Store, error) {
	v := db.Fabric(f.name)
	if v == nil {
		// The store is opened with every configured fabric: not reached
		// unless the configuration and the store disagree.
		return nil, fmt.Errorf("the database is not open for fabric %s %s", f.name, f.section)
	}
	return v, nil
}

// wrap names a further fabric's section in err: the helpers that read
// f.cfg speak of [opensm] and [opensm_conf] for what is that section's. A
// fabric without state rows is one no manager has started yet: the error
// says so rather than only that a row is missing.
func (f operatorFabric) wrap(err error) error {
	if fe := (fabricError{}); err == nil || f.name == config.DefaultFabric || errors.As(err, &fe) {
		return err
	}
	if driver.IsNoRows(err) {
		err = fmt.Errorf("%w (%s)", err, status.NeverStarted)
	}
	return fabricError{section: f.section, err: err}
}

// fabricError is an error about one further fabric, named by its section.
type fabricError struct {
	section string
	err     error
}

func (e fabricError) Error() string { return e.section + ": " + e.err.Error() }
func (e fabricError) Unwrap() error { return e.err }
