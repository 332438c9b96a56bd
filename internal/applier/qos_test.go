package applier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// qosRig is a lead rig whose manager owns qos: a QoS policy file and
// opensm.conf's qos turned by the fake OpenSM.
func qosRig(t *testing.T) *leadRig {
	r := newLeadRig(t)
	r.st = r.st.WithRules(store.Rules{PhysicalNetworks: []string{"ibnet"}, FlatPKey: store.DefaultFlatPKey,
		KubernetesRange: fabric.PKeyRange{First: 0x1000, Last: 0x1fff}})
	r.app.Store = r.st
	r.sm.qosFile = filepath.Join(filepath.Dir(r.sm.pFile), "qos-policy.conf")
	r.app.Cfg.QoSPolicyFile = r.sm.qosFile
	r.app.Cfg.SetQoS = r.sm.setQoS
	return r
}

// sighups are the partitions files, QoS policies and qos of the SIGHUPs so
// far.
func (r *leadRig) sighups() (files, policies []string, qos []bool) {
	_, _, files = r.sm.state()
	r.sm.mu.Lock()
	defer r.sm.mu.Unlock()
	return files, append([]string{}, r.sm.policies...), append([]bool{}, r.sm.qosOn...)
}

// A pkey whose QoS no client set (ib-kubernetes sends none) reaches OpenSM
// as before QoS existed: its line without mtu=, rate= and sl=, no QoS
// policy, qos off, so that nothing else on the fabric changes. The first
// pkey whose QoS is set turns qos on with its policy; the last one removed
// turns it off again and removes the policy.
func TestLeadQoSOnlyWhileSet(t *testing.T) {
	r := qosRig(t)
	_, end := r.lead()
	waitLog(t, r.logs, "partitions applied", `"revision":0,`)
	j, err := r.st.AddKubernetesGUIDs(t.Context(), store.KubernetesAddition{PKey: 0x1004, CreatedBy: "ib-kubernetes",
		Request: "{}", Members: []store.KubernetesMember{{GUID: guidA, Membership: fabric.Full}}})
	if err != nil {
		t.Fatal(err)
	}
	r.wait(j, store.StatusCompleted)
	files, policies, qos := r.sighups()
	n := len(files) - 1
	if !strings.Contains(files[n], "k8s-1004=0x1004, ipoib :\n") || policies[n] != "" || qos[n] {
		t.Fatalf("an unset pkey's SIGHUP: qos %v, policy %q, file:\n%s", qos[n], policies[n], files[n])
	}
	mtu := 4
	j, err = r.st.AddKubernetesGUIDs(t.Context(), store.KubernetesAddition{PKey: 0x1005, CreatedBy: "nico", Request: "{}",
		Members: []store.KubernetesMember{{GUID: guidA, Membership: fabric.Full}}, QoS: store.QoSChange{MTULimit: &mtu}})
	if err != nil {
		t.Fatal(err)
	}
	r.wait(j, store.StatusCompleted)
	files, policies, qos = r.sighups()
	n = len(files) - 1
	if !qos[n] || !strings.Contains(policies[n], "name: k8s-1005") || strings.Contains(policies[n], "k8s-1004") ||
		!strings.Contains(files[n], "k8s-1004=0x1004, ipoib :\n") {
		t.Fatalf("a set pkey's SIGHUP: qos %v, policy:\n%s\nfile:\n%s", qos[n], policies[n], files[n])
	}
	j, err = r.st.DeleteKubernetesPKey(t.Context(), store.KubernetesDeletion{PKey: 0x1005, CreatedBy: "nico", Request: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	r.wait(j, store.StatusCompleted)
	files, policies, qos = r.sighups()
	n = len(files) - 1
	if qos[n] || policies[n] != "" {
		t.Errorf("the SIGHUP after the last set pkey's removal: qos %v, policy %q", qos[n], policies[n])
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
}

// A Kubernetes pkey's QoS reaches OpenSM in both files, in place before the
// SIGHUP: the partition's mtu=, rate= and sl=, and its qos-level in the QoS
// policy. A sweep that drops the policy fails the change's job (the paths
// are not limited as recorded), and the next change is applied and proven.
func TestLeadQoSPolicy(t *testing.T) {
	r := qosRig(t)
	r.sm.sweeps = []string{"applied", "qos-rejected"} // the term's first apply, then the change's
	_, end := r.lead()
	waitLog(t, r.logs, "partitions applied", `"revision":0,`)
	mtu, sl, rate := 4, 3, 200000
	j, err := r.st.AddKubernetesGUIDs(t.Context(), store.KubernetesAddition{PKey: 0x1005, CreatedBy: "nico", Request: "{}",
		Members: []store.KubernetesMember{{GUID: guidA, Membership: fabric.Full}},
		QoS:     store.QoSChange{MTULimit: &mtu, ServiceLevel: &sl, RateMbps: &rate}})
	if err != nil {
		t.Fatal(err)
	}
	failed := r.wait(j, store.StatusFailed)
	if !strings.Contains(failed.Error, "OpenSM did not apply the QoS policy with this change") ||
		!strings.Contains(failed.Error, "ERR AC03") {
		t.Errorf("the job of a sweep that dropped the policy failed with %q", failed.Error)
	}
	_, _, reloads := r.sm.state()
	r.sm.mu.Lock()
	policies := append([]string{}, r.sm.policies...)
	r.sm.mu.Unlock()
	if len(reloads) < 2 || len(policies) != len(reloads) {
		t.Fatalf("%d SIGHUPs, %d QoS policies read with them", len(reloads), len(policies))
	}
	if !strings.Contains(reloads[1], "k8s-1005=0x1005, ipoib, mtu=5, rate=17, sl=3 :") {
		t.Errorf("the change's partitions file:\n%s", reloads[1])
	}
	level := "        name: k8s-1005\n        use: Kubernetes pkey 0x1005\n        sl: 3\n        mtu-limit: 5\n        rate-limit: 17\n"
	if !strings.Contains(policies[1], level) || !strings.Contains(policies[1], "        pkey: 0x1005\n") {
		t.Errorf("the change's QoS policy:\n%s", policies[1])
	}
	if policies[0] != "" {
		t.Errorf("the first apply, with no pkey's QoS set, has a QoS policy:\n%s", policies[0])
	}

	sl = 1
	j, err = r.st.SetKubernetesQoS(t.Context(), store.KubernetesQoS{PKey: 0x1005, QoS: store.QoSChange{ServiceLevel: &sl}})
	if err != nil {
		t.Fatal(err)
	}
	r.wait(j, store.StatusCompleted)
	r.sm.mu.Lock()
	last := r.sm.policies[len(r.sm.policies)-1]
	r.sm.mu.Unlock()
	if !strings.Contains(last, "        sl: 1\n        mtu-limit: 5\n        rate-limit: 17\n") {
		t.Errorf("the QoS policy of the completed change:\n%s", last)
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
}

// A QoS policy file edited by hand is drift: OpenSM would read it at its next
// heavy sweep. The check interval's drift repair writes it again and applies.
func TestLeadRepairsAnEditedQoSPolicy(t *testing.T) {
	r := qosRig(t)
	_, end := r.lead()
	waitLog(t, r.logs, "partitions applied", `"revision":0,`)
	sl := 2
	j, err := r.st.AddKubernetesGUIDs(t.Context(), store.KubernetesAddition{PKey: 0x1005, CreatedBy: "nico", Request: "{}",
		Members: []store.KubernetesMember{{GUID: guidA, Membership: fabric.Full}}, QoS: store.QoSChange{ServiceLevel: &sl}})
	if err != nil {
		t.Fatal(err)
	}
	r.wait(j, store.StatusCompleted)
	written, err := os.ReadFile(r.sm.qosFile)
	if err != nil {
		t.Fatal(err)
	}
	_, _, before := r.sm.state()
	if err := os.WriteFile(r.sm.qosFile, []byte("qos-levels\nend-qos-levels\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitLog(t, r.logs, "partitions file drifted", "the QoS policy file is not what was last applied")
	deadline := time.Now().Add(10 * time.Second)
	for _, _, reloads := r.sm.state(); len(reloads) <= len(before); _, _, reloads = r.sm.state() {
		if time.Now().After(deadline) {
			t.Fatalf("the edited QoS policy was not applied again\nlog:\n%s", r.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.sm.mu.Lock()
	last := r.sm.policies[len(r.sm.policies)-1]
	r.sm.mu.Unlock()
	if last != string(written) {
		t.Errorf("the SIGHUP after the repair found the QoS policy\n%s\nwant\n%s", last, written)
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
}
