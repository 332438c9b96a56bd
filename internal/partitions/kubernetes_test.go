package partitions

import (
	"context"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Pods' GUIDs of the Kubernetes fixtures: k1 and k2 in pkey 0x1005 (k2
// limited), k2 also in 0x1006, which has no IPoIB.
const (
	k1 fabric.GUID = 0x020000000000003e
	k2 fabric.GUID = 0x020000000000003f
)

func kubernetesState(flavour fabric.Flavour) State {
	s := checkState()
	s.Rules.Flavour = flavour
	s.Kubernetes = []KubernetesPartition{
		{PKey: 0x1006, Members: []KubernetesMember{{GUID: k2, Membership: Full, Index0: true}}},
		{PKey: 0x1005, IPoIB: true, Members: []KubernetesMember{
			{GUID: k2, Membership: Limited, Index0: false},
			{GUID: k1, Membership: Full, Index0: true},
		}},
		{PKey: 0x1007, IPoIB: true},
	}
	return s
}

const kubernetesTail = `k8s-1005=0x1005, ipoib :
    0x020000000000003e=full,
    0x020000000000003f=limited ;
k8s-1006=0x1006 :
    0x020000000000003f=full ;
k8s-1007=0x1007 : ;
`

func renderKubernetes(t *testing.T, s State) string {
	t.Helper()
	text, err := BuiltinTemplate().Render(context.Background(), s)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if err := Check(text, s); err != nil {
		t.Fatalf("Check of the rendered file: %v\n%s", err, text)
	}
	return string(text)
}

// The built-in template writes the Kubernetes partitions after the flat one,
// in pkey order, each member with its membership; indx0 only for NVIDIA's
// OpenSM, on a partition every member of which asked for it.
func TestRenderKubernetes(t *testing.T) {
	text := renderKubernetes(t, kubernetesState(fabric.Upstream))
	if !strings.HasSuffix(text, kubernetesTail) {
		t.Fatalf("rendered file ends\n%s\nwant\n%s", text[strings.Index(text, "flat="):], kubernetesTail)
	}
	if strings.Contains(text, "indx0") {
		t.Errorf("upstream OpenSM's file carries indx0:\n%s", text)
	}
	nvidia := renderKubernetes(t, kubernetesState(fabric.NVIDIA))
	if !strings.Contains(nvidia, "k8s-1006=0x1006, indx0 :\n") || strings.Count(nvidia, "indx0") != 1 {
		t.Errorf("NVIDIA's file should carry indx0 on k8s-1006 only:\n%s", nvidia)
	}
	if _, err := Parse([]byte(nvidia)); err == nil || !strings.Contains(err.Error(), "flag indx0 is refused") {
		t.Errorf("upstream Parse of a file with indx0: %v", err)
	}
}

// A partition without members needs no ipoib flag, whoever owns it: OpenSM
// drops it, IPoIB group and all, in the pass that creates it. The built-in
// template leaves the flag out (ipoibFlag); a template that writes it anyway
// is not refused, and one that drops it from a partition with members is.
func TestCheckEmptyPartitionIPoIB(t *testing.T) {
	good := renderKubernetes(t, kubernetesState(fabric.Upstream))
	for _, want := range []string{"net-0066-c0ffee00-1234-4abc-8de=0x0066 : ;\n", "k8s-1007=0x1007 : ;\n"} {
		if !strings.Contains(good, want) {
			t.Fatalf("the built-in template should write %q without the ipoib flag:\n%s", want, good)
		}
	}
	tests := []struct {
		name string
		text func(string) string
		want string // "" for no problem
	}{
		{name: "as rendered", text: func(s string) string { return s }},
		{name: "an empty network with ipoib", text: replaced("=0x0066 : ;", "=0x0066, ipoib : ;")},
		{name: "an empty Kubernetes partition with ipoib", text: replaced("k8s-1007=0x1007 : ;", "k8s-1007=0x1007, ipoib : ;")},
		{name: "a Kubernetes partition with members without ipoib", text: replaced("k8s-1005=0x1005, ipoib :", "k8s-1005=0x1005 :"),
			want: "partition k8s-1005 of Kubernetes pkey 0x1005 lacks the ipoib flag its pkey was given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := tt.text(good)
			err := Check([]byte(text), kubernetesState(fabric.Upstream))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check = %v; want no problem in\n%s", err, text)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Check = %v; want a problem saying %q in\n%s", err, tt.want, text)
			}
		})
	}
}

// replaced is a text edit of TestCheckKubernetes's cases: old's first
// occurrence replaced by new.
func replaced(old, new string) func(string) string {
	return func(s string) string { return strings.Replace(s, old, new, 1) }
}

