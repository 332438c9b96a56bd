package opensm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Group is a hardening group: a set of opensm.conf options (or, for
// default_partition, a rule on the configuration) that protects tenants who
// share a fabric from each other. docs/opensm-hardening.md explains each one,
// why, and what it costs.
type Group string

const (
	// GroupMKey turns M_Key protection on: m_key, m_key_protection_level,
	// m_key_lease_period, m_key_lookup (and m_key_per_port FALSE on NVIDIA's
	// OpenSM, so that one M_Key opens every port).
	GroupMKey Group = "m_key"
	// GroupKeys replaces OpenSM's well-known SM_Key and SA_Key (both 1) with
	// secret ones: sm_key, sa_key.
	GroupKeys Group = "keys"
	// GroupDefaultPartition keeps every port a limited member of the default
	// partition: [opensm] default_partition may not make ALL or ALL_CAS full
	// members. It writes no opensm.conf option.
	GroupDefaultPartition Group = "default_partition"
	// GroupEnforcement makes switches enforce partitions on the ports that face
	// hosts: part_enforce both, no_partition_enforcement FALSE, and the table
	// rules the manager's checks assume, allow_both_pkeys FALSE and
	// keep_pkey_indexes TRUE.
	GroupEnforcement Group = "enforcement"
	// GroupSATrust turns on NVIDIA OpenSM's SA enhanced trust model
	// (sa_enhanced_trust_model TRUE). Upstream OpenSM has no equivalent: the
	// group writes nothing for it.
	GroupSATrust Group = "sa_trust"
)

// AllGroups lists every group, in the order RenderConf writes their options.
var AllGroups = []Group{GroupMKey, GroupKeys, GroupDefaultPartition, GroupEnforcement, GroupSATrust}

// The words [opensm] hardening takes besides group names, each on its own.
const (
	HardeningAll  = "all"  // every group; the default
	HardeningNone = "none" // no group: OpenSM's own defaults
)

// Hardening is what RenderConf needs to write the hardening options. The zero
// value turns every group off.
type Hardening struct {
	Groups []Group // the groups on, in AllGroups order
	// MKeyProtectionLevel is m_key_protection_level: 1 hides the M_Key from
	// Gets, 2 and 3 also refuse Gets without it. 0 would hand the M_Key to any
	// host that asks, so it is refused.
	MKeyProtectionLevel int
	// MKeyLeasePeriod is m_key_lease_period in seconds, 0 for a lease that
	// never expires.
	MKeyLeasePeriod int
}

// Defaults of the M_Key options, as the reference recommends (and UFM sets).
const (
	DefaultMKeyProtectionLevel = 2
	DefaultMKeyLeasePeriod     = 60
	// MaxMKeyLeasePeriod is the largest lease PortInfo can carry (16 bits).
	MaxMKeyLeasePeriod = 65535
)

// Has says whether group g is on.
func (h Hardening) Has(g Group) bool { return slices.Contains(h.Groups, g) }

// ParseGroups reads the value of [opensm] hardening: "all", "none", or group
// names separated by commas (blanks around them are ignored). The groups come
// back in AllGroups order. Unknown names, repeats, and "all" or "none" mixed
// with names are errors that name the word.
func ParseGroups(line string) ([]Group, error) {
	words := strings.Split(line, ",")
	for i, w := range words {
		words[i] = strings.TrimSpace(w)
	}
	if len(words) == 1 {
		switch words[0] {
		case HardeningAll:
			return slices.Clone(AllGroups), nil
		case HardeningNone:
			return []Group{}, nil
		}
	}
	seen := map[Group]bool{}
	var errs []error
	for _, w := range words {
		g := Group(w)
		switch {
		case w == "":
			errs = append(errs, errors.New("empty group name (a stray comma?)"))
		case w == HardeningAll || w == HardeningNone:
			errs = append(errs, fmt.Errorf("%q stands alone; it cannot be mixed with group names", w))
		case !slices.Contains(AllGroups, g):
			errs = append(errs, fmt.Errorf("unknown hardening group %q; the groups are %s, or all, or none", w, joinGroups(AllGroups)))
		case seen[g]:
			errs = append(errs, fmt.Errorf("group %q given twice", w))
		default:
			seen[g] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	groups := make([]Group, 0, len(seen))
	for _, g := range AllGroups {
		if seen[g] {
			groups = append(groups, g)
		}
	}
	return groups, nil
}

// CheckMKeyProtectionLevel returns why level cannot be m_key_protection_level.
func CheckMKeyProtectionLevel(level int) error {
	if level < 1 || level > 3 {
		return errors.New("want 1, 2 or 3 (2 is recommended; 0 would give the M_Key to anyone who asks)")
	}
	return nil
}

// CheckMKeyLeasePeriod returns why seconds cannot be m_key_lease_period.
func CheckMKeyLeasePeriod(seconds int) error {
	if seconds < 0 || seconds > MaxMKeyLeasePeriod {
		return fmt.Errorf("want a number of seconds from 0 (no lease) to %d", MaxMKeyLeasePeriod)
	}
	return nil
}

// groupOption is an opensm.conf option a group owns.
type groupOption struct {
	key        string
	value      func(h Hardening, k Keys) string
	nvidiaOnly bool // upstream OpenSM does not know it ("Unrecognized token")
}

func fixed(v string) func(Hardening, Keys) string { return func(Hardening, Keys) string { return v } }

// groupOptions maps each group to the options it writes, in the order written.
var groupOptions = map[Group][]groupOption{
	GroupMKey: {
		{key: "m_key", value: func(_ Hardening, k Keys) string { return FormatKey(k.MKey) }},
		{key: "m_key_protection_level", value: func(h Hardening, _ Keys) string { return strconv.Itoa(h.MKeyProtectionLevel) }},
		{key: "m_key_lease_period", value: func(h Hardening, _ Keys) string { return strconv.Itoa(h.MKeyLeasePeriod) }},
		// Ports whose M_Key OpenSM does not know yet (after a restart with a new
		// key) are tried with the key cached for them in guid2mkey.
		{key: "m_key_lookup", value: fixed("TRUE")},
		// One M_Key for every port: the one --show-keys prints opens them all.
		{key: "m_key_per_port", value: fixed("FALSE"), nvidiaOnly: true},
	},
	GroupKeys: {
		{key: "sm_key", value: func(_ Hardening, k Keys) string { return FormatKey(k.SMKey) }},
		{key: "sa_key", value: func(_ Hardening, k Keys) string { return FormatKey(k.SAKey) }},
	},
	GroupEnforcement: {
		{key: "part_enforce", value: fixed("both")},
		{key: "no_partition_enforcement", value: fixed("FALSE")}, // TRUE would force part_enforce off
		// One entry per pkey and port ("both" means full), as the capacity
		// checks count them, and pkeys that keep their index across sweeps, so
		// no queue pair finds itself in another partition.
		{key: "allow_both_pkeys", value: fixed("FALSE")},
		{key: "keep_pkey_indexes", value: fixed("TRUE")},
	},
	GroupSATrust: {
		{key: "sa_enhanced_trust_model", value: fixed("TRUE"), nvidiaOnly: true},
	},
}

// OptionGroup returns the group that owns the opensm.conf option key, or "" when
// no group does. While its group is on, [opensm_conf] may not set the option.
func OptionGroup(key string) Group {
	for _, g := range AllGroups {
		for _, o := range groupOptions[g] {
			if strings.EqualFold(o.key, key) {
				return g
			}
		}
	}
	return ""
}

// hardeningOptions returns the options of the groups on that flavour knows, and
// the groups on that write nothing for that flavour.
func (h Hardening) options(f fabric.Flavour, k Keys) (opts []KeyValue, skipped []Group) {
	for _, g := range AllGroups {
		if !h.Has(g) {
			continue
		}
		wrote := false
		for _, o := range groupOptions[g] {
			if o.nvidiaOnly && f != fabric.NVIDIA {
				continue
			}
			opts = append(opts, KeyValue{o.key, o.value(h, k)})
			wrote = true
		}
		if !wrote && len(groupOptions[g]) > 0 {
			skipped = append(skipped, g)
		}
	}
	return opts, skipped
}

// Unwritten returns the groups on that write no option for flavour f: sa_trust
// on upstream OpenSM, which has no SA trust model.
func (h Hardening) Unwritten(f fabric.Flavour) []Group {
	_, skipped := h.options(f, Keys{})
	return skipped
}

// check returns why h cannot be rendered with keys k. Errors never quote a key.
func (h Hardening) check(k Keys) error {
	for _, g := range h.Groups {
		if !slices.Contains(AllGroups, g) {
			return fmt.Errorf("unknown hardening group %q", g)
		}
	}
	if h.Has(GroupMKey) {
		if err := CheckMKeyProtectionLevel(h.MKeyProtectionLevel); err != nil {
			return fmt.Errorf("m_key_protection_level %d: %w", h.MKeyProtectionLevel, err)
		}
		if err := CheckMKeyLeasePeriod(h.MKeyLeasePeriod); err != nil {
			return fmt.Errorf("m_key_lease_period %d: %w", h.MKeyLeasePeriod, err)
		}
	}
	if h.Has(GroupMKey) || h.Has(GroupKeys) {
		if err := k.Check(); err != nil {
			return fmt.Errorf("the keys are not fit for use: %w", err)
		}
	}
	return nil
}
