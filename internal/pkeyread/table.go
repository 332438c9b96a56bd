package pkeyread

// Table is the non-zero entries of a port's P_Key table, in table order. An
// entry's high bit says full membership, its low 15 bits are the pkey.
type Table []uint16

// Membership is how a table holds a pkey.
type Membership int

const (
	NotMember Membership = iota
	Limited
	Full
)

func (m Membership) String() string {
	switch m {
	case Limited:
		return "limited"
	case Full:
		return "full"
	}
	return "not a member"
}

// Membership says how the table holds pkey (its low 15 bits); an entry of
// each kind counts as full, the membership the port can use.
func (t Table) Membership(pkey uint16) Membership {
	m := NotMember
	for _, e := range t {
		if e&0x7fff != pkey&0x7fff {
			continue
		}
		if e&0x8000 != 0 {
			return Full
		}
		m = Limited
	}
	return m
}
