package partitions

import (
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Check parses text with Parse, then checks the isolation rules the manager
// promises for the networks of s:
//
//   - the default partition (0x7fff) is defined; if it makes ports limited members
//     (ALL=limited or ALL_CAS=limited), it also has SELF=full, or the SM's own port
//     would be limited and limited ports could not reach the SA;
//   - ALL and ALL_CAS are full members of no partition (a shared default partition
//     is not supported yet);
//   - every network has a statement with its pkey whose members are exactly its
//     ports, all =full: no keyword, no limited member, no other port;
//   - a network's port is in no other partition, whatever the membership, and in
//     one network only (in s);
//   - other (static) partitions may exist: Parse's rules suffice for them.
//
// The error is an *Error listing every problem found.
func Check(text []byte, s State) error {
	f, err := Parse(text)
	if err != nil {
		return err
	}
	c := newChecker(s)
	c.checkFile(f)
	return c.err()
}

// checker holds the state indexed for the rules, and the problems found.
type checker struct {
	problems
	networks      []Network
	networkByPKey map[fabric.PKey]int      // index in networks
	networkOfGUID map[fabric.GUID]*Network // the network a port belongs to
	hasStatement  map[fabric.PKey]struct{} // networks' pkeys seen in the file
}

// newChecker indexes s, recording as problems (line 0) what makes s itself
// inconsistent: the database layer should never produce these, and a file cannot
// satisfy them.
func newChecker(s State) *checker {
	total := 0
	for _, n := range s.Networks {
		total += len(n.Members)
	}
	c := &checker{
		networks:      s.Networks,
		networkByPKey: make(map[fabric.PKey]int, len(s.Networks)),
		networkOfGUID: make(map[fabric.GUID]*Network, total),
		hasStatement:  make(map[fabric.PKey]struct{}, len(s.Networks)),
	}
	for i := range s.Networks {
		n := &s.Networks[i]
		if n.PKey == 0 || n.PKey > fabric.MaxNetworkPKey {
			c.problem(0, "state: network %s has pkey %s, outside 0x0001-0x7ffe", n.ID, n.PKey)
		} else if j, dup := c.networkByPKey[n.PKey]; dup {
			c.problem(0, "state: networks %s and %s share pkey %s", s.Networks[j].ID, n.ID, n.PKey)
		} else {
			c.networkByPKey[n.PKey] = i
		}
		for _, g := range n.Members {
			switch other := c.networkOfGUID[g]; {
			case g == 0:
				c.problem(0, "state: network %s has a port with GUID 0", n.ID)
			case other == n:
				c.problem(0, "state: network %s lists port %s twice", n.ID, g)
			case other != nil:
				c.problem(0, "state: port %s is in networks %s and %s", g, other.ID, n.ID)
			default:
				c.networkOfGUID[g] = n
			}
		}
	}
	return c
}

func (c *checker) checkFile(f *File) {
	hasDefault := false
	for i := range f.Statements {
		st := &f.Statements[i]
		if st.PKey == fabric.DefaultPKey {
			hasDefault = true
		}
		c.checkStatement(st)
	}
	if !hasDefault {
		c.problem(0, "the default partition (Default=0x7fff) is not defined")
	}
	for _, n := range c.networks {
		if _, ok := c.hasStatement[n.PKey]; !ok && n.PKey != 0 && n.PKey <= fabric.MaxNetworkPKey {
			c.problem(0, "network %s has no partition statement for pkey %s", n.ID, n.PKey)
		}
	}
}

// checkStatement applies the rules to one statement; Render uses it on its own for
// the configured default partition.
func (c *checker) checkStatement(st *Statement) {
	var network *Network
	if i, ok := c.networkByPKey[st.PKey]; ok {
		network = &c.networks[i]
		c.hasStatement[st.PKey] = struct{}{}
	}
	listed := 0 // the network's ports listed as full members
	for _, m := range st.Members {
		var owner *Network
		if m.Keyword == "" {
			owner = c.networkOfGUID[m.GUID]
		}
		switch {
		case (m.Keyword == All || m.Keyword == AllCAs) && m.Membership == Full && st.PKey == fabric.DefaultPKey:
			c.problem(m.Line, "%s=full in the default partition: a shared default partition is not supported (every port could reach every other)", m.Keyword)
		case (m.Keyword == All || m.Keyword == AllCAs) && m.Membership == Full:
			c.problem(m.Line, "%s=full in partition %s: every host would be a full member", m.Keyword, st.Name)
		case owner != nil && owner.PKey != st.PKey:
			c.problem(m.Line, "port %s of network %s may be in no other partition, here %s (%s)", m.GUID, owner.ID, st.Name, st.PKey)
		case network == nil:
			// Default or a static partition: Parse's rules suffice.
		case m.Keyword != "":
			c.problem(m.Line, "%s in partition %s of network %s: only the network's ports may be members", m.Keyword, st.Name, network.ID)
		case owner == nil:
			c.problem(m.Line, "port %s in partition %s is not a port of network %s", m.GUID, st.Name, network.ID)
		case m.Membership != Full:
			c.problem(m.Line, "port %s must be a full member of network %s's partition, not %s", m.GUID, network.ID, m.Membership)
		default:
			listed++
		}
	}
	// Parse refuses a member listed twice, so counting suffices unless one is missing.
	if network != nil && listed < len(network.Members) {
		inFile := make(map[fabric.GUID]struct{}, len(st.Members))
		for _, m := range st.Members {
			inFile[m.GUID] = struct{}{}
		}
		for _, g := range network.Members {
			if _, ok := inFile[g]; !ok {
				c.problem(st.Line, "port %s of network %s is missing from partition %s", g, network.ID, st.Name)
			}
		}
	}
	if st.PKey == fabric.DefaultPKey {
		c.checkDefaultKeepsSMFull(st)
	}
}

// checkDefaultKeepsSMFull refuses a default partition that makes every port limited
// without making the SM's port full again: on real hardware limited ports cannot
// reach the SA through a limited SM port. Parse already keeps SELF after ALL.
func (c *checker) checkDefaultKeepsSMFull(st *Statement) {
	var limitedAll *Member
	selfFull := false
	for i, m := range st.Members {
		if (m.Keyword == All || m.Keyword == AllCAs) && m.Membership == Limited && limitedAll == nil {
			limitedAll = &st.Members[i]
		}
		if m.Keyword == Self && m.Membership == Full {
			selfFull = true
		}
	}
	if limitedAll != nil && !selfFull {
		c.problem(limitedAll.Line, "the default partition has %s=limited without SELF=full after it: the SM's own port would be limited too", limitedAll.Keyword)
	}
}
