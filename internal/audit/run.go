package audit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/partitions"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/pkeyread"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/topology"
)

// Input is what one audit reads.
type Input struct {
	// File is the partitions file OpenSM was last seen applying, and
	// Revision the recorded state it renders.
	File     []byte
	Revision int64
	Flavour  fabric.Flavour
	Owners   map[uint16]string // see Expect
	// Topology is OpenSM's last subnet dump: where each host port is.
	Topology *topology.Topology
	Reader   *pkeyread.Reader
	// CheckEnforcement: judge the switch ports' enforcement bits. The
	// simulated fabric does not keep them (they always read 0, whatever
	// OpenSM set), so there it is off and the summary says they were not
	// checked.
	CheckEnforcement bool
}

// Run reads every host port of the subnet dump, the switch port facing
// each and, with CheckEnforcement, those switch ports' PortInfo, and
// compares them with the file. An error means nothing was judged (the file
// does not parse, ctx ended); ports that cannot be read are findings.
func Run(ctx context.Context, in Input) (Summary, error) {
	s := Summary{Revision: in.Revision, Started: time.Now().UTC(), EnforcementChecked: in.CheckEnforcement}
	file, err := partitions.ParseFor(in.File, in.Flavour)
	if err != nil {
		return s, fmt.Errorf("the partitions file to audit against: %w", err)
	}
	e := Expect(file, in.Owners)
	ports := auditedPorts(in.Topology, e)
	targets, absent := placed(in.Topology, ports)
	for _, port := range absent {
		s.Findings = append(s.Findings, unreachable(port, "not in OpenSM's subnet dump (not on the fabric at its last sweep)"))
	}
	e.SMPort = masterSMPort(ctx, in.Reader, in.Topology, targets)
	results := in.Reader.Read(ctx, targets)
	if err := ctx.Err(); err != nil {
		return s, fmt.Errorf("audit: %w", err)
	}
	s.Findings = append(s.Findings, Compare(e, results)...)
	if in.CheckEnforcement {
		s.Findings = append(s.Findings, enforcement(ctx, in.Reader, targets)...)
	}
	s.Findings = ClassifyHostOnly(s.Findings, switchSides(results))
	s.Ports = len(ports)
	for _, r := range results {
		if r.Err == nil {
			s.Read++
		}
	}
	s.Partitions = summarize(e, ports, s.Findings)
	s.Took = time.Since(s.Started)
	return s, nil
}

// auditedPorts are every host port of the dump and every port the file
// names: a recorded member missing from the dump is unreachable.
func auditedPorts(topo *topology.Topology, e Expected) []fabric.GUID {
	ports := append(topo.HostPorts(), e.Named()...)
	slices.Sort(ports)
	return slices.Compact(ports)
}

// placed are the targets of the ports the dump has, and absent the others.
func placed(topo *topology.Topology, ports []fabric.GUID) (targets []pkeyread.Target, absent []fabric.GUID) {
	var present []fabric.GUID
	for _, p := range ports {
		if _, ok := topo.LID(p); ok {
			present = append(present, p)
		} else {
			absent = append(absent, p)
		}
	}
	targets, _ = pkeyread.Targets(topo, present)
	return targets, absent
}

// masterSMPort is the port of the master SM, which SELF names: the port at
// the master SM LID that the first readable host port's PortInfo names. 0
// when none can be read.
func masterSMPort(ctx context.Context, r *pkeyread.Reader, topo *topology.Topology, targets []pkeyread.Target) fabric.GUID {
	for _, t := range targets {
		res := r.ReadPortInfo(ctx, []pkeyread.SwitchPort{{GUID: t.Port, LID: t.LID, Path: t.Path}})
		if res[0].Err != nil {
			continue
		}
		for _, p := range topo.HostPorts() {
			if lid, ok := topo.LID(p); ok && lid == res[0].Info.MasterSMLID {
				return p
			}
		}
		return 0
	}
	return 0
}

// enforcement reads the PortInfo of the switch ports facing the targets.
func enforcement(ctx context.Context, r *pkeyread.Reader, targets []pkeyread.Target) []Finding {
	var facing []fabric.GUID
	var ports []pkeyread.SwitchPort
	for _, t := range targets {
		if t.Switch.GUID != 0 {
			facing = append(facing, t.Port)
			ports = append(ports, t.Switch)
		}
	}
	return CompareEnforcement(facing, r.ReadPortInfo(ctx, ports))
}

// switchSides says which host ports had the switch port facing them read.
// Its enforcement is known from the findings: with CheckEnforcement each such
// switch port's PortInfo was read too, and one that does not enforce, or
// could not be read, is a finding about that host port; without it the
// fabric does not report the bits (see SwitchSide.Enforcing).
func switchSides(results []pkeyread.Result) map[fabric.GUID]SwitchSide {
	sides := map[fabric.GUID]SwitchSide{}
	for _, r := range results {
		if r.Err == nil && r.SwitchPKeys != nil {
			sides[r.Target.Port] = SwitchSide{Read: true, Enforcing: true}
		}
	}
	return sides
}
