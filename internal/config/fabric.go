package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Several fabrics. The fabric [opensm], [opensm_conf] and [ufm_pkeys]
// configure, serving [api] physical_networks, is the default fabric: a file
// written for one fabric configures exactly that, as before. Each further
// fabric is a [fabric:NAME] section, with the keys of [opensm] and its own
// physical_networks, and optionally [fabric:NAME:opensm_conf] and
// [fabric:NAME:ufm_pkeys], read like [opensm_conf] and [ufm_pkeys].

// DefaultFabric is the default fabric's name: what its rows, metrics and
// commands are known by once the manager runs several fabrics. It is fixed,
// not configurable, so that an existing database's rows belong to it without
// being rewritten, and no [fabric:NAME] section may take it.
const DefaultFabric = "default"

// fabricSectionPrefix starts the name of every section of a further fabric.
const fabricSectionPrefix = "fabric:"

// The sections of a further fabric beside [fabric:NAME] itself, after its name.
const (
	fabricOpenSMConf = "opensm_conf"
	fabricUFMPKeys   = "ufm_pkeys"
)

// fabricNamePattern: a fabric's name is a database key, a metrics label and a
// command-line argument, so it keeps to characters that need no quoting in any
// of them, and to a length every engine's index takes.
var fabricNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

const fabricNameRule = "letters, digits, '-' and '_', 1 to 32 of them"

// Fabric is one InfiniBand subnet the manager runs an OpenSM on: the physical
// networks whose partitions it holds and how its OpenSM runs.
type Fabric struct {
	Name string
	// PhysicalNetworks are the physnets whose networks have their partition
	// on this fabric; ["*"] (the default fabric only, [api]
	// physical_networks) is every physnet. Networks of no fabric's physnets
	// are accepted and left alone.
	PhysicalNetworks []string
	// OpenSM is how its OpenSM runs: [opensm], or [fabric:NAME].
	OpenSM OpenSM
	// OpenSMConf is its opensm.conf options, in file order: [opensm_conf],
	// or [fabric:NAME:opensm_conf].
	OpenSMConf []KeyValue
	// UFMPKeys is its own pkeys API for its own ib-kubernetes: [ufm_pkeys],
	// or [fabric:NAME:ufm_pkeys].
	UFMPKeys UFMPKeys
}

// topLevel says whether f's settings are the file's top-level ones
// ([opensm], [opensm_conf], [ufm_pkeys], [api] physical_networks): the
// default fabric's, where a file of one fabric has always kept them. It is
// the one test of a fabric's name against the default's; every difference
// of the default fabric's (its sections, its configuration, its cache
// directory, its messages) follows from it.
func (f Fabric) topLevel() bool { return f.Name == DefaultFabric }

// Section is the section that configures f, as errors and logs name it.
func (f Fabric) Section() string {
	if f.topLevel() {
		return "[opensm]"
	}
	return "[" + fabricSectionPrefix + f.Name + "]"
}

// OpenSMConfSection is the section of f's opensm.conf options.
func (f Fabric) OpenSMConfSection() string {
	if f.topLevel() {
		return "[" + opensmConfSection + "]"
	}
	return "[" + fabricSectionPrefix + f.Name + ":" + fabricOpenSMConf + "]"
}

// UFMPKeysSection is the section of f's pkeys API.
func (f Fabric) UFMPKeysSection() string {
	if f.topLevel() {
		return "[ufm_pkeys]"
	}
	return "[" + fabricSectionPrefix + f.Name + ":" + fabricUFMPKeys + "]"
}

// physnetsKey is the key that lists f's physical networks.
func (f Fabric) physnetsKey() string {
	if f.topLevel() {
		return "[api] physical_networks"
	}
	return f.Section() + " physical_networks"
}

// The default fabric's settings are, in the file, the top-level ones
// ([opensm], [opensm_conf], [ufm_pkeys], [api] physical_networks); parsed,
// they are the first entry of Config.Fabrics, as every further fabric's are
// its entry. This package is the only one that knows: every other takes a
// fabric of Config.Fabrics and asks the methods below, which answer for
// every fabric alike.

// FabricConfig is one fabric of a configuration file: the fabric's own
// settings (Fabric) beside the process-wide ones of its file (Config). The
// helpers that wire or inspect one OpenSM take it, so that one code path
// serves every fabric.
type FabricConfig struct {
	*Config
	Fabric
}

// FabricConfig is fabric f of c.
func (c *Config) FabricConfig(f Fabric) FabricConfig { return FabricConfig{Config: c, Fabric: f} }

// UFMPKeysOf points at the pkeys API settings of the fabric named name in c,
// so that a change through it is c's; nil when c has no such fabric.
func (c *Config) UFMPKeysOf(name string) *UFMPKeys {
	for i := range c.Fabrics {
		if c.Fabrics[i].Name == name {
			return &c.Fabrics[i].UFMPKeys
		}
	}
	return nil
}

// Wrap names f's section in err, an error of a helper that read f's
// FabricConfig and so speaks of [opensm] for what is f's section. The
// default fabric's section is [opensm]: its errors are left as they are.
func (f Fabric) Wrap(err error) error {
	if err == nil || f.topLevel() {
		return err
	}
	return fmt.Errorf("%s: %w", f.Section(), err)
}

