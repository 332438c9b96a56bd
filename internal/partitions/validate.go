package partitions

import (
	"errors"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// validateState refuses (with an *Error) a state whose file Check would refuse
// whatever the template: a default partition that is not exactly one
// Default=0x7fff statement on one line passing Check's rules; pkeys outside
// 0x0001-0x7ffe or shared, by networks or by a network and the flat partition; a
// port in two partitions or listed twice; a network without an ID. Partition
// names need no check: PartitionName makes them unique (see there).
func validateState(s State) error {
	c := newChecker(s)
	for _, n := range s.Networks {
		if n.ID == "" {
			c.problem(0, "state: the network with pkey %s has no ID", n.PKey)
		}
	}
	c.checkDefaultPartition(s.DefaultPartition)
	return c.err()
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
	f, err := ParseFor([]byte(line), c.rules.Flavour)
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
