package partitions

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// The QoS policy file OpenSM loads with "qos TRUE" (its qos_policy_file).
// The partitions file's mtu=, rate= and sl= set a partition's IPoIB
// broadcast group and the SL of its paths, but no limit on the MTU or rate of
// a unicast path: those come from the policy, a qos-level per Kubernetes
// pkey whose QoS a client set, with its SL, MTU and rate limits, chosen by a
// match rule on the pkey of the path asked for.
//
// qos TRUE is on only while some pkey's QoS is set (RenderQoSPolicy returns
// nil otherwise): it changes more than those pkeys. Without it OpenSM forces
// every partition's sl= to 0 (the SA answers SL 0 for an adopted partition
// written with sl=3); with it, a partition's sl= would be applied, unless a
// qos-level overrides it. So every other partition whose line has sl= (the
// template's, an adopted one's) gets a qos-level of its own with SL 0, the
// SL its paths had without qos, and a pkey's QoS changes no other
// partition's paths. The DEFAULT level (SL 0) is the paths' no rule matches,
// at the SL they had too.

// QoSLevelName is the name of a Kubernetes pkey's qos-level: its partition's.
func QoSLevelName(k KubernetesPartition) string { return KubernetesPartitionName(k.PKey) }

// slPartition is a partition of the file, not a Kubernetes one with a QoS,
// whose line has sl=.
type slPartition struct {
	pkey fabric.PKey
	sl   string
}

// RenderQoSPolicy writes the QoS policy file of s, whose partitions file is
// text: a qos-level and a match rule for each Kubernetes partition with a
// QoS, then for each other partition of text with sl= (SL 0), in pkey order; nil
// when no Kubernetes partition has a QoS (then OpenSM runs without qos).
// Its values are the IBTA codes the partitions file gives the same
// partition.
func RenderQoSPolicy(s State, text []byte) []byte {
	parts := slices.Clone(s.Kubernetes)
	slices.SortFunc(parts, func(a, b KubernetesPartition) int { return cmp.Compare(a.PKey, b.PKey) })
	parts = slices.DeleteFunc(parts, func(k KubernetesPartition) bool { return !k.HasQoS() })
	if len(parts) == 0 {
		return nil
	}
	others := slPartitions(parts, text)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by alternative-fabric-manager from revision %d. Do not edit: it is rewritten from the database.\n",
		s.Revision)
	b.WriteString("qos-levels\n")
	b.WriteString("    qos-level\n        name: DEFAULT\n        use: the paths of every other partition\n        sl: 0\n    end-qos-level\n")
	for _, k := range parts {
		q := k.QoS
		fmt.Fprintf(&b, "    qos-level\n        name: %s\n        use: Kubernetes pkey %s\n", QoSLevelName(k), k.PKey)
		fmt.Fprintf(&b, "        sl: %d\n        mtu-limit: %d\n        rate-limit: %d\n    end-qos-level\n",
			q.ServiceLevel, q.MTUCode(), q.RateCode())
	}
	for _, o := range others {
		fmt.Fprintf(&b, "    qos-level\n        name: sl-%s\n        use: partition %s keeps SL 0 as without qos and not its sl %s\n"+
			"        sl: 0\n    end-qos-level\n", o.pkey, o.pkey, o.sl)
	}
	b.WriteString("end-qos-levels\n")
	b.WriteString("\nqos-match-rules\n")
	for _, k := range parts {
		fmt.Fprintf(&b, "    qos-match-rule\n        use: Kubernetes pkey %s\n        pkey: %s\n        qos-level-name: %s\n"+
			"    end-qos-match-rule\n", k.PKey, k.PKey, QoSLevelName(k))
	}
	for _, o := range others {
		fmt.Fprintf(&b, "    qos-match-rule\n        use: partition %s\n        pkey: %s\n        qos-level-name: sl-%s\n"+
			"    end-qos-match-rule\n", o.pkey, o.pkey, o.pkey)
	}
	b.WriteString("end-qos-match-rules\n")
	return b.Bytes()
}

// slPartitions are the partitions of text, other than the Kubernetes ones
// of kube, whose line has sl=, in pkey order; a pkey's first statement
// (the one that creates the partition in OpenSM) gives its SL. A text that
// does not parse has none: the check refuses it before it is written.
func slPartitions(kube []KubernetesPartition, text []byte) []slPartition {
	f, err := Parse(text)
	if err != nil {
		return nil
	}
	seen := map[fabric.PKey]bool{}
	for _, k := range kube {
		seen[k.PKey] = true
	}
	var out []slPartition
	for _, st := range f.Statements {
		if seen[st.PKey] {
			continue
		}
		seen[st.PKey] = true
		for _, fl := range st.Flags {
			if fl.Name == "sl" {
				out = append(out, slPartition{pkey: st.PKey, sl: fl.Value})
			}
		}
	}
	slices.SortFunc(out, func(a, b slPartition) int { return cmp.Compare(a.pkey, b.pkey) })
	return out
}