// Label is what f's thing what is called in messages: what alone for the
// default fabric, as before there were several, and "what of fabric NAME"
// for a further one ("applier of fabric storage").
func (f Fabric) Label(what string) string {
	if f.topLevel() {
		return what
	}
	return what + " of fabric " + f.Name
}

// kubernetesSecret is where f's ib-kubernetes keeps its pkeys API password.
func (f Fabric) kubernetesSecret() string {
	if f.topLevel() {
		return "ib-kubernetes' secret"
	}
	return "that fabric's ib-kubernetes' secret"
}

// CacheDir is the OSM_CACHE_DIR the supervisor gives f's OpenSM; "" leaves
// OpenSM's own (or its env_file's). The default fabric keeps OpenSM's own:
// an existing fabric's OpenSM keeps the LIDs (guid2lid) and M_Keys
// (guid2mkey) it cached, whether or not fabrics are added beside it. A
// further fabric's is under its config_dir, so that no two share one (the
// start refuses an env_file that makes two equal).
func (f Fabric) CacheDir() string {
	if f.topLevel() {
		return ""
	}
	return filepath.Join(f.OpenSM.ConfigDir, "cache")
}

// fabricKeys are the keys of [fabric:NAME]: the very fields of [opensm], so
// that a key added there applies to every fabric, and physical_networks. The
// fields store into the first fabric of a Config; a fabric's are read into a
// scratch Config whose one fabric is it (see applyToFabric), and
// physical_networks into
// that fabric's PhysicalNetworks.
var fabricKeys = section{name: fabricSectionPrefix + "NAME", fields: append(slices.Clone(sectionNamed("opensm").fields),
	field{key: "physical_networks",
		set: into(setFabricPhysicalNetworks, func(c *Config) *[]string { return &c.Fabrics[0].PhysicalNetworks })})}

// fabricUFMPKeysKeys are the keys of [fabric:NAME:ufm_pkeys]: those of
// [ufm_pkeys], and listen (the default fabric's listener is [api] listen).
var fabricUFMPKeysKeys = section{name: fabricSectionPrefix + "NAME:" + fabricUFMPKeys,
	fields: append(slices.Clone(sectionNamed("ufm_pkeys").fields),
		field{key: "listen", set: into(setListen, func(c *Config) *string { return &c.Fabrics[0].UFMPKeys.Listen })})}

func sectionNamed(name string) section {
	i := slices.IndexFunc(sections, func(s section) bool { return s.name == name })
	if i < 0 {
		panic("config: no section " + name)
	}
	return sections[i]
}

func setFabricPhysicalNetworks(dst *[]string, v string) error {
	if strings.TrimSpace(v) == "*" {
		return errors.New("a fabric serves the physical networks it lists; only [api] physical_networks may be *")
	}
	return setPhysicalNetworks(dst, v)
}

// newFabric is a fabric named name with every key at its default, as a
// [fabric:NAME] section that sets nothing would give.
func newFabric(name string) Fabric {
	scratch := Config{Fabrics: []Fabric{{Name: name}}}
	for _, s := range []section{fabricKeys, fabricUFMPKeysKeys} {
		for _, f := range s.fields {
			if f.def != "" {
				if err := f.set(&scratch, f.def); err != nil {
					panic(fmt.Sprintf("config: default of [%s] %s: %v", s.name, f.key, err))
				}
			}
		}
	}
	return scratch.Fabrics[0]
}

// applyToFabric reads the entries of one of fab's sections with the fields of
// known into fab.
func applyToFabric(fab *Fabric, s iniSection, known section) []error {
	scratch := Config{Fabrics: []Fabric{*fab}}
	errs := scratch.applyFields(s, known)
	*fab = scratch.Fabrics[0]
	return errs
}

// fabricSectionName splits a section's name "fabric:NAME" or
// "fabric:NAME:PART"; ok is false for any other section.
func fabricSectionName(section string) (name, part string, ok bool) {
	rest, ok := strings.CutPrefix(section, fabricSectionPrefix)
	if !ok {
		return "", "", false
	}
	name, part, _ = strings.Cut(rest, ":")
	return name, part, true
}

