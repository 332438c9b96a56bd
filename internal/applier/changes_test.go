package applier

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// The hosts of the rig's subnet dump: H<n>'s node and its port 1's GUID.
func hostNode(n int) uint64      { return 0x0002c90300000000 + uint64(n)<<8 }
func hostPort(n int) fabric.GUID { return fabric.GUID(hostNode(n) + 1) }

// blockNotSent is OpenSM's ERR 0506 for H<n>: a line that names a port but
// no pkey.
func blockNotSent(n int) string {
	return logLine(0x01, fmt.Sprintf("pkey_mgr_update_pkey_entry: ERR 0506: pkey_mgr_update_pkey_entry() failed to update pkey table block 0 for node 0x%016x port 1 (H%d)", hostNode(n), n))
}

// otherNet is the other tenant's network, on VLAN 102.
const otherNet = "6c1e2a4f-0b7d-4e9a-8f3c-2d5b7a9e1c04"

func (r *applyRig) portIn(net, id string, g fabric.GUID) store.Job {
	r.t.Helper()
	j, err := r.st.RecordPort(r.t.Context(), store.PortChange{Operation: store.OpAddPort,
		Port: store.Port{ID: id, NetworkID: net, GUID: &g, Host: "h"}})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *applyRig) vlan(net string, seg int64) store.Job {
	r.t.Helper()
	j, err := r.st.RecordNetwork(r.t.Context(), store.NetworkChange{Operation: store.OpUpdateNetwork,
		Network: store.NetworkSpec{ID: net, Name: "n", Type: store.TypeVLAN, PhysicalNetwork: "ib", SegmentationID: &seg}})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *applyRig) removePort(id string) store.Job {
	r.t.Helper()
	j, err := r.st.RemovePort(r.t.Context(), store.PortRemoval{PortID: id})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// kube is the rig's store with a Kubernetes pkey range.
func (r *applyRig) kube() *store.Store {
	return r.st.WithRules(store.Rules{KubernetesRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff}})
}

