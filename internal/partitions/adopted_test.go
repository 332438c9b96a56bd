package partitions

import (
	"context"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// runningFile is a partitions file as UFM or the previous manager left it.
const runningFile = `Default=0x7fff, ipoib : ALL=limited, SELF=full ;
tenant_a=0x0010, ipoib, mtu=5, rate=7, sl=1 :
    0x0002c90300000001=full,
    0x0002c90300000002=limited ;
tenant_b=0x0020, defmember=full : 0x0002c90300000003=full, 0x0002c90300000004=full ;
empty=0x0030 : ;
`

// planOf is the adoption plan of partitions file text, next to the builtin
// template's partitions.
func planOf(t *testing.T, text string) AdoptionPlan {
	t.Helper()
	f, err := ParseFor([]byte(text), fabric.NVIDIA)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanAdoption(f, 0x7ffe, noStatic(t))
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func noStatic(t *testing.T) *Static {
	t.Helper()
	st, err := BuiltinTemplate().Static(context.Background(), defaultPartition, 0x7ffe)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPlanAdoption(t *testing.T) {
	plan := planOf(t, runningFile)
	var got []string
	for _, st := range plan.Adopt {
		got = append(got, st.Text())
	}
	want := []string{
		"tenant_a=0x0010, ipoib, mtu=5, rate=7, sl=1 :\n    0x0002c90300000001=full,\n    0x0002c90300000002=limited ;",
		"tenant_b=0x0020, defmember=full :\n    0x0002c90300000003=full,\n    0x0002c90300000004=full ;",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("adopted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	notes := strings.Join(plan.Notes, "\n")
	for _, w := range []string{"Default (0x7fff): not adopted", "empty (0x0030): not adopted, it has no members"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes %q lack %q", notes, w)
		}
	}
	for _, st := range plan.Adopt {
		back, err := ParseStatement(st.Text())
		if err != nil || back.Text() != st.Text() {
			t.Errorf("%s does not read back: %v", st.Name, err)
		}
	}
}

func TestPlanAdoptionRefuses(t *testing.T) {
	static, err := ParseTemplate("t", []byte("{{ default_partition }}\nstorage=0x0040, ipoib : 0x0002c90300000009=limited ;\n"+
		"{{ flat.name }}={{ flat.pkey }} :{{ flat.members_text }} ;\n{% for p in adopted %}{{ p.text }}\n{% endfor %}"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := static.Static(context.Background(), defaultPartition, 0x7ffe)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, line, want string }{
		{"keyword", "t=0x0010 : ALL_CAS=limited ;", "member ALL_CAS=limited cannot be adopted"},
		{"static other contents", "s=0x0040, ipoib : 0x0002c90300000008=limited ;", "static partition storage has this pkey with other contents"},
		{"static name", "storage=0x0041 : 0x0002c90300000008=limited ;", "static partition 0x0040 has this name"},
		{"flat name", "flat=0x0011 : 0x0002c90300000008=full ;", "the flat partition's"},
		{"kubernetes name", "k8s-0005=0x0012 : 0x0002c90300000008=full ;", "another pkey's partition"},
		{"network name", "net-0005-x=0x0013 : 0x0002c90300000008=full ;", "another pkey's partition"},
		{"indx0", "t=0x0014, indx0 : 0x0002c90300000008=full ;", "indx0 cannot be adopted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := "Default=0x7fff : ALL=limited, SELF=full ;\ngood=0x0015 : 0x0002c90300000007=full ;\n" + tt.line + "\n"
			f, err := ParseFor([]byte(text), fabric.NVIDIA)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := PlanAdoption(f, 0x7ffe, st)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v (plan %v), want an error with %q", err, plan, tt.want)
			}
			if plan.Adopt != nil {
				t.Errorf("a refused file adopts %v: want nothing (all or nothing)", plan.Adopt)
			}
		})
	}
	// The static partition as the template writes it is not adopted.
	f, err := ParseFor([]byte("Default=0x7fff : ALL=limited, SELF=full ;\nstorage=0x0040, ipoib : 0x0002c90300000009=limited ;\n"), fabric.NVIDIA)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanAdoption(f, 0x7ffe, st)
	if err != nil || len(plan.Adopt) != 0 || !strings.Contains(strings.Join(plan.Notes, ";"), "as static partition storage") {
		t.Errorf("the template's static partition: plan %+v, %v", plan, err)
	}
}

func TestRenderAdopted(t *testing.T) {
	adopted := planOf(t, runningFile).Adopt
	base := State{Revision: 1, DefaultPartition: defaultPartition, Flat: flat, Adopted: adopted}
	tests := []struct {
		name  string
		state func(State) State
		want  []string // statements the file must hold, as the manager writes them
		not   []string
	}{
		{"no owner: as the running file wrote them", func(s State) State { return s },
			[]string{adopted[0].Text(), adopted[1].Text()}, nil},
		{"a network owns 0x0010: its port beside the adopted", func(s State) State {
			s.Networks = []Network{{ID: "n1", PKey: 0x10, Members: []fabric.GUID{0x0002c90300000005}}}
			return s
		}, []string{"net-0010-n1=0x0010, ipoib :\n    0x0002c90300000005=full,\n    0x0002c90300000001=full,\n    0x0002c90300000002=limited ;",
			adopted[1].Text()}, []string{"tenant_a"}},
		{"an adopted member that became the network's port is written once", func(s State) State {
			s.Networks = []Network{{ID: "n1", PKey: 0x10, Members: []fabric.GUID{0x0002c90300000001}}}
			return s
		}, []string{"net-0010-n1=0x0010, ipoib :\n    0x0002c90300000001=full,\n    0x0002c90300000002=limited ;"}, nil},
		{"a Kubernetes pkey owns 0x0020", func(s State) State {
			s.Kubernetes = []KubernetesPartition{{PKey: 0x20, Members: []KubernetesMember{{GUID: 0x0002c90300000006, Membership: Limited}}}}
			return s
		}, []string{"k8s-0020=0x0020 :\n    0x0002c90300000006=limited,\n    0x0002c90300000003=full,\n    0x0002c90300000004=full ;"},
			[]string{"tenant_b"}},
		{"the flat partition owns its pkey", func(s State) State {
			s.Adopted = append(s.Adopted, planOf(t, "Default=0x7fff : ALL=limited, SELF=full ;\nold_flat=0x7ffe : 0x0002c90300000007=full ;\n").Adopt...)
			return s
		}, []string{"flat=0x7ffe, ipoib :\n    0x0002c90300000007=full ;"}, []string{"old_flat"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state(base)
			out, err := render(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(out, s); err != nil {
				t.Fatalf("the rendered file fails Check: %v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w+"\n") {
					t.Errorf("file lacks\n%s\nin\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(string(out), n) {
					t.Errorf("file holds %q:\n%s", n, out)
				}
			}
		})
	}
}

// A template that leaves adopted members out would cut their tenants off:
// Check refuses it, whether or not an owner has the pkey.
func TestCheckKeepsAdoptedMembers(t *testing.T) {
	adopted := planOf(t, runningFile).Adopt
	s := State{Revision: 1, DefaultPartition: defaultPartition, Flat: flat, Adopted: adopted,
		Networks: []Network{{ID: "n1", PKey: 0x10, Members: []fabric.GUID{0x0002c90300000005}}}}
	good, err := render(s)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, old, new, want string }{
		{"unowned partition left out", adopted[1].Text(), "", "adopted partition tenant_b (0x0020) has no partition statement"},
		{"unowned member left out", "0x0002c90300000003=full,\n    ", "", "adopted port 0x0002c90300000003 of pkey 0x0020 is missing"},
		{"owned: member left out", "0x0002c90300000005=full,\n    0x0002c90300000001=full,", "0x0002c90300000005=full,", "adopted port 0x0002c90300000001 of pkey 0x0010 is missing"},
		{"membership changed", "0x0002c90300000002=limited", "0x0002c90300000002=full", "must be a limited member"},
		{"an adopted member elsewhere", "0x0002c90300000004=full ;", "0x0002c90300000004=full,\n    0x0002c90300000005=full ;", "port 0x0002c90300000005 of network n1 may be in no other partition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tt.old, tt.new, 1)
			if bad == string(good) {
				t.Fatalf("%q is not in\n%s", tt.old, good)
			}
			if err := Check([]byte(bad), s); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v, want %q\n%s", err, tt.want, bad)
			}
		})
	}
}

// FlagsChange names each flag dropped and added, a changed value as both.
func TestFlagsChange(t *testing.T) {
	ipoib, mtu4, mtu5, sl3 := Flag{Name: "ipoib"}, Flag{Name: "mtu", Value: "4"}, Flag{Name: "mtu", Value: "5"}, Flag{Name: "sl", Value: "3"}
	for _, tt := range []struct {
		before, after []Flag
		want          string
	}{
		{[]Flag{ipoib, mtu4}, []Flag{ipoib, mtu4}, ""},
		{[]Flag{ipoib, mtu4}, []Flag{mtu4, ipoib}, ""},
		{[]Flag{ipoib, mtu4}, []Flag{ipoib}, "mtu=4 dropped"},
		{[]Flag{mtu4}, []Flag{ipoib, mtu5}, "mtu=4 dropped, ipoib added, mtu=5 added"},
		{nil, []Flag{sl3}, "sl=3 added"},
	} {
		if got := FlagsChange(tt.before, tt.after); got != tt.want {
			t.Errorf("FlagsChange(%v, %v) = %q, want %q", tt.before, tt.after, got, tt.want)
		}
	}
}
