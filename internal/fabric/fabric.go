// Package fabric holds the domain types every other package speaks in: port GUIDs,
// partition keys, and how a Neutron port's DHCP client-id becomes a GUID.
//
// It is pure: no I/O, no configuration (column.go only says how the types sit in a
// database column). Rules that depend on configuration (which
// physnets are ours, the flat pkey) take their inputs as arguments.
package fabric

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// GUID is an InfiniBand port GUID. Its canonical text form, used in the database,
// in logs and in the partitions file, is "0x" followed by 16 lower-case hex digits.
type GUID uint64

func (g GUID) String() string { return fmt.Sprintf("0x%016x", uint64(g)) }

// ParseGUID reads the canonical form (or any 1..16 hex digits after "0x").
func ParseGUID(s string) (GUID, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) == 0 || len(h) > 16 {
		return 0, fmt.Errorf("GUID %q: want 0x followed by up to 16 hex digits", s)
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("GUID %q: not hexadecimal", s)
	}
	return GUID(v), nil
}

// PKey is a partition key without the membership bit: 0x0001..0x7fff.
type PKey uint16

// DefaultPKey is the default partition every port is at least a limited member of.
const DefaultPKey PKey = 0x7fff

// MaxNetworkPKey is the highest pkey a network's partition may use (0x7fff is the
// default partition's).
const MaxNetworkPKey PKey = 0x7ffe

func (p PKey) String() string { return fmt.Sprintf("0x%04x", uint16(p)) }

// ErrNoClientID says a port carries no client-id option with a value.
var ErrNoClientID = errors.New("no client-id")

// ParseClientID returns the GUID carried by a DHCP client-id (option 61): its last
// 8 octets. Octets are hex pairs separated by ':' or '-', or not separated at all,
// in any case. Both forms in use have at least 9 octets: the 20-octet vendor form
// (12-octet prefix + GUID) and the 9-octet hardware form (0x20 + GUID). The prefix
// is not checked: other IPoIB stacks use other first octets.
func ParseClientID(s string) (GUID, error) {
	octets, err := hexOctets(s)
	if err != nil {
		return 0, fmt.Errorf("client-id %q: %w", s, err)
	}
	if len(octets) < 9 {
		return 0, fmt.Errorf("client-id %q: %d octets, want at least 9 (prefix and 8-octet GUID)", s, len(octets))
	}
	var g uint64
	for _, o := range octets[len(octets)-8:] {
		g = g<<8 | uint64(o)
	}
	if g == 0 || g == ^uint64(0) {
		return 0, fmt.Errorf("client-id %q: GUID %s is not a port GUID", s, GUID(g))
	}
	return GUID(g), nil
}

func hexOctets(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var parts []string
	switch {
	case strings.Contains(s, ":"):
		parts = strings.Split(s, ":")
	case strings.Contains(s, "-"):
		parts = strings.Split(s, "-")
	default:
		if len(s)%2 != 0 {
			return nil, errors.New("odd number of hex digits")
		}
		for i := 0; i < len(s); i += 2 {
			parts = append(parts, s[i:i+2])
		}
	}
	out := make([]byte, 0, len(parts))
	for _, p := range parts {
		if len(p) != 2 {
			return nil, fmt.Errorf("octet %q is not two hex digits", p)
		}
		v, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return nil, fmt.Errorf("octet %q is not hexadecimal", p)
		}
		out = append(out, byte(v))
	}
	return out, nil
}

// DHCPOption is one entry of a Neutron port's extra_dhcp_opts.
type DHCPOption struct {
	Name  string  `json:"opt_name"`
	Value *string `json:"opt_value"`
}

// ClientIDFromOptions picks the port's client-id among its DHCP options: the first
// option named "client-id" or "61" whose value is neither null nor empty.
// It returns ErrNoClientID when there is none, and a parse error when the first
// usable value is not a client-id.
func ClientIDFromOptions(opts []DHCPOption) (GUID, error) {
	for _, o := range opts {
		if o.Name != "client-id" && o.Name != "61" {
			continue
		}
		if o.Value == nil || strings.TrimSpace(*o.Value) == "" {
			continue
		}
		return ParseClientID(*o.Value)
	}
	return 0, ErrNoClientID
}

// Flavour is which OpenSM runs the fabric: the partitions file keywords and the
// options each one knows differ.
type Flavour uint8

const (
	// Upstream is OpenSM 3.3.x from linux-rdma, as distributions package it.
	// It rejects the whole partitions file on ALL_VCAS.
	Upstream Flavour = iota
	// NVIDIA is NVIDIA's OpenSM 5.x (MLNX_OFED, DOCA, UFM): a superset of
	// upstream, with ALL_VCAS and the SA enhanced trust model among its
	// extras.
	NVIDIA
)

func (f Flavour) String() string {
	switch f {
	case Upstream:
		return "upstream"
	case NVIDIA:
		return "nvidia"
	}
	return "Flavour(" + strconv.Itoa(int(f)) + ")"
}

// PKeyRange is an inclusive range of pkeys, such as [ufm_pkeys] pkey_range:
// the only pkeys Kubernetes partitions may use. The zero range holds none.
type PKeyRange struct{ First, Last PKey }

// Contains says whether p is in the range.
func (r PKeyRange) Contains(p PKey) bool { return r.First != 0 && r.First <= p && p <= r.Last }

// Empty says whether the range holds no pkey.
func (r PKeyRange) Empty() bool { return r.First == 0 }

func (r PKeyRange) String() string {
	if r.Empty() {
		return "none"
	}
	return r.First.String() + "-" + r.Last.String()
}

// Membership is how a port is a member of a partition: a full member reaches
// every member, a limited one only the full members.
type Membership string

const (
	Full    Membership = "full"
	Limited Membership = "limited"
)
