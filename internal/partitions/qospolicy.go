package partitions

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
)

// The QoS policy file OpenSM loads with "qos TRUE" (its qos_policy_file).
// The partitions file's mtu=, rate= and sl= set a partition's IPoIB
// broadcast group and the SL of its paths, but no limit on the MTU or rate of
// a unicast path: those come from the policy, a qos-level per Kubernetes
// pkey with its SL, MTU and rate limits, chosen by a match rule on the pkey
// of the path asked for.
//
// OpenSM wants a DEFAULT qos-level, with an SL, for the paths no rule
// matches: SL 0, which is what every other partition's paths had before
// (without "qos TRUE" OpenSM forces every partition's sl= to 0).

// QoSLevelName is the name of a Kubernetes pkey's qos-level: its partition's.
func QoSLevelName(k KubernetesPartition) string { return KubernetesPartitionName(k.PKey) }

// RenderQoSPolicy writes the QoS policy file of s: a qos-level and a match
// rule for each Kubernetes partition with a QoS, in pkey order. Its values
// are the IBTA codes the partitions file gives the same partition.
func RenderQoSPolicy(s State) []byte {
	parts := slices.Clone(s.Kubernetes)
	slices.SortFunc(parts, func(a, b KubernetesPartition) int { return cmp.Compare(a.PKey, b.PKey) })
	parts = slices.DeleteFunc(parts, func(k KubernetesPartition) bool { return !k.HasQoS() })
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
	b.WriteString("end-qos-levels\n")
	if len(parts) == 0 {
		return b.Bytes()
	}
	b.WriteString("\nqos-match-rules\n")
	for _, k := range parts {
		fmt.Fprintf(&b, "    qos-match-rule\n        use: Kubernetes pkey %s\n        pkey: %s\n        qos-level-name: %s\n"+
			"    end-qos-match-rule\n", k.PKey, k.PKey, QoSLevelName(k))
	}
	b.WriteString("end-qos-match-rules\n")
	return b.Bytes()
}