func (r *applyRig) kubeAdd(pkey fabric.PKey, g fabric.GUID) store.Job {
	r.t.Helper()
	j, err := r.kube().AddKubernetesGUIDs(r.t.Context(), store.KubernetesAddition{PKey: pkey,
		Members: []store.KubernetesMember{{GUID: g, Membership: fabric.Full}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// tenants is the rig with two tenants' networks applied cleanly: H1's port in
// the rig's network (VLAN 101), H3's in the other tenant's (VLAN 102), and H5
// in Kubernetes pkey 0x1005.
func tenants(t *testing.T, sweep *string) *applyRig {
	r := newApplyRig(t, true, func() string { return heavySweep(*sweep) })
	r.network(101)
	r.portIn(r.netID, "port-h1", hostPort(1))
	r.vlan(otherNet, 102)
	r.portIn(otherNet, "port-h3", hostPort(3))
	r.kubeAdd(0x1005, hostPort(5))
	r.applied("first apply")
	return r
}

func wantStatus(t *testing.T, r *applyRig, name string, job store.Job, want string) store.Job {
	t.Helper()
	j := r.job(job.ID)
	if j.Status != want {
		t.Errorf("%s: %s (%s %s), want %s", name, j.Status, j.Description, j.Error, want)
	}
	return j
}

// A line that names a port but no pkey (its table block not sent) fails the
// jobs whose change added, removed or altered a membership of that port in
// the sweep, removals included (the port, its network, its Kubernetes pkey
// are no longer in the state the sweep applied), saying which port; the
// other tenant's change in the same sweep completes.
func TestNoPKeyErrorFailsOnlyTheChangesOfItsPort(t *testing.T) {
	tests := []struct {
		name   string
		host   int // the line's
		change func(r *applyRig) store.Job
	}{
		{"port removed", 1, func(r *applyRig) store.Job { return r.removePort("port-h1") }},
		{"port added", 2, func(r *applyRig) store.Job { return r.portIn(r.netID, "port-h2", hostPort(2)) }},
		{"network deleted", 1, func(r *applyRig) store.Job {
			j, err := r.st.RemoveNetwork(r.t.Context(), store.NetworkRemoval{NetworkID: r.netID})
			if err != nil {
				r.t.Fatal(err)
			}
			return j
		}},
		{"VLAN move", 1, func(r *applyRig) store.Job { return r.vlan(r.netID, 103) }},
		{"Kubernetes member added", 4, func(r *applyRig) store.Job { return r.kubeAdd(0x1005, hostPort(4)) }},
		{"Kubernetes member removed", 5, func(r *applyRig) store.Job {
			j, err := r.kube().RemoveKubernetesGUIDs(r.t.Context(), store.KubernetesRemoval{PKey: 0x1005,
				GUIDs: []fabric.GUID{hostPort(5)}})
			if err != nil {
				r.t.Fatal(err)
			}
			return j
		}},
		{"Kubernetes pkey deleted", 5, func(r *applyRig) store.Job {
			j, err := r.kube().DeleteKubernetesPKey(r.t.Context(), store.KubernetesDeletion{PKey: 0x1005})
			if err != nil {
				r.t.Fatal(err)
			}
			return j
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sweep := ""
			r := tenants(t, &sweep)
			job := tt.change(r)
			other := r.removePort("port-h3") // the other tenant's removal
			sweep = blockNotSent(tt.host)
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("apply: %v, want done", res)
			}
			j := wantStatus(t, r, "the change of the line's port", job, store.StatusFailed)
			if !strings.Contains(j.Error, "ERR 0506") || !strings.Contains(j.Error, fmt.Sprintf("host port %s:", hostPort(tt.host))) {
				t.Errorf("the failed job's reason %q does not name the port and OpenSM's line", j.Error)
			}
			wantStatus(t, r, "the other tenant's removal", other, store.StatusCompleted)
		})
	}
}

// With no state applied before in the term to compare with, a line that
// names a port but no pkey fails every job of the sweep: the term's first
// apply (the file OpenSM swept before may be another term's), and the first
// after an apply that wrote the file but proved nothing (OpenSM may have
// swept it). The next sweep, compared with a judged one, fails only the
// port's changes.
func TestNoPKeyErrorWithoutAppliedStateFailsEveryJob(t *testing.T) {
	sweep := blockNotSent(1)
	r := newApplyRig(t, true, func() string { return heavySweep(sweep) })
	r.network(101)
	first := []store.Job{r.portIn(r.netID, "port-h1", hostPort(1)), r.portIn(r.netID, "port-h2", hostPort(2))}
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("first apply: %v, want done", res)
	}
	for _, j := range first {
		wantStatus(t, r, "a job of the term's first apply", j, store.StatusFailed)
	}

	// A sweep that is not proven: the file is OpenSM's all the same.
	sweep = ""
	r.sm.sweep = func() string { return "" }
	r.term.Cfg.SweepTimeout = 200 * time.Millisecond
	timedOut := r.portIn(r.netID, "port-h3", hostPort(3))
	if res := r.term.apply(t.Context()); res != applyRetry {
		t.Fatalf("apply without a sweep: %v, want a retry", res)
	}
	r.sm.sweep = func() string { return heavySweep(sweep) }
	sweep = blockNotSent(1)
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	wantStatus(t, r, "H3's port, after a write that proved nothing", timedOut, store.StatusFailed)

	// Judged, then compared with: H4's port completes beside H1's line.
	later := r.portIn(r.netID, "port-h4", hostPort(4))
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	wantStatus(t, r, "H4's port, with a judged state to compare with", later, store.StatusCompleted)
}

// The state moves on during the sweep: the network moves to VLAN 102, and
// back to 101 before OpenSM's sweep ends. The move the sweep applied changed
// H1's memberships and fails on H1's line (the state read now shows no
// change); the move back is the next sweep's, and the other tenant's port,
// in the sweep, completes.
func TestNoPKeyErrorJudgedOnTheAppliedState(t *testing.T) {
	sweep := ""
	r := tenants(t, &sweep)
	move := r.vlan(r.netID, 103)
	other := r.portIn(otherNet, "port-h4", hostPort(4))
	var back store.Job
	r.sm.sweep = func() string {
		back = r.vlan(r.netID, 101) // after the apply read the state
		return heavySweep(blockNotSent(1))
	}
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	wantStatus(t, r, "the move the sweep applied", move, store.StatusFailed)
	wantStatus(t, r, "the other tenant's port", other, store.StatusCompleted)
	if j := r.job(back.ID); j.Status == store.StatusFailed || j.Status == store.StatusCompleted {
		t.Errorf("the move back, after the sweep's state, finished with it: %+v", j)
	}
	r.sm.sweep = func() string { return heavySweep("") }
	if res := r.term.apply(t.Context()); res != applyDone {
		t.Fatalf("apply: %v, want done", res)
	}
	wantStatus(t, r, "the move back", back, store.StatusCompleted)
}

// diffStates finds each change of a place once per object that made it, and
// nothing for what changes no table.
func TestDiffStates(t *testing.T) {
	p101, p102 := fabric.PKey(0x65), fabric.PKey(0x66)
	nets := func(pkey fabric.PKey) []store.Network {
		return []store.Network{{ID: "a", PKey: &pkey, Managed: true}, {ID: "f", Managed: true}}
	}
	h1, h2 := hostPort(1), hostPort(2)
	prev := store.Snapshot{Networks: nets(p101),
		Members: []store.Member{{NetworkID: "a", GUID: h1, PortID: "p1"}, {NetworkID: "f", GUID: h2, PortID: "p2"}},
		Kubernetes: []store.KubernetesPKey{{PKey: 0x1005, Members: []store.KubernetesMember{{GUID: h1, Membership: fabric.Full}}},
			{PKey: 0x1006, Members: []store.KubernetesMember{{GUID: h2, Membership: fabric.Full}}}}}
	port := func(id string) jobObject { return jobObject{store.ObjectPort, id} }
	network := func(id string) jobObject { return jobObject{store.ObjectNetwork, id} }
	pkey := func(id string) jobObject { return jobObject{store.ObjectPKey, id} }
	tests := []struct {
		name string
		cur  func(s store.Snapshot) store.Snapshot
		want sweepChanges
	}{
		{"nothing", func(s store.Snapshot) store.Snapshot { return s }, sweepChanges{}},
		{"a GUID moved to another port of its network", func(s store.Snapshot) store.Snapshot {
			s.Members = []store.Member{{NetworkID: "a", GUID: h1, PortID: "p9"}, s.Members[1]}
			return s
		}, sweepChanges{}},
		{"VLAN move", func(s store.Snapshot) store.Snapshot { s.Networks = nets(p102); return s },
			sweepChanges{network("a"): {{h1, p101}, {h1, p102}}}},
		{"port removed, port added", func(s store.Snapshot) store.Snapshot {
			s.Members = []store.Member{{NetworkID: "a", GUID: h2, PortID: "p3"}}
			return s
		}, sweepChanges{port("p1"): {{h1, p101}}, network("a"): {{h1, p101}, {h2, p101}},
			port("p3"): {{h2, p101}}, port("p2"): {{h2, store.DefaultFlatPKey}}, network("f"): {{h2, store.DefaultFlatPKey}}}},
		{"Kubernetes membership changed, pkey deleted, pkey created", func(s store.Snapshot) store.Snapshot {
			s.Kubernetes = []store.KubernetesPKey{{PKey: 0x1005, Members: []store.KubernetesMember{{GUID: h1, Membership: fabric.Limited}}},
				{PKey: 0x1007, Members: []store.KubernetesMember{{GUID: h2, Membership: fabric.Full}}}}
			return s
		}, sweepChanges{pkey("0x1005"): {{h1, 0x1005}}, pkey("0x1006"): {{h2, 0x1006}}, pkey("0x1007"): {{h2, 0x1007}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diffStates(prev, tt.cur(prev), store.DefaultFlatPKey)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("changes = %v, want %v", got, tt.want)
			}
		})
	}
}

// The comparison a sweep with pkey errors costs on 10,000 members, one port
// removed and one added; the Kubernetes partitions, unchanged, are skipped.
func BenchmarkDiffStates(b *testing.B) {
	pkey := fabric.PKey(0x65)
	prev := store.Snapshot{Networks: []store.Network{{ID: "a", PKey: &pkey, Managed: true}},
		Kubernetes: []store.KubernetesPKey{{PKey: 0x1005, Members: make([]store.KubernetesMember, 10000)}}}
	for i := range 10000 {
		prev.Members = append(prev.Members, store.Member{NetworkID: "a", GUID: fabric.GUID(0x0002c90400000000 + uint64(i)),
			PortID: fmt.Sprintf("p%d", i)})
	}
	cur := prev
	cur.Members = append(slices.Clone(prev.Members[1:]), store.Member{NetworkID: "a", GUID: 0x0002c90500000000, PortID: "q"})
	for b.Loop() {
		if c := diffStates(prev, cur, store.DefaultFlatPKey); len(c) != 3 {
			b.Fatalf("changes = %v", c)
		}
	}
}

// What the fabric holds is the judged state only while no other file can have
// been swept since: after each window below, a line that names H1 but no pkey
// fails the other tenant's change in the next sweep, as in a term's first
// apply; with none, it completes.
func TestNoPKeyErrorAfterAWindowFailsEveryJob(t *testing.T) {
	tests := []struct {
		name   string
		window func(t *testing.T, r *applyRig, sweep *string)
		want   string // the other tenant's change
	}{
		{"none", func(*testing.T, *applyRig, *string) {}, store.StatusCompleted},
		{"OpenSM restarted", func(t *testing.T, r *applyRig, _ *string) {
			r.term.restarts-- // the supervisor started it again since the term looked
			r.term.repairDrift(t.Context())
		}, store.StatusFailed},
		{"the file edited", func(t *testing.T, r *applyRig, _ *string) {
			opensmtest.AppendLog(t, r.term.Cfg.PartitionsFile, "edited = 0x0067 : ALL ;\n")
			r.term.repairDrift(t.Context())
		}, store.StatusFailed},
		{"a freeze lifted", func(t *testing.T, r *applyRig, _ *string) {
			r.term.reapply = true
			r.term.takeReapply()
		}, store.StatusFailed},
		{"jobs held by a gate", func(t *testing.T, r *applyRig, _ *string) {
			if err := r.st.RecordEnforcementErrors(t.Context(), r.term.id, []store.EnforcementSighting{{Switch: "0x0002c90300f00001",
				Port: 2, Line: "ERR 0507: Clearing Enforcement bit"}}); err != nil {
				t.Fatal(err)
			}
			held := r.portIn(otherNet, "port-h2", hostPort(2))
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("apply: %v, want done", res)
			}
			wantStatus(t, r, "a job while a gate is closed", held, store.StatusRunning)
			if _, err := r.st.ClearEnforcementErrors(t.Context()); err != nil {
				t.Fatal(err)
			}
			r.term.pollGates(t.Context())
		}, store.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sweep := ""
			r := tenants(t, &sweep)
			tt.window(t, r, &sweep)
			other := r.portIn(otherNet, "port-h4", hostPort(4))
			sweep = blockNotSent(1)
			if res := r.term.apply(t.Context()); res != applyDone {
				t.Fatalf("apply: %v, want done", res)
			}
			wantStatus(t, r, "the other tenant's port", other, tt.want)
		})
	}
}
