package partitions

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/golden"
)

// qosState is kubernetesState with QoS: 0x1005 at 4 KB, SL 3, 200 Gb/s;
// 0x1007 set at UFM's defaults; 0x1006 unset (ib-kubernetes sends none).
func qosState() State {
	s := kubernetesState(fabric.Upstream)
	s.Kubernetes[1].QoS = fabric.QoS{MTULimit: 4, ServiceLevel: 3, RateMbps: 200000}
	s.Kubernetes[2].QoS = fabric.DefaultQoS
	return s
}

// withSLPartitions adds an adopted partition with sl=3 and one without.
func withSLPartitions(t *testing.T, s State) State {
	t.Helper()
	s.Adopted = planOf(t, "Default=0x7fff : ALL=limited, SELF=full ;\n"+
		"storage=0x0abc, ipoib, sl=3 : 0x0002c90300000009=full ;\nbackup=0x0abd : 0x0002c90300000009=full ;\n").Adopt
	return s
}

// A Kubernetes partition's QoS, once a client set it, is written as its
// mtu=, rate= and sl= (IBTA codes) and as a qos-level of the QoS policy;
// every other partition with sl= gets a qos-level of its own with its SL
// (with qos on, the DEFAULT level would override its sl=). A pkey whose QoS
// no client set has no flags and no level, and without one the policy is
// nil: OpenSM runs without qos.
func TestRenderQoSGolden(t *testing.T) {
	tests := []struct {
		name   string
		state  State
		policy bool // a policy is written (qos on)
	}{
		{"kubernetes-qos", withSLPartitions(t, qosState()), true},
		{"kubernetes-unset", withSLPartitions(t, kubernetesState(fabric.Upstream)), false},
		{"no-kubernetes", checkState(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := renderKubernetes(t, tt.state)
			golden.Compare(t, filepath.Join("testdata", "render", tt.name+".golden"), []byte(text))
			policy := RenderQoSPolicy(tt.state, []byte(text))
			if !tt.policy {
				if policy != nil {
					t.Fatalf("policy without a pkey's QoS set:\n%s\nwant none (qos off)", policy)
				}
				return
			}
			golden.Compare(t, filepath.Join("testdata", "qospolicy", tt.name+".golden"), policy)
		})
	}
	plain, qos := renderKubernetes(t, kubernetesState(fabric.Upstream)), renderKubernetes(t, qosState())
	cut := func(s string) string { return s[:strings.Index(s, "k8s-")] }
	if cut(plain) != cut(qos) {
		t.Errorf("the QoS of Kubernetes pkeys changed the lines before theirs:\n%s\nwant\n%s", cut(qos), cut(plain))
	}
	// A pkey whose QoS no client set keeps its line as before QoS existed,
	// beside one whose QoS is set.
	if !strings.Contains(qos, "k8s-1006=0x1006 :\n    0x020000000000003f=full ;\n") {
		t.Errorf("unset pkey 0x1006's line changed:\n%s", qos)
	}
	if !strings.HasSuffix(plain, kubernetesTail) {
		t.Errorf("unset pkeys' lines changed:\n%s\nwant them to end\n%s", plain, kubernetesTail)
	}
}

// Check holds a Kubernetes partition's statement to its QoS.
func TestCheckKubernetesQoS(t *testing.T) {
	good := renderKubernetes(t, qosState())
	tests := []struct {
		name string
		text func(string) string
		want string
	}{
		{"mtu dropped", replaced("ipoib, mtu=5, rate=17, sl=3", "ipoib, rate=17, sl=3"),
			"partition k8s-1005 of Kubernetes pkey 0x1005 lacks mtu=5, its pkey's QoS"},
		{"another rate", replaced("rate=17", "rate=3"),
			"partition k8s-1005 of Kubernetes pkey 0x1005 has rate=3, not rate=17, its pkey's QoS"},
		{"sl on a partition without QoS", replaced("k8s-1006=0x1006 :", "k8s-1006=0x1006, sl=1 :"),
			"partition k8s-1006 of Kubernetes pkey 0x1006 has sl=1, which its pkey was not given"},
		{"defaults dropped", replaced("k8s-1007=0x1007, mtu=4, rate=2, sl=0 :", "k8s-1007=0x1007 :"),
			"partition k8s-1007 of Kubernetes pkey 0x1007 lacks mtu=4, its pkey's QoS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := tt.text(good)
			if text == good {
				t.Fatalf("the edit changed nothing in\n%s", good)
			}
			err := Check([]byte(text), qosState())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v\nwant a problem saying %q; file:\n%s", err, tt.want, text)
			}
		})
	}
}
