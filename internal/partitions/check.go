package partitions

import (
	"maps"
	"slices"
	"strconv"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Check parses text with ParseFor (for s.Rules.Flavour), then checks the isolation
// rules the manager promises for the partitions of s:
//
//   - the default partition (0x7fff) is defined; if it makes ports limited members
//     (ALL=limited or ALL_CAS=limited), it also has SELF=full after that, or the SM's
//     own port would be limited and limited ports could not reach the SA;
//   - ALL, ALL_CAS and ALL_VCAS are full members of no partition, except ALL=full
//     (or ALL_CAS, ALL_VCAS) in the default partition when s.Rules.SharedDefaultPartition
//     is set: every port could then reach every other there;
//   - every network, and the flat partition, has a statement with its pkey whose
//     members are exactly its ports, all =full: no keyword, no limited member, no
//     other port;
//   - a port of a network or of the flat partition is in no other partition,
//     whatever the membership, and in only one of them (in s);
//   - every Kubernetes partition has a statement with its pkey whose members are
//     exactly its GUIDs, each with its membership, no keyword, with the ipoib flag
//     if it carries IPoIB and has a member, never if it does not carry it, and
//     indx0 if and only if KubernetesPartition.Index0;
//   - a Kubernetes GUID is in no partition but its Kubernetes ones, and indx0 is in
//     no other statement;
//   - an adopted partition's members (s.Adopted) are in the statement of its
//     pkey, each with its membership: alone while no owner has the pkey, beside
//     the owner's members once one has;
//   - other (static) partitions may exist: Parse's rules suffice for them.
//
// A state that no file can satisfy (two networks on one pkey, a port in two of
// them, no flat pkey...) is reported as problems of line 0 starting "state:".
// The error is an *Error listing every problem found.
func Check(text []byte, s State) error {
	f, err := ParseFor(text, s.Rules.Flavour)
	if err != nil {
		return err
	}
	c := newChecker(s)
	c.checkFile(f)
	return c.err()
}

// owned is a partition whose members the manager owns: a network's, or the flat
// networks' one.
type owned struct {
	id        string // the network's ID; "" for the flat partition
	desc      string // "network <ID>" or "the flat partition", for messages
	partition string // "network <ID>'s partition" or "the flat partition"
	pkey      fabric.PKey
	members   []fabric.GUID
	valid     bool // its pkey is usable: no other owned partition has it, in range
}

// checker holds the state indexed for the rules, and the problems found.
type checker struct {
	problems
	rules        Rules
	owned        []owned
	ownedByPKey  map[fabric.PKey]int    // index in owned, for valid pkeys
	ownerOfGUID  map[fabric.GUID]*owned // the partition a port belongs to
	hasStatement map[fabric.PKey]struct{}

	kube          []kubeOwned
	kubeByPKey    map[fabric.PKey]int         // index in kube, for valid pkeys
	kubeOfGUID    map[fabric.GUID]fabric.PKey // one Kubernetes partition of the GUID, for messages
	kubeStatement map[fabric.PKey]struct{}

	adopted     map[fabric.PKey]*Statement // the adopted partitions, by pkey
	adoptedSeen map[fabric.PKey]struct{}
}

// kubeOwned is a Kubernetes partition as the checker indexes it.
type kubeOwned struct {
	pkey    fabric.PKey
	desc    string // "Kubernetes pkey <pkey>"
	ipoib   bool
	index0  bool
	qos     KubernetesPartition // its QoS, whose flags the statement carries (HasQoS)
	members map[fabric.GUID]Membership
	valid   bool
}

// newChecker indexes s, recording as problems (line 0) what makes s itself
// inconsistent: the database layer should never produce these, and a file cannot
// satisfy them.
func newChecker(s State) *checker {
	total := len(s.Flat.Members)
	for _, n := range s.Networks {
		total += len(n.Members)
	}
	c := &checker{
		rules:        s.Rules,
		owned:        make([]owned, 0, len(s.Networks)+1),
		ownedByPKey:  make(map[fabric.PKey]int, len(s.Networks)+1),
		ownerOfGUID:  make(map[fabric.GUID]*owned, total),
		hasStatement: make(map[fabric.PKey]struct{}, len(s.Networks)+1),
		adopted:      adoptedByPKey(s),
		adoptedSeen:  make(map[fabric.PKey]struct{}, len(s.Adopted)),
	}
	for _, n := range s.Networks {
		desc := "network " + n.ID
		c.owned = append(c.owned, owned{id: n.ID, desc: desc, partition: desc + "'s partition", pkey: n.PKey, members: n.Members})
	}
	c.owned = append(c.owned, owned{desc: "the flat partition", partition: "the flat partition", pkey: s.Flat.PKey, members: s.Flat.Members})
	for i := range c.owned {
		o := &c.owned[i]
		switch j, dup := c.ownedByPKey[o.pkey]; {
		case o.pkey == 0 && i == len(c.owned)-1:
			c.problem(0, "state: the flat partition has no pkey ([opensm] flat_pkey): want one from 0x0001 to %s", fabric.MaxNetworkPKey)
		case o.pkey == 0 || o.pkey > fabric.MaxNetworkPKey:
			c.problem(0, "state: %s has pkey %s, outside 0x0001-%s", o.desc, o.pkey, fabric.MaxNetworkPKey)
		case dup && i == len(c.owned)-1:
			c.problem(0, "state: %s has the flat partition's pkey %s ([opensm] flat_pkey)", c.owned[j].desc, o.pkey)
		case dup:
			c.problem(0, "state: networks %s and %s share pkey %s", c.owned[j].id, o.id, o.pkey)
		default:
			c.ownedByPKey[o.pkey] = i
			o.valid = true
		}
		for _, g := range o.members {
			switch other := c.ownerOfGUID[g]; {
			case g == 0:
				c.problem(0, "state: %s has a port with GUID 0", o.desc)
			case other == o:
				c.problem(0, "state: %s lists port %s twice", o.desc, g)
			case other != nil && i == len(c.owned)-1:
				c.problem(0, "state: port %s is in %s and in the flat partition", g, other.desc)
			case other != nil:
				c.problem(0, "state: port %s is in networks %s and %s", g, other.id, o.id)
			default:
				c.ownerOfGUID[g] = o
			}
		}
	}
	c.indexKubernetes(s)
	return c
}

// indexKubernetes indexes the Kubernetes partitions of s, recording as state
// problems a pkey that is not theirs to use or a GUID that is also a network's.
func (c *checker) indexKubernetes(s State) {
	c.kube = make([]kubeOwned, 0, len(s.Kubernetes))
	c.kubeByPKey = make(map[fabric.PKey]int, len(s.Kubernetes))
	c.kubeOfGUID = map[fabric.GUID]fabric.PKey{}
	c.kubeStatement = make(map[fabric.PKey]struct{}, len(s.Kubernetes))
	for _, k := range s.Kubernetes {
		o := kubeOwned{pkey: k.PKey, desc: "Kubernetes pkey " + k.PKey.String(), ipoib: k.IPoIB,
			index0: k.Index0(c.rules.Flavour), qos: KubernetesPartition{QoS: k.QoS},
			members: make(map[fabric.GUID]Membership, len(k.Members))}
		_, network := c.ownedByPKey[k.PKey]
		_, dup := c.kubeByPKey[k.PKey]
		switch {
		case k.PKey == 0 || k.PKey > fabric.MaxNetworkPKey:
			c.problem(0, "state: %s is outside 0x0001-%s", o.desc, fabric.MaxNetworkPKey)
		case network:
			c.problem(0, "state: %s is also the pkey of %s", o.desc, c.owned[c.ownedByPKey[k.PKey]].desc)
		case dup:
			c.problem(0, "state: %s is listed twice", o.desc)
		default:
			o.valid = true
		}
		for _, m := range k.Members {
			_, twice := o.members[m.GUID]
			switch owner := c.ownerOfGUID[m.GUID]; {
			case m.GUID == 0:
				c.problem(0, "state: %s has a port with GUID 0", o.desc)
			case twice:
				c.problem(0, "state: %s lists port %s twice", o.desc, m.GUID)
			case m.Membership != Full && m.Membership != Limited:
				c.problem(0, "state: %s: port %s has membership %q", o.desc, m.GUID, m.Membership)
			case owner != nil:
				c.problem(0, "state: port %s is in %s and in %s", m.GUID, owner.desc, o.desc)
			default:
				o.members[m.GUID] = m.Membership
				if _, seen := c.kubeOfGUID[m.GUID]; !seen {
					c.kubeOfGUID[m.GUID] = k.PKey
				}
			}
		}
		if o.valid {
			c.kubeByPKey[k.PKey] = len(c.kube)
		}
		c.kube = append(c.kube, o)
	}
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
	for _, o := range c.owned {
		if _, ok := c.hasStatement[o.pkey]; !ok && o.valid {
			c.problem(0, "%s has no partition statement for pkey %s", o.desc, o.pkey)
		}
	}
	for _, k := range c.kube {
		if _, ok := c.kubeStatement[k.pkey]; !ok && k.valid {
			c.problem(0, "%s has no partition statement (the template must write the kubernetes partitions)", k.desc)
		}
	}
	for pkey, a := range c.adopted {
		if _, ok := c.adoptedSeen[pkey]; !ok {
			c.problem(0, "adopted partition %s (%s) has no partition statement (the template must write the adopted partitions)", a.Name, pkey)
		}
	}
}

// checkKubernetesStatement checks the statement of Kubernetes partition k:
// its flags, and that its members are exactly k's, with their memberships.
func (c *checker) checkKubernetesStatement(st *Statement, k *kubeOwned) {
	c.kubeStatement[st.PKey] = struct{}{}
	ipoib, index0 := hasFlag(st.Flags, "ipoib"), hasFlag(st.Flags, "indx0")
	switch {
	case k.ipoib && !ipoib && len(st.Members) > 0:
		// Without members the flag does nothing but churn (ipoibFlag).
		c.problem(st.Line, "partition %s of %s lacks the ipoib flag its pkey was given", st.Name, k.desc)
	case !k.ipoib && ipoib:
		c.problem(st.Line, "partition %s of %s has the ipoib flag, which its pkey was not given", st.Name, k.desc)
	}
	switch {
	case k.index0 && !index0:
		c.problem(st.Line, "partition %s of %s lacks indx0, which every member asked for", st.Name, k.desc)
	case !k.index0 && index0:
		c.problem(st.Line, "partition %s of %s has indx0, which not every member asked for (or this OpenSM does not take)", st.Name, k.desc)
	}
	c.checkKubernetesQoS(st, k)
	listed := 0
	for _, m := range st.Members {
		want, member := k.members[m.GUID]
		switch owner := c.ownerOfGUID[m.GUID]; {
		case m.Keyword != "":
			c.problem(m.Line, "%s in partition %s of %s: only its GUIDs may be members", m.Keyword, st.Name, k.desc)
		case owner != nil:
			c.problem(m.Line, "port %s of %s may be in no other partition, here %s (%s)", m.GUID, owner.desc, st.Name, st.PKey)
		case !member && c.isAdoptedMember(st.PKey, m.GUID):
			// Kept beside the pkey's own (checkAdopted).
		case !member:
			c.problem(m.Line, "port %s in partition %s is not a member of %s", m.GUID, st.Name, k.desc)
		case m.Membership != want:
			c.problem(m.Line, "port %s must be a %s member of %s, not %s", m.GUID, want, k.desc, m.Membership)
		default:
			listed++
		}
	}
	if listed < len(k.members) {
		inFile := make(map[fabric.GUID]struct{}, len(st.Members))
		for _, m := range st.Members {
			inFile[m.GUID] = struct{}{}
		}
		for _, g := range slices.Sorted(maps.Keys(k.members)) {
			if _, ok := inFile[g]; !ok {
				c.problem(st.Line, "port %s of %s is missing from partition %s", g, k.desc, st.Name)
			}
		}
	}
}

// checkKubernetesQoS checks that the statement of Kubernetes partition k
// carries its QoS as mtu=, rate= and sl= (IBTA codes), and none when it has
// none: a template that drops them would leave the IPoIB group and the
// partition's SL at OpenSM's defaults while the API reads the QoS asked for.
func (c *checker) checkKubernetesQoS(st *Statement, k *kubeOwned) {
	want := map[string]string{"mtu": "", "rate": "", "sl": ""}
	if k.qos.HasQoS() {
		q := k.qos.QoS
		want = map[string]string{"mtu": strconv.Itoa(q.MTUCode()), "rate": strconv.Itoa(q.RateCode()),
			"sl": strconv.Itoa(q.ServiceLevel)}
	}
	for _, name := range []string{"mtu", "rate", "sl"} {
		got, has := flagValue(st.Flags, name, ""), hasFlag(st.Flags, name)
		switch {
		case want[name] == "" && has:
			c.problem(st.Line, "partition %s of %s has %s=%s, which its pkey was not given", st.Name, k.desc, name, got)
		case want[name] != "" && !has:
			c.problem(st.Line, "partition %s of %s lacks %s=%s, its pkey's QoS", st.Name, k.desc, name, want[name])
		case want[name] != "" && mustNumber(got) != mustNumber(want[name]):
			c.problem(st.Line, "partition %s of %s has %s=%s, not %s=%s, its pkey's QoS", st.Name, k.desc, name, got,
				name, want[name])
		}
	}
}

func hasFlag(flags []Flag, name string) bool {
	return slices.ContainsFunc(flags, func(f Flag) bool { return f.Name == name })
}

func (c *checker) isKubernetesGUID(g fabric.GUID) bool {
	_, ok := c.kubeOfGUID[g]
	return ok
}

// isAllKeyword tells the keywords that stand for many ports at once, which must
// not make them full members of a partition they could then reach each other in.
func isAllKeyword(k Keyword) bool {
	return k == All || k == AllCAs || k == AllVCAs
}

// checkStatement applies the rules to one statement; Render uses it on its own for
// the configured default partition.
func (c *checker) checkStatement(st *Statement) {
	c.checkAdopted(st)
	if i, ok := c.kubeByPKey[st.PKey]; ok {
		c.checkKubernetesStatement(st, &c.kube[i])
		return
	}
	if hasFlag(st.Flags, "indx0") {
		c.problem(st.Line, "indx0 in partition %s: only a Kubernetes partition whose members all asked for index 0 may take it", st.Name)
	}
	var mine *owned // the owned partition this statement defines, if any
	if i, ok := c.ownedByPKey[st.PKey]; ok {
		mine = &c.owned[i]
		c.hasStatement[st.PKey] = struct{}{}
	}
	listed := 0 // the partition's ports listed as full members
	for _, m := range st.Members {
		var owner *owned
		if m.Keyword == "" {
			owner = c.ownerOfGUID[m.GUID]
		}
		switch {
		case isAllKeyword(m.Keyword) && m.Membership == Full && st.PKey == fabric.DefaultPKey && !c.rules.SharedDefaultPartition:
			c.problem(m.Line, "%s=full in the default partition: every port could reach every other; "+
				"set [opensm] shared_default_partition = true if the fabric relies on it", m.Keyword)
		case isAllKeyword(m.Keyword) && m.Membership == Full && mine == nil && st.PKey != fabric.DefaultPKey:
			c.problem(m.Line, "%s=full in partition %s: every host would be a full member", m.Keyword, st.Name)
		case owner != nil && owner.pkey != st.PKey:
			c.problem(m.Line, "port %s of %s may be in no other partition, here %s (%s)", m.GUID, owner.desc, st.Name, st.PKey)
		case m.Keyword == "" && c.isKubernetesGUID(m.GUID):
			c.problem(m.Line, "port %s of Kubernetes pkey %s may be in no partition but its Kubernetes ones, here %s (%s)",
				m.GUID, c.kubeOfGUID[m.GUID], st.Name, st.PKey)
		case mine == nil:
			// Default or a static partition: Parse's rules suffice.
		case m.Keyword != "":
			c.problem(m.Line, "%s in partition %s of %s: only its ports may be members", m.Keyword, st.Name, mine.desc)
		case owner == nil && c.isAdoptedMember(st.PKey, m.GUID):
			// Kept beside the partition's ports (checkAdopted).
		case owner == nil:
			c.problem(m.Line, "port %s in partition %s is not a port of %s", m.GUID, st.Name, mine.desc)
		case m.Membership != Full:
			c.problem(m.Line, "port %s must be a full member of %s, not %s", m.GUID, mine.partition, m.Membership)
		default:
			listed++
		}
	}
	// Parse refuses a member listed twice, so counting suffices unless one is missing.
	if mine != nil && listed < len(mine.members) {
		inFile := make(map[fabric.GUID]struct{}, len(st.Members))
		for _, m := range st.Members {
			inFile[m.GUID] = struct{}{}
		}
		for _, g := range mine.members {
			if _, ok := inFile[g]; !ok {
				c.problem(st.Line, "port %s of %s is missing from partition %s", g, mine.desc, st.Name)
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
