package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/applier"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/config"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// CheckRecordedState renders the recorded state with the configuration and
// checks it, as the applier will. It returns the file, or an error that lists
// every recorded network and Kubernetes pkey the configuration would now
// refuse (which one, its pkey and the rule) and every problem of the check, one per line: what
// --render prints and what refuses the manager's start.
func CheckRecordedState(ctx context.Context, cfg config.FabricConfig, st *store.Store, tpl *partitions.Template,
	flavour fabric.Flavour) ([]byte, error) {
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read recorded state: %w", err)
	}
	// The capacity leaves out what the applier leaves out (it needs no dump);
	// a template that fails says so in the render's words.
	static, serr := tpl.Static(ctx, cfg.OpenSM.DefaultPartition, cfg.OpenSM.FlatPKey)
	var limit applier.CapacityChecker
	if serr == nil {
		limit = &topology.PortLimit{Capacity: cfg.OpenSM.SwitchPKeyCapacity, Static: static.PKeysOf}
	}
	r, err := applier.Render(ctx, snap, applier.RenderInput{DefaultPartition: cfg.OpenSM.DefaultPartition,
		FlatPKey: cfg.OpenSM.FlatPKey, Template: tpl, Rules: CheckRules(cfg, flavour), PortLimit: limit})
	if err != nil {
		return nil, fmt.Errorf("revision %d: %w", snap.Revision, err)
	}
	text, err := r.Text, r.Problems
	perr := (*partitions.Error)(nil)
	if err != nil && !errors.As(err, &perr) {
		return nil, fmt.Errorf("revision %d: %w", snap.Revision, err)
	}
	if serr != nil {
		return nil, fmt.Errorf("[opensm] partitions_template: %w", serr)
	}
	rules := RulesOf(cfg.Fabric)
	rules.StaticPKey = static.Name
	conflicts := append(rules.Conflicts(snap.Networks), rules.KubernetesConflicts(snap.Kubernetes)...)
	problems := conflicts
	omitted := 0
	if errors.As(err, &perr) {
		for _, p := range perr.Problems {
			problems = append(problems, p.String())
		}
		omitted = perr.Omitted
	} else if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return text, nil
	}
	var b strings.Builder
	for _, p := range problems {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "\n  and %d more", omitted)
	}
	if len(conflicts) > 0 {
		b.WriteString("\n  (the configuration changed under these networks or Kubernetes pkeys: change it back, or delete them)")
	}
	return nil, fmt.Errorf("revision %d renders to a file that fails the check:%s", snap.Revision, b.String())
}

// The start-up checks between fabrics that need files read: the
// configuration's own (internal/config's fabriccheck.go) cannot open the
// env files. Each refusal names both fabrics' sections.

// fabricSite is what ties a fabric's OpenSM to one subnet and one host port,
// as its driver will run it.
type fabricSite struct {
	fab config.Fabric
	// socket is IBSIM_SOCKNAME: the simulated fabric OpenSM attaches to
	// ("": a real HCA).
	socket string
	// cache is OpenSM's cache directory (OSM_CACHE_DIR); "" where the
	// manager does not start OpenSM (driver = docker: its container's own).
	cache string
}

// readFabricSite reads f's env file and builds OpenSM's environment as its
// driver does (the process driver's child inherits the manager's; the
// supervisor's cache directory comes before the file's lines, which win).
func readFabricSite(f config.Fabric) (fabricSite, error) {
	var env []string
	if f.OpenSM.Driver == config.DriverProcess {
		env = os.Environ()
	}
	if dir := f.CacheDir(); dir != "" {
		env = append(env, "OSM_CACHE_DIR="+dir)
	}
	if f.OpenSM.EnvFile != "" {
		extra, err := opensm.ReadEnvFile(f.OpenSM.EnvFile)
		if err != nil {
			return fabricSite{}, fmt.Errorf("%s env_file: %w", f.Section(), err)
		}
		env = append(env, extra...)
	}
	sim, _ := pkeyread.SimDialerFromEnv(env)
	site := fabricSite{fab: f, socket: sim.Socket}
	if f.OpenSM.Driver != config.DriverDocker {
		site.cache = opensm.CacheDirOf(env)
	}
	return site, nil
}

// CheckFabricSites refuses fabrics whose OpenSMs would meet: one simulated
// fabric (IBSIM_SOCKNAME), one HCA port (equal port GUIDs are one port
// unless each OpenSM is on a simulated fabric of its own, where every SM
// port has the same GUID), one smp_port for the readers, one cache
// directory; and an env file that cannot be read. A configuration of one
// fabric reads nothing here: its env file is read when OpenSM starts, as it
// always was. The manager's start runs it.
func CheckFabricSites(cfg *config.Config) error {
	return checkFabricSites(cfg, true)
}

// FabricSiteConflicts is CheckFabricSites for the operator's commands,
// which every command runs after loading the configuration, so that none
// acts on one the manager would refuse to start with: the conflicts between
// the fabrics whose env files it can read. A missing env file is left to
// the start and to OpenSM's driver, whose state --status shows: it is what
// an operator runs --status for.
func FabricSiteConflicts(cfg *config.Config) error {
	return checkFabricSites(cfg, false)
}

// checkFabricSites is CheckFabricSites; unreadable says whether an env file
// that cannot be read is an error.
func checkFabricSites(cfg *config.Config, unreadable bool) error {
	all := cfg.Fabrics
	if len(all) == 1 {
		return nil
	}
	var errs []error
	sites := make([]fabricSite, 0, len(all))
	for _, f := range all {
		s, err := readFabricSite(f)
		if err != nil {
			if unreadable {
				errs = append(errs, err)
			}
			continue
		}
		sites = append(sites, s)
	}
	for i, a := range sites {
		for _, b := range sites[i+1:] {
			errs = append(errs, sitePairConflicts(a, b)...)
		}
	}
	return errors.Join(errs...)
}

// sitePairConflicts are what a and b cannot share.
func sitePairConflicts(a, b fabricSite) []error {
	var errs []error
	fa, fb := a.fab, b.fab
	if a.socket != "" && a.socket == b.socket {
		errs = append(errs, fmt.Errorf("%s env_file and %s env_file name the same simulated fabric (IBSIM_SOCKNAME=%s): "+
			"each fabric's OpenSM needs its own subnet", fa.Section(), fb.Section(), a.socket))
	}
	distinctSims := a.socket != "" && b.socket != "" && a.socket != b.socket
	if g := fa.PortGUID(); g != "" && g == fb.PortGUID() && !distinctSims {
		errs = append(errs, fmt.Errorf("%s and %s name the same HCA port %s, and their env_files do not put them on "+
			"two simulated fabrics (IBSIM_SOCKNAME): two OpenSMs cannot run on one port",
			fa.OpenSMConfSection(), fb.OpenSMConfSection(), g))
	}
	if p := fa.OpenSM.SMPPort; p != "" && p == fb.OpenSM.SMPPort {
		errs = append(errs, fmt.Errorf("%s smp_port and %s smp_port are the same port %s: each fabric's reads must "+
			"leave from a port on its own subnet", fa.Section(), fb.Section(), p))
	}
	if a.cache != "" && a.cache == b.cache {
		errs = append(errs, fmt.Errorf("%s and %s give OpenSM the same cache directory %s (OSM_CACHE_DIR): each "+
			"OpenSM would take the other's LIDs and M_Keys; set another OSM_CACHE_DIR in one env_file, or none",
			fa.Section(), fb.Section(), a.cache))
	}
	return errs
}
