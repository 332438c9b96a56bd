package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// The checks between fabrics: what two OpenSMs on one host, or two subnets
// served by one manager, cannot share. Each error names both places, so that
// the operator sees which of the two to change.

// checkFabrics applies the rules between fabrics, once every section is read.
// A configuration of the default fabric alone passes them all.
func (c *Config) checkFabrics(file iniFile) []error {
	all := c.Fabrics
	if len(all) == 1 {
		return nil
	}
	var errs []error
	if slices.Equal(all[0].PhysicalNetworks, []string{"*"}) {
		errs = append(errs, fmt.Errorf("%s = * claims every physical network, those of %s too: list the default "+
			"fabric's own physical networks there", place(file, all[0], "physical_networks"), all[1].physnetsKey()))
	}
	for i, a := range all {
		errs = append(errs, c.listenConflicts(file, a)...)
		if portGUID(a) == "" {
			errs = append(errs, fmt.Errorf("%s names no port: with several fabrics each OpenSM must be given its HCA "+
				"port (guid in %s, or -g in command), or it takes the first active one, which may be another fabric's",
				a.Section(), a.OpenSMConfSection()))
		}
		for _, b := range all[i+1:] {
			errs = append(errs, fabricPairConflicts(file, a, b)...)
		}
	}
	return errs
}

// fabricPairConflicts are the settings a and b cannot share.
func fabricPairConflicts(file iniFile, a, b Fabric) []error {
	var errs []error
	both := func(key, why string) {
		errs = append(errs, fmt.Errorf("%s and %s are the same: %s", place(file, a, key), place(file, b, key), why))
	}
	for _, p := range a.PhysicalNetworks {
		if slices.Contains(b.PhysicalNetworks, p) {
			errs = append(errs, fmt.Errorf("physical network %q is claimed twice, by %s and %s: a network's "+
				"partition is on one fabric", p, place(file, a, "physical_networks"), place(file, b, "physical_networks")))
		}
	}
	if a.OpenSM.ConfigDir == b.OpenSM.ConfigDir {
		both("config_dir", "each fabric's OpenSM needs its own opensm.conf and partitions.conf")
	}
	if a.OpenSM.LogFile == b.OpenSM.LogFile {
		both("log_file", "the manager reads each OpenSM's sweeps from its own log, and would complete one fabric's "+
			"jobs on the other's sweep")
	}
	if a.OpenSM.EnvFile != "" && a.OpenSM.EnvFile == b.OpenSM.EnvFile {
		both("env_file", "both OpenSMs would reach the same simulated fabric (IBSIM_SOCKNAME) and share whatever "+
			"else it sets; give each fabric its own")
	}
	// Without env files both OpenSMs run in one environment, so one GUID is
	// one port. With an env file only its contents tell a simulated fabric
	// of its own (whose SM port repeats every simulator's GUID) from an HCA:
	// the manager's CheckFabricSites reads them and decides, at the start and
	// before every command, so that the rule holds whatever keys are set.
	if g := portGUID(a); g != "" && g == portGUID(b) && a.OpenSM.EnvFile == "" && b.OpenSM.EnvFile == "" {
		errs = append(errs, fmt.Errorf("%s and %s name the same HCA port %s: two OpenSMs cannot run on one port",
			a.OpenSMConfSection(), b.OpenSMConfSection(), g))
	}
	if inContainer(a) && inContainer(b) && a.OpenSM.Container == b.OpenSM.Container {
		both("container", "Docker names one container by it")
	}
	if a.UFMPKeys.Listen != "" && sameListener(a.UFMPKeys.Listen, b.UFMPKeys.Listen) {
		errs = append(errs, fmt.Errorf("%s and %s are the same address %s: each fabric's ib-kubernetes needs its own "+
			"listener", placeIn(file, a.UFMPKeysSection(), "listen"), placeIn(file, b.UFMPKeysSection(), "listen"),
			b.UFMPKeys.Listen))
	}
	// Two pkeys APIs share paths only when both are on [api] listen.
	if a.UFMPKeys.Enabled() && b.UFMPKeys.Enabled() && a.UFMPKeys.Listen == "" && b.UFMPKeys.Listen == "" &&
		prefixesOverlap(a.UFMPKeys.Prefix, b.UFMPKeys.Prefix) {
		errs = append(errs, fmt.Errorf("%s prefix %s and %s prefix %s overlap: each fabric's ib-kubernetes needs "+
			"its own URL", a.UFMPKeysSection(), a.UFMPKeys.Prefix, b.UFMPKeysSection(), b.UFMPKeys.Prefix))
	}
	return errs
}

