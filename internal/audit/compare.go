package audit

import (
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
)

// Compare judges the tables read against e: one finding per difference. A
// port whose read failed is unreachable, and proves nothing either way.
func Compare(e Expected, results []pkeyread.Result) []Finding {
	var findings []Finding
	for _, res := range results {
		port := res.Target.Port
		if res.Err != nil {
			findings = append(findings, unreachable(port, "could not be read: "+res.Err.Error()))
			continue
		}
		findings = append(findings, e.compareHost(port, res.PKeys)...)
		if res.SwitchPKeys != nil {
			sw := res.Target.Switch
			findings = append(findings, e.compareSwitch(port, &sw, res.SwitchPKeys)...)
		}
	}
	return findings
}

// compareHost compares a host port's table with its memberships.
func (e Expected) compareHost(port fabric.GUID, table pkeyread.Table) []Finding {
	var findings []Finding
	for _, p := range e.Partitions {
		want, got := p.Membership(port, e.SMPort), table.Membership(p.PKey)
		switch {
		case want == got:
		case got == pkeyread.NotMember:
			findings = append(findings, missing(port, nil, p, want))
		case want == pkeyread.NotMember:
			findings = append(findings, foreign(port, nil, p.PKey, p.Owner, got))
		default:
			findings = append(findings, wrongMembership(port, p, want, got))
		}
	}
	return append(findings, e.unknownPKeys(port, nil, table)...)
}

// compareSwitch compares the table of the switch port facing port with the
// host's memberships: the switch must hold each pkey the host is recorded
// in, and no other (it enforces with this table). Memberships are not
// compared, as in pkeyread.Prove.
func (e Expected) compareSwitch(port fabric.GUID, sw *pkeyread.SwitchPort, table pkeyread.Table) []Finding {
	var findings []Finding
	for _, p := range e.Partitions {
		want, held := p.Membership(port, e.SMPort), table.Membership(p.PKey) != pkeyread.NotMember
		switch {
		case want != pkeyread.NotMember && !held:
			findings = append(findings, missing(port, sw, p, want))
		case want == pkeyread.NotMember && held:
			findings = append(findings, foreign(port, sw, p.PKey, p.Owner, table.Membership(p.PKey)))
		}
	}
	return append(findings, e.unknownPKeys(port, sw, table)...)
}

// unknownPKeys are the entries of a table whose pkey no partition of the file
// has: nobody is recorded in them, so any port holding one is in breach.
func (e Expected) unknownPKeys(port fabric.GUID, sw *pkeyread.SwitchPort, table pkeyread.Table) []Finding {
	var findings []Finding
	seen := map[uint16]bool{}
	for _, entry := range table {
		pkey := entry & 0x7fff
		if _, ok := e.Partition(pkey); ok || seen[pkey] {
			continue
		}
		seen[pkey] = true
		findings = append(findings, foreign(port, sw, pkey, "no recorded partition", table.Membership(pkey)))
	}
	return findings
}

// CompareEnforcement judges the PortInfo of the switch ports facing hosts
// (facing[i] is the host behind infos[i]): each must enforce partitions in
// both directions. A switch port that could not be read proves nothing and
// is reported unreachable.
func CompareEnforcement(facing []fabric.GUID, infos []pkeyread.PortInfoResult) []Finding {
	var findings []Finding
	for i, res := range infos {
		switch {
		case res.Err != nil:
			findings = append(findings, unreachable(facing[i], "the switch port facing it could not be read: "+res.Err.Error()))
		case !res.Info.Enforcing():
			findings = append(findings, notEnforcing(facing[i], res.Port, res.Info))
		}
	}
	return findings
}
