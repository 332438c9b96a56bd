package partitions

import (
	"errors"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Render writes the partitions file of s with the built-in template:
//
//	# Written by alternative-fabric-manager from revision <R>. Do not edit: ...
//	<DefaultPartition, as is>
//	net-<network ID>=<pkey>, ipoib :
//	    <GUID>=full,
//	    <GUID>=full ;
//
// one statement per network, in pkey order, members in GUID order; a network
// without ports is written "net-<ID>=<pkey>, ipoib : ;".
//
// Render refuses (with an *Error) a state whose file Check would refuse: a default
// partition that is not exactly one Default=0x7fff statement on one line passing
// Check's rules, pkeys outside 0x0001-0x7ffe or shared, a port in two networks or
// listed twice, two networks whose IDs give the same partition name. So whatever it
// returns passes Check(·, s).
func Render(s State) ([]byte, error) {
	c := newChecker(s)
	names := make([]string, len(s.Networks))
	byName := make(map[string]string, len(s.Networks))
	total := 0
	for i, n := range s.Networks {
		total += len(n.Members)
		if n.ID == "" {
			c.problem(0, "state: the network with pkey %s has no ID", n.PKey)
		}
		names[i] = PartitionName(n.ID)
		if other, dup := byName[names[i]]; dup {
			c.problem(0, "state: networks %s and %s have the same partition name %s", other, n.ID, names[i])
		}
		byName[names[i]] = n.ID
	}
	c.checkDefaultPartition(s.DefaultPartition)
	if err := c.err(); err != nil {
		return nil, err
	}

	order := make([]int, len(s.Networks))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(s.Networks[a].PKey) - int(s.Networks[b].PKey) })

	ipoib := []Flag{{Name: "ipoib"}}
	guids := make([]fabric.GUID, 0, total) // one backing array for every network's sorted ports
	members := make([]Member, 0, total)
	f := File{Statements: make([]Statement, len(order))}
	for k, i := range order {
		n := &s.Networks[i]
		start := len(guids)
		guids = append(guids, n.Members...)
		sorted := guids[start:]
		slices.Sort(sorted)
		first := len(members)
		for _, g := range sorted {
			members = append(members, Member{GUID: g, Membership: Full})
		}
		f.Statements[k] = Statement{Name: names[i], PKey: n.PKey, Flags: ipoib, Members: members[first:len(members):len(members)]}
	}

	// About 30 bytes per member line and 50 per header: one allocation for the file.
	b := make([]byte, 0, 128+len(s.DefaultPartition)+50*len(order)+30*total)
	b = append(b, "# Written by alternative-fabric-manager from revision "...)
	b = strconv.AppendInt(b, s.Revision, 10)
	b = append(b, ". Do not edit: it is rewritten from the database.\n"...)
	b = append(b, s.DefaultPartition...)
	b = append(b, '\n')
	for i := range f.Statements {
		b = f.Statements[i].appendText(b)
	}
	return b, nil
}

// checkDefaultPartition records why the configured default partition cannot be
// written as the file's Default statement.
func (c *checker) checkDefaultPartition(line string) {
	const prefix = "default_partition: "
	if line == "" {
		c.problem(0, prefix+"empty; it must be the Default=0x7fff statement")
		return
	}
	for i := 0; i < len(line); i++ {
		if b := line[i]; b < ' ' || b == 0x7f {
			c.problem(0, prefix+"must be one line without control characters; found 0x%02x at column %d", b, i+1)
			return
		}
	}
	f, err := Parse([]byte(line))
	if perr := (*Error)(nil); errors.As(err, &perr) {
		for _, p := range perr.Problems {
			c.problem(0, prefix+"%s", p.Reason)
		}
		return
	}
	if len(f.Statements) != 1 || f.Statements[0].PKey != fabric.DefaultPKey {
		c.problem(0, prefix+"must be exactly one statement, for Default=0x7fff")
		return
	}
	// The statement lands on the file's line 2; report it as configuration instead.
	before := len(c.list)
	c.checkStatement(&f.Statements[0])
	for i := before; i < len(c.list); i++ {
		c.list[i] = Problem{Line: 0, Reason: prefix + c.list[i].Reason}
	}
}

// PartitionName is the name of a network's partition: "net-" and the first 27
// characters of the network ID, 31 characters in all for a UUID, which is as many
// as OpenSM keeps. A character outside [A-Za-z0-9_.-] becomes '_'.
func PartitionName(networkID string) string {
	b := make([]byte, 0, 31)
	b = append(b, "net-"...)
	kept := 0
	for _, r := range networkID {
		if kept == 27 {
			break
		}
		if r < utf8.RuneSelf && isNameByte(byte(r)) {
			b = append(b, byte(r))
		} else {
			b = append(b, '_')
		}
		kept++
	}
	return string(b)
}