// parseFabrics reads the [fabric:NAME] sections and theirs, in file order.
func parseFabrics(file iniFile) ([]Fabric, []error) {
	var (
		fabrics []Fabric
		errs    []error
		byName  = map[string]int{} // name -> index in fabrics
		lines   = map[string]int{} // lower-case name -> line of its [fabric:NAME]
	)
	for _, s := range file.sections {
		name, part, ok := fabricSectionName(s.name)
		if !ok || part != "" {
			continue
		}
		if err := checkFabricName(name); err != nil {
			errs = append(errs, fmt.Errorf("[%s] (line %d): %w", s.name, s.line, err))
			continue
		}
		if first, dup := lines[strings.ToLower(name)]; dup {
			errs = append(errs, fmt.Errorf("[%s] (line %d) and the fabric of line %d differ only in case: their rows "+
				"would be one fabric's where the database compares names without case; rename one", s.name, s.line, first))
			continue
		}
		lines[strings.ToLower(name)] = s.line
		fab := newFabric(name)
		fab.OpenSM.LogFile = "" // derived from config_dir below, unless the section sets it
		errs = append(errs, applyToFabric(&fab, s, fabricKeys)...)
		errs = append(errs, requireFabricKeys(&fab, s)...)
		byName[name] = len(fabrics)
		fabrics = append(fabrics, fab)
	}
	for _, s := range file.sections {
		name, part, ok := fabricSectionName(s.name)
		if !ok || part == "" {
			continue
		}
		i, found := byName[name]
		switch {
		case part != fabricOpenSMConf && part != fabricUFMPKeys:
			errs = append(errs, fmt.Errorf("unknown section [%s] (line %d); a fabric's sections are [fabric:NAME], "+
				"[fabric:NAME:%s] and [fabric:NAME:%s]", s.name, s.line, fabricOpenSMConf, fabricUFMPKeys))
		case checkFabricName(name) != nil:
			errs = append(errs, fmt.Errorf("[%s] (line %d): %w", s.name, s.line, checkFabricName(name)))
		case !found:
			errs = append(errs, fmt.Errorf("[%s] (line %d) belongs to no fabric: there is no [%s%s] section; "+
				"add one (with its physical_networks and config_dir) or correct the name", s.name, s.line, fabricSectionPrefix, name))
		case part == fabricOpenSMConf:
			var kvs []KeyValue
			kvs, errs = readOpenSMConf(s, kvs, errs)
			fabrics[i].OpenSMConf = kvs
		default:
			errs = append(errs, applyToFabric(&fabrics[i], s, fabricUFMPKeysKeys)...)
		}
	}
	return fabrics, errs
}

func checkFabricName(name string) error {
	switch {
	case !fabricNamePattern.MatchString(name):
		return fmt.Errorf("fabric name %q: want %s", name, fabricNameRule)
	case strings.EqualFold(name, DefaultFabric):
		return fmt.Errorf("fabric name %q is the default fabric's, which [opensm], [opensm_conf] and [ufm_pkeys] "+
			"configure; choose another", name)
	}
	return nil
}

// requireFabricKeys checks the keys a further fabric must set, and derives
// log_file's default as [opensm] does.
func requireFabricKeys(fab *Fabric, s iniSection) []error {
	var errs []error
	set := func(key string) bool {
		return slices.ContainsFunc(s.entries, func(e iniEntry) bool { return e.key == key && e.value != "" })
	}
	if !set("physical_networks") {
		errs = append(errs, fmt.Errorf("[%s] (line %d): physical_networks is required: the physical networks whose "+
			"partitions this fabric holds", s.name, s.line))
	}
	// The default would be the default fabric's directory.
	if !set("config_dir") {
		errs = append(errs, fmt.Errorf("[%s] (line %d): config_dir is required: each fabric's OpenSM writes its own "+
			"opensm.conf and partitions.conf, and [opensm] config_dir's default is the default fabric's", s.name, s.line))
	}
	if fab.OpenSM.LogFile == "" {
		fab.OpenSM.LogFile = defaultLogFile(fab.OpenSM.ConfigDir)
	}
	return errs
}

// pkeysSections are the sections of the pkeys clients that may change f's
// pkeys: its [ufm_pkeys] when served, and every [ufm_pkeys:NAME] of f.
func (c *Config) pkeysSections(f Fabric) []string {
	var out []string
	if f.UFMPKeys.Enabled() {
		out = append(out, f.UFMPKeysSection())
	}
	for _, p := range c.PKeysClientsOf(f.Name) {
		if p.Enabled() {
			out = append(out, p.Section())
		}
	}
	return out
}

// OwnsQoS says whether the manager owns OpenSM's qos and qos_policy_file on
// this fabric: when a pkeys client may set a pkey's QoS (UFM's mtu_limit,
// service_level, rate_limit). Otherwise they are [opensm_conf]'s.
func (fc FabricConfig) OwnsQoS() bool { return len(fc.pkeysSections(fc.Fabric)) > 0 }

// checkQoSOptions refuses [opensm_conf]'s qos and qos_policy_file on a
// fabric whose pkeys clients may set a QoS, naming the option and the
// clients: the manager turns qos on only while some pkey's QoS is set and
// writes its own policy, which the operator's would replace.
func (c *Config) checkQoSOptions(f Fabric) []error {
	clients := c.pkeysSections(f)
	if len(clients) == 0 {
		return nil
	}
	var errs []error
	for _, kv := range f.OpenSMConf {
		if slices.ContainsFunc(OwnedQoSOptions, func(o string) bool { return strings.EqualFold(o, kv.Key) }) {
			errs = append(errs, fmt.Errorf("%s %s: the manager sets this option itself on this fabric, because its "+
				"pkeys client %s may set a pkey's QoS (qos is turned on only while some pkey's QoS is set, with the "+
				"manager's own QoS policy file); remove the line, or serve no pkeys client on this fabric",
				f.OpenSMConfSection(), kv.Key, strings.Join(clients, ", ")))
		}
	}
	return errs
}
