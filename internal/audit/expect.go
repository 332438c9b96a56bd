package audit

import (
	"fmt"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// Expected is what host ports may hold: the partitions of the file OpenSM
// was last seen applying, members resolved as OpenSM resolves them.
type Expected struct {
	Partitions []Partition // in pkey order
	// SMPort is the master SM's port, which SELF names; 0 when not known
	// (then SELF names no port, and the SM's own port's full membership of
	// the default partition is a finding).
	SMPort fabric.GUID
}

// Partition is one partition of the file.
type Partition struct {
	PKey  uint16 // its low 15 bits
	Owner string // whose it is, for findings and summaries
	// members are the statement's, in file order: OpenSM applies them in
	// turn and a later one wins.
	members []partitions.Member
}

// Expect reads the partitions OpenSM applies from file (Parse's result).
// owners names a partition's owner by pkey (a network's name and id); a
// partition it does not name is named by its statement's name.
func Expect(file *partitions.File, owners map[uint16]string) Expected {
	var e Expected
	for _, st := range file.Statements {
		pkey := uint16(st.PKey) & 0x7fff
		owner := owners[pkey]
		if owner == "" {
			owner = fmt.Sprintf("partition %s", st.Name)
		}
		e.Partitions = append(e.Partitions, Partition{PKey: pkey, Owner: owner, members: st.Members})
	}
	slices.SortFunc(e.Partitions, func(a, b Partition) int { return int(a.PKey) - int(b.PKey) })
	return e
}

// Membership is how the file makes host port a member of p: the last of
// its members that names the port. A host port is named by its GUID, ALL,
// ALL_CAS, and SELF when it is the SM's; ALL_SWITCHES and ALL_ROUTERS name no
// host port, nor ALL_VCAS a physical one.
func (p Partition) Membership(port, smPort fabric.GUID) pkeyread.Membership {
	m := pkeyread.NotMember
	for _, member := range p.members {
		names := false
		switch member.Keyword {
		case "":
			names = member.GUID == port
		case partitions.All, partitions.AllCAs:
			names = true
		case partitions.Self:
			names = smPort != 0 && port == smPort
		}
		if names {
			m = membership(member.Membership)
		}
	}
	return m
}

func membership(m partitions.Membership) pkeyread.Membership {
	if m == partitions.Full {
		return pkeyread.Full
	}
	return pkeyread.Limited
}

// Partition returns the partition of pkey (low 15 bits), if the file has it.
func (e Expected) Partition(pkey uint16) (Partition, bool) {
	i, ok := slices.BinarySearchFunc(e.Partitions, pkey&0x7fff, func(p Partition, k uint16) int { return int(p.PKey) - int(k) })
	if !ok {
		return Partition{}, false
	}
	return e.Partitions[i], true
}

// Named are the ports the file names by GUID: the recorded members, which
// must be on the fabric.
func (e Expected) Named() []fabric.GUID {
	var ports []fabric.GUID
	for _, p := range e.Partitions {
		for _, m := range p.members {
			if m.Keyword == "" {
				ports = append(ports, m.GUID)
			}
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}
