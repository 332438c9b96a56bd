// Package partitions renders OpenSM's partitions.conf from the recorded state and
// checks a partitions file, rendered by us or by an operator's template, before it
// is written.
//
// OpenSM fails open. A file it cannot parse makes every port a full member of the
// default partition and removes every tenant partition, and many spellings it does
// accept are silently reinterpreted (a membership of "fulll" means limited, "AL"
// means ALL, a GUID placed after an mgid= item on its line is ignored). So Parse
// accepts only a strict subset of OpenSM's grammar, in which every statement means
// exactly what it says, and Check adds on top the isolation rules the manager
// promises. Render writes only files that both accept.
//
// The package is pure: it reads and writes byte slices, never files.
package partitions

import (
	"net/netip"
	"strconv"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// File is a parsed partitions file: its statements in file order.
type File struct {
	Statements []Statement
}

// Statement is one "header : body ;" statement. Because Parse refuses a pkey or a
// name used by two statements, a statement is a whole partition.
type Statement struct {
	Line    int // physical line of the header, counted from 1
	Name    string
	PKey    fabric.PKey
	Flags   []Flag   // header flags, in file order
	Members []Member // in file order, which matters: OpenSM applies them in turn and a later one wins
	MGroups []MGroup // multicast groups to create with the partition (mgid= items)
}

// Flag is a header flag, or a group flag of an mgid= item, as written. Header
// flags are ipoib (without a value), defmember, mtu, rate, sl and scope; mgid=
// items may also carry Q_Key, TClass and FlowLabel.
type Flag struct {
	Name  string
	Value string // "" for ipoib
}

// Membership is how a member belongs to its partition.
type Membership string

const (
	// Full members may talk to every member of the partition.
	Full Membership = "full"
	// Limited members may talk to full members only.
	Limited Membership = "limited"
)

// Keyword names a set of ports that OpenSM resolves itself.
type Keyword string

// The keywords Parse accepts, spelled in full. OpenSM also takes any prefix of them
// and NONE; NVIDIA's OpenSM adds ALL_VCAS, which upstream OpenSM rejects and
// ParseFor accepts for NVIDIA only.
const (
	All         Keyword = "ALL"          // every end port: hosts, switch port 0, routers
	AllCAs      Keyword = "ALL_CAS"      // every channel adapter (host) port
	AllVCAs     Keyword = "ALL_VCAS"     // every virtual CA port (NVIDIA's OpenSM only)
	AllSwitches Keyword = "ALL_SWITCHES" // every switch's port 0
	AllRouters  Keyword = "ALL_ROUTERS"  // every router port
	Self        Keyword = "SELF"         // the port the running OpenSM is bound to
)

// Member is one member item: a port GUID or a keyword, with its membership.
type Member struct {
	Line       int         // physical line, counted from 1
	Keyword    Keyword     // "" when the member is a port GUID
	GUID       fabric.GUID // the port GUID, when Keyword is ""
	Membership Membership
}

// Who is the member as written in the file: the keyword, or the GUID in canonical form.
func (m Member) Who() string {
	if m.Keyword != "" {
		return string(m.Keyword)
	}
	return m.GUID.String()
}

// MGroup is an mgid= item: a multicast group OpenSM creates with the partition.
type MGroup struct {
	Line  int        // physical line, counted from 1
	GID   netip.Addr // an IPv6-format multicast GID (first byte 0xff)
	Flags []Flag     // group flags, in file order
}

// Statement returns the statement that defines pkey, or nil.
func (f *File) Statement(pkey fabric.PKey) *Statement {
	for i := range f.Statements {
		if f.Statements[i].PKey == pkey {
			return &f.Statements[i]
		}
	}
	return nil
}

// appendText appends the statement and a newline. An empty statement stays on its
// header's line. The ";" always shares a line with what precedes it: OpenSM's parser
// misreads a line holding only ";".
//
// mgid= items come first, each alone on its line: OpenSM takes the rest of the line
// as the group's flags, so the line's end ends the item, without a ",". Members
// follow, one per line.
func (s *Statement) appendText(b []byte) []byte {
	b = append(b, s.Name...)
	b = append(b, '=')
	b = appendPKey(b, s.PKey)
	for _, f := range s.Flags {
		b = append(b, ", "...)
		b = appendFlag(b, f)
	}
	b = append(b, " :"...)
	if len(s.Members)+len(s.MGroups) == 0 {
		return append(b, " ;\n"...)
	}
	for i, g := range s.MGroups {
		b = append(b, "\n    mgid="...)
		b = g.GID.AppendTo(b)
		for _, f := range g.Flags {
			b = append(b, ", "...)
			b = appendFlag(b, f)
		}
		if i == len(s.MGroups)-1 && len(s.Members) == 0 {
			b = append(b, " ;"...)
		}
	}
	for i, m := range s.Members {
		b = append(b, "\n    "...)
		if m.Keyword != "" {
			b = append(b, m.Keyword...)
		} else {
			b = appendGUID(b, m.GUID)
		}
		b = append(b, '=')
		b = append(b, m.Membership...)
		if i < len(s.Members)-1 {
			b = append(b, ',')
		} else {
			b = append(b, " ;"...)
		}
	}
	return append(b, '\n')
}

func appendFlag(b []byte, f Flag) []byte {
	b = append(b, f.Name...)
	if f.Value != "" {
		b = append(b, '=')
		b = append(b, f.Value...)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendPKey appends 0x and 4 lower-case hex digits, like fabric.PKey.String but
// without fmt: Render formats tens of thousands of these.
func appendPKey(b []byte, p fabric.PKey) []byte {
	return appendHex(b, uint64(p), 4)
}

// appendGUID appends 0x and 16 lower-case hex digits, like fabric.GUID.String.
func appendGUID(b []byte, g fabric.GUID) []byte {
	return appendHex(b, uint64(g), 16)
}

func appendHex(b []byte, v uint64, digits int) []byte {
	b = append(b, '0', 'x')
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b = append(b, hexDigits[v>>uint(shift)&0xf])
	}
	return b
}

// parseHex reads hex digits of either case; ok is false for any other byte or an
// empty string. Callers bound the length.
func parseHex(h string) (v uint64, ok bool) {
	if h == "" {
		return 0, false
	}
	for i := 0; i < len(h); i++ {
		d := hexValue[h[i]]
		if d > 0xf {
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

// hexValue maps a byte to its value as a hex digit, or 0xff. A table, because
// Parse reads 16 digits per member and a check fails a file with 50,000 members.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < 10; i++ {
		t['0'+i] = byte(i)
	}
	for i := 0; i < 6; i++ {
		t['a'+i], t['A'+i] = byte(10+i), byte(10+i)
	}
	return t
}()

// parseNumber reads a flag value: decimal without leading zeros (OpenSM would read
// "010" as octal), or 0x and hex digits. ok is false above max.
func parseNumber(s string, max uint64) (v uint64, ok bool) {
	if h, isHex := cutHexPrefix(s); isHex {
		if len(h) > 8 {
			return 0, false
		}
		v, ok = parseHex(h)
	} else {
		if s == "" || len(s) > 10 || (s[0] == '0' && len(s) > 1) {
			return 0, false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0, false
			}
		}
		var err error
		v, err = strconv.ParseUint(s, 10, 64)
		ok = err == nil
	}
	return v, ok && v <= max
}

func cutHexPrefix(s string) (string, bool) {
	if len(s) >= 2 && s[0] == '0' && s[1] == 'x' {
		return s[2:], true
	}
	return s, false
}