// appended is a text edit of TestCheckKubernetes's cases: more at the end.
func appended(more string) func(string) string {
	return func(s string) string { return s + more }
}

func TestCheckKubernetes(t *testing.T) {
	good := renderKubernetes(t, kubernetesState(fabric.Upstream))
	tests := []struct {
		name    string
		flavour fabric.Flavour
		text    func(string) string
		state   func(*State)
		want    string
	}{
		{name: "a member missing", text: replaced("    0x020000000000003e=full,\n", ""), want: "port 0x020000000000003e of Kubernetes pkey 0x1005 is missing from partition k8s-1005"},
		{name: "limited written full", text: replaced("0x020000000000003f=limited", "0x020000000000003f=full"), want: "port 0x020000000000003f must be a limited member of Kubernetes pkey 0x1005, not full"},
		{name: "a GUID that is no member", text: replaced("k8s-1007=0x1007 : ;", "k8s-1007=0x1007, ipoib : 0x0002c90300000401=full ;"), want: "port 0x0002c90300000401 in partition k8s-1007 is not a member of Kubernetes pkey 0x1007"},
		{name: "a keyword", text: replaced("k8s-1007=0x1007 : ;", "k8s-1007=0x1007, ipoib : ALL=limited ;"), want: "ALL in partition k8s-1007 of Kubernetes pkey 0x1007: only its GUIDs may be members"},
		{name: "a network's port", text: replaced("k8s-1007=0x1007 : ;", "k8s-1007=0x1007, ipoib : 0x0002c90300000101=full ;"), want: "port 0x0002c90300000101 of network 3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f may be in no other partition, here k8s-1007"},
		{name: "a Kubernetes GUID in a static partition", text: appended("storage=0x0010 : 0x020000000000003e=limited ;\n"), want: "port 0x020000000000003e of Kubernetes pkey 0x1005 may be in no partition but its Kubernetes ones, here storage (0x0010)"},
		{name: "ipoib dropped", text: replaced("k8s-1005=0x1005, ipoib :", "k8s-1005=0x1005 :"), want: "partition k8s-1005 of Kubernetes pkey 0x1005 lacks the ipoib flag"},
		{name: "ipoib added", text: replaced("k8s-1006=0x1006 :", "k8s-1006=0x1006, ipoib :"), want: "has the ipoib flag, which its pkey was not given"},
		{name: "a partition missing", text: replaced("k8s-1007=0x1007 : ;\n", ""), want: "Kubernetes pkey 0x1007 has no partition statement"},
		{name: "indx0 on a static partition", flavour: fabric.NVIDIA, text: appended("storage=0x0010, indx0 : ;\n"), want: "indx0 in partition storage: only a Kubernetes partition"},
		{name: "indx0 on a partition not every member asked it for", flavour: fabric.NVIDIA, text: replaced("k8s-1005=0x1005, ipoib :", "k8s-1005=0x1005, indx0, ipoib :"), want: "partition k8s-1005 of Kubernetes pkey 0x1005 has indx0, which not every member asked for"},
		{name: "a Kubernetes pkey on a network's", state: func(s *State) { s.Kubernetes[0].PKey = 0x0065 },
			want: "state: Kubernetes pkey 0x0065 is also the pkey of network 7a2b4c6d-1e3f-4a5b-8c7d-9e0f1a2b3c4d"},
		{name: "a network's port in a Kubernetes pkey", state: func(s *State) {
			s.Kubernetes[2].Members = []KubernetesMember{{GUID: h1, Membership: Full}}
		}, want: "state: port 0x0002c90300000101 is in network 3f1c5a9e-8d2b-4c7a-9e61-0a5b7c9d1e2f and in Kubernetes pkey 0x1007"},
		{name: "a GUID twice in one pkey", state: func(s *State) {
			s.Kubernetes[2].Members = []KubernetesMember{{GUID: k1, Membership: Full}, {GUID: k1, Membership: Limited}}
		}, want: "state: Kubernetes pkey 0x1007 lists port 0x020000000000003e twice"},
		{name: "the default partition's pkey", state: func(s *State) { s.Kubernetes[2].PKey = 0x7fff },
			want: "state: Kubernetes pkey 0x7fff is outside 0x0001-0x7ffe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := kubernetesState(tt.flavour)
			text := good
			if tt.flavour == fabric.NVIDIA {
				text = renderKubernetes(t, s)
			}
			if tt.state != nil {
				tt.state(&s)
			}
			if tt.text != nil {
				text = tt.text(text)
			}
			err := Check([]byte(text), s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v\nwant a problem saying %q; file:\n%s", err, tt.want, text)
			}
		})
	}
}