// listenConflicts refuses fab's pkeys listener on an address one of [api]'s
// listeners has: one of the two could not bind it.
func (c *Config) listenConflicts(file iniFile, fab Fabric) []error {
	addr := fab.UFMPKeys.Listen
	if addr == "" {
		return nil
	}
	var errs []error
	for _, l := range []struct{ key, addr string }{
		{"listen", c.API.Listen}, {"metrics_listen", c.API.MetricsListen}, {"debug_listen", c.API.DebugListen}} {
		if l.addr != "" && sameListener(addr, l.addr) {
			errs = append(errs, fmt.Errorf("%s and %s are the same address %s: give the fabric's pkeys API a "+
				"port of its own", placeIn(file, fab.UFMPKeysSection(), "listen"), placeIn(file, "[api]", l.key), l.addr))
		}
	}
	return errs
}

// sameListener says whether two host:port addresses would bind one port:
// the same port on the same host, or on a host that is every address.
func sameListener(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	if pa != pb || pa == "0" {
		return false // port 0 picks a free port for each
	}
	everyAddr := func(h string) bool { return h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() }
	return ha == hb || everyAddr(ha) || everyAddr(hb)
}

// place names key of fab's section (physical_networks of the default fabric
// is [api]'s) with the line that sets it, or says that it is the default.
func place(file iniFile, fab Fabric, key string) string {
	section := fab.Section()
	if fab.topLevel() && key == "physical_networks" {
		section = "[api]"
	}
	return placeIn(file, section, key)
}

// placeIn names key of section ("[api]") with the line that sets it, or says
// that it is the default.
func placeIn(file iniFile, section, key string) string {
	section = strings.Trim(section, "[]")
	for _, s := range file.sections {
		if s.name != section {
			continue
		}
		for _, e := range s.entries {
			if e.key == key && e.value != "" {
				return fmt.Sprintf("[%s] %s (line %d)", section, key, e.line)
			}
		}
	}
	return fmt.Sprintf("[%s] %s (its default)", section, key)
}

// portGUID is the HCA port fab's OpenSM binds to, as a normalised GUID: guid
// of its opensm.conf options, else -g/--guid of its command; "" when neither
// names one (0 is OpenSM's "the first active port").
func portGUID(fab Fabric) string {
	var guid string
	for _, kv := range fab.OpenSMConf {
		if kv.Key == "guid" {
			guid = kv.Value
		}
	}
	for i, w := range fab.OpenSM.Command {
		if v, ok := strings.CutPrefix(w, "--guid="); ok {
			guid = v
		}
		if (w == "-g" || w == "--guid") && i+1 < len(fab.OpenSM.Command) {
			guid = fab.OpenSM.Command[i+1]
		}
	}
	if n, err := strconv.ParseUint(guid, 0, 64); err == nil {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf("0x%016x", n)
	}
	return strings.ToLower(guid)
}

// inContainer says whether fab's OpenSM runs in a container of that name.
func inContainer(fab Fabric) bool {
	return fab.OpenSM.Driver == DriverManaged || fab.OpenSM.Driver == DriverDocker
}

// prefixesOverlap says whether one URL path prefix is, or is under, the other.
func prefixesOverlap(a, b string) bool {
	return strings.HasPrefix(a+"/", b+"/") || strings.HasPrefix(b+"/", a+"/")
}

// PortGUID is the HCA port f's OpenSM binds to, as a normalised GUID (guid
// of its opensm.conf options, else -g/--guid of its command); "" when
// neither names one.
func (f Fabric) PortGUID() string { return portGUID(f) }
